package solver

import (
	"encoding/binary"
	"math/bits"
)

// Validate checks that no digit repeats in a row, column or box and that
// every cell holds 0-9. It returns nil or a *ParseError.
//
// Solve calls it on every puzzle, so the common case is a fast pass with
// one 27-bit mask per digit (bit u set when the digit is in unit u: rows
// 0-8, columns 9-17, boxes 18-26); only when that pass finds a problem
// does conflict find the first one, in cell order.
//
// The pass visits only the filled cells, found eight at a time
// (filled): a loop over every cell that skipped the empty ones
// mispredicted that branch so often that a 17-clue puzzle took longer to
// check than a full grid (237 against 90 ns now, 40 givens 426 against
// 172; BenchmarkValidate). Nearly full grids take that loop
// (validateDense), where the branch is predicted again.
func (g *Grid) Validate() error { return g.validate(g.filled()) }

// validate is Validate with g's filled cells (filled) given, which Solve
// passes on to the search's set-up.
func (g *Grid) validate(filled [2]uint64) error {
	if bits.OnesCount64(filled[0])+bits.OnesCount64(filled[1]) > denseGivens {
		return g.validateDense()
	}
	var seen [16]uint32
	var dup, over uint32
	for base, m := range filled {
		for ; m != 0; m &= m - 1 {
			i := 64*base + bits.TrailingZeros64(m)
			v := g[i]
			over |= (9 - uint32(v)) >> 31 // v > 9 (and then seen[v&15] means nothing)
			u := cellUnits[i]
			dup |= seen[v&15] & u
			seen[v&15] |= u
		}
	}
	if dup|over == 0 {
		return nil
	}
	return g.conflict()
}

// denseGivens is the number of filled cells above which validateDense is
// the faster: its branch on empty cells is predicted well again, and it
// costs less a cell.
const denseGivens = 64

// validateDense is Validate by a pass over every cell.
func (g *Grid) validateDense() error {
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

// filled returns the cells of g that are not 0: bit i of the first word
// for cell i, bit i-64 of the second for cells 64-80. A loop over its bits
// (bits.TrailingZeros64) visits the givens of a puzzle without a branch
// on every cell, which the pattern of a puzzle's givens makes mispredict.
func (g *Grid) filled() [2]uint64 {
	var m0 uint64
	for k := range 8 {
		m0 |= occupied(g[8*k:]) << (8 * k)
	}
	return [2]uint64{m0, occupied(g[64:]) | occupied(g[72:])<<8 | uint64(min(g[80], 1))<<16}
}

// occupied returns a bit for each of the 8 cells at the start of cells
// that is not 0 (bit i for cells[i]): the multiplication gathers the
// eight top bits of nonzero into the top byte.
func occupied(cells []byte) uint64 {
	return (nonzero(binary.LittleEndian.Uint64(cells)) >> 7) * 0x0102040810204080 >> 56
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
