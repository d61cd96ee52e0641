package job

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// The cache's form of an outcome is the compact form, with one change
// that makes a solved puzzle's value 41 bytes instead of 54: a solution
// is stored dense, as its first eight rows' first eight cells, two cells
// (9a+b, a and b the digits less one) in 7 bits, 28 bytes in all; the
// ninth cell of each row and the ninth row follow, since every row and
// column of a solution sums to 45. Values of up to 44 bytes are the ones
// Redis keeps in a single allocation with their object (its embstr
// encoding), which saves it CPU and a quarter of its memory per key. A
// "solution" that does not sum so stays packed.
const (
	// denseBit in the status byte says the solution is dense.
	denseBit = 0x40
	// denseLen is the length of a dense solution: 32 pairs of 7 bits.
	denseLen = 32 * 7 / 8
)

// AppendCacheValue appends o's cache form to dst, as the cache stores it:
// AppendOutcome's form with a dense solution, and Cached clear.
func AppendCacheValue(dst []byte, o *Outcome) []byte {
	if o.Cached {
		c := *o
		c.Cached = false
		o = &c
	}
	return appendOutcome(dst, o, true)
}

// DecodeCacheValue decodes a whole value of AppendCacheValue's form (or of
// AppendOutcome's).
func DecodeCacheValue(data []byte) (Outcome, error) {
	d := decoder{data: data, dense: true}
	o := d.outcome()
	if d.err == nil && d.off != len(data) {
		d.fail(fmt.Sprintf("%d bytes after the outcome", len(data)-d.off))
	}
	return o, d.err
}

// appendDense appends g's dense form to dst. The rest of g must follow
// from it (sums45).
func appendDense(dst []byte, g *solver.Grid) []byte {
	var acc uint64 // bits not yet written, n of them
	n := 0
	for r := range 8 {
		for c := 0; c < 8; c += 2 {
			acc |= uint64(9*(g[9*r+c]-1)+g[9*r+c+1]-1) << n
			if n += 7; n >= 32 {
				dst = append(dst, byte(acc), byte(acc>>8), byte(acc>>16), byte(acc>>24))
				acc, n = acc>>32, n-32
			}
		}
	}
	return dst
}

// sums45 reports whether every cell of g is 1-9 and every row and column
// sums to 45: whether g is what completed makes it.
func sums45(g *solver.Grid) bool {
	var cols [9]int
	for r := range 9 {
		s := 0
		for c, v := range g[9*r : 9*r+9] {
			if v-1 > 8 {
				return false
			}
			s += int(v)
			cols[c] += int(v)
		}
		if s != 45 {
			return false
		}
	}
	return cols == [9]int{45, 45, 45, 45, 45, 45, 45, 45, 45}
}

// completed returns g with its ninth column and row made what the sums of
// 45 say, or a grid with a 0 when g's digits are not 1-9 or a sum falls
// outside them.
func completed(g *solver.Grid) solver.Grid {
	c := *g
	for r := range 8 {
		s := 45
		for _, v := range c[9*r : 9*r+8] {
			if v < 1 || v > 9 {
				return solver.Grid{}
			}
			s -= int(v)
		}
		c[9*r+8] = digitOr0(s)
	}
	for col := range 9 {
		s := 45
		for r := range 8 {
			s -= int(c[9*r+col])
		}
		c[72+col] = digitOr0(s)
	}
	return c
}

// digitOr0 returns s as a cell: s when it is 1-9, else 0.
func digitOr0(s int) uint8 {
	if s < 1 || s > 9 {
		return 0
	}
	return uint8(s)
}

// pairDigits[p] are the two digits of the pair value p (below 81).
var pairDigits = func() (t [81][2]uint8) {
	for p := range t {
		t[p] = [2]uint8{uint8(p/9 + 1), uint8(p%9 + 1)}
	}
	return t
}()

// denseGrid decodes a dense solution.
func (d *decoder) denseGrid(what string) solver.Grid {
	var g solver.Grid
	b := d.bytes(denseLen, what)
	if d.err != nil {
		return g
	}
	var acc uint64 // bits not yet read, n of them
	n, next := 0, 0
	for p := range 32 {
		if n < 7 {
			acc |= uint64(binary.LittleEndian.Uint32(b[next:])) << n
			n, next = n+32, next+4
		}
		v := acc & 127
		acc, n = acc>>7, n-7
		if v >= 81 {
			d.off -= denseLen
			d.fail(fmt.Sprintf("%s: pair %d has value %d, past 80", what, p+1, v))
			return g
		}
		i := 9*(p/4) + 2*(p%4)
		g[i], g[i+1] = pairDigits[v][0], pairDigits[v][1]
	}
	if g = completed(&g); slices.Contains(g[:], 0) {
		d.off -= denseLen
		d.fail(what + ": the rows and columns do not sum to 45 with digits 1-9")
	}
	return g
}
