package solver

// Validate checks that no digit repeats in a row, column or box and that
// every cell holds 0-9. It returns nil or a *ParseError.
func (g *Grid) Validate() error {
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
