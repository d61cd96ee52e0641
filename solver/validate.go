package solver

// Validate checks that no digit repeats in a row, column or box and that
// every cell holds 0-9. It returns nil or a *ParseError.
//
// Solve calls it on every puzzle, so the common case is a fast pass with
// one 27-bit mask per digit (bit u set when the digit is in unit u: rows
// 0-8, columns 9-17, boxes 18-26); only when that pass finds a problem
// does conflict find the first one, in cell order.
func (g *Grid) Validate() error {
	var seen [10]uint32
	bad := false
	for i, v := range g {
		if v == 0 {
			continue
		}
		if v > 9 {
			bad = true
			break
		}
		m := cellUnits[i]
		bad = bad || seen[v]&m != 0
		seen[v] |= m
	}
	if !bad {
		return nil
	}
	return g.conflict()
}

// cellUnits[i] has the bits of the row (0-8), column (9-17) and box
// (18-26) of cell i.
var cellUnits = func() (t [81]uint32) {
	for i := range t {
		r, c := i/9, i%9
		t[i] = 1<<r | 1<<(9+c) | 1<<(18+r/3*3+c/3)
	}
	return t
}()

// conflict returns the *ParseError of the first bad cell of g in cell
// order (a value above 9, or a digit that repeats an earlier one), or nil.
func (g *Grid) conflict() error {
	var rows, cols, boxes [9]uint16
	var where [3][9][10]uint8 // unit kind, unit index, digit -> cell+1
	for i, v := range g {
		if v == 0 {
			continue
		}
		if v > 9 {
			return &ParseError{Kind: BadDigit, Cell: i, Digit: int(v)}
		}
		r, c := i/9, i%9
		bx := r/3*3 + c/3
		bit := uint16(1) << v
		for k, u := range [3]*[9]uint16{&rows, &cols, &boxes} {
			idx := [3]int{r, c, bx}[k]
			if u[idx]&bit != 0 {
				return &ParseError{Kind: Conflict, Digit: int(v), Unit: UnitKind(k), Cell: int(where[k][idx][v]) - 1, Cell2: i}
			}
			u[idx] |= bit
			where[k][idx][v] = uint8(i + 1)
		}
	}
	return nil
}
