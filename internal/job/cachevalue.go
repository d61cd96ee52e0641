package job

import (
	"fmt"
	"math/bits"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// The cache's form of an outcome is the compact form, with one change
// that makes a solved puzzle's value 35 bytes instead of 54: a solution
// whose rows are each a permutation of 1-9 (every real one) is stored as
// the rank of each row among the 9! permutations, 19 bits a row, instead
// of packed. Values of up to 44 bytes are the ones Redis keeps in a
// single allocation with their object (its embstr encoding), which saves
// it CPU and about a quarter of its memory per key.
const (
	// rankedBit in the status byte says the solution is in ranks.
	rankedBit = 0x40
	// rowRankBits holds a rank below 9! = 362,880.
	rowRankBits = 19
	// ranksLen is the length of nine row ranks, little-endian bits, the
	// 5 spare ones 0.
	ranksLen = (9*rowRankBits + 7) / 8
	// perms is the number of permutations of a row.
	perms = 362_880
)

// AppendCacheValue appends o's cache form to dst, as the cache stores it:
// AppendOutcome's form with a solution in row ranks, and Cached clear.
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
	d := decoder{data: data, ranked: true}
	o := d.outcome()
	if d.err == nil && d.off != len(data) {
		d.fail(fmt.Sprintf("%d bytes after the outcome", len(data)-d.off))
	}
	return o, d.err
}

// rankRows returns the ranks of g's rows, or false when a row is not a
// permutation of 1-9. A row's rank is its Lehmer code: for each cell, the
// digits smaller than it not used to its left, read in the factorial
// number system.
func rankRows(g *solver.Grid) (out [ranksLen]byte, ok bool) {
	var acc uint64 // bits not yet written
	n, w := 0, 0   // bits in acc, bytes written
	for r := range 9 {
		var used uint16
		rank := uint64(0)
		for i, d := range g[9*r : 9*r+9] {
			bit := uint16(1) << (d - 1)
			if d < 1 || d > 9 || used&bit != 0 {
				return out, false
			}
			rank = rank*uint64(9-i) + uint64(bits.OnesCount16(^used&(bit-1)))
			used |= bit
		}
		acc |= rank << n
		for n += rowRankBits; n >= 8; n -= 8 {
			out[w], acc, w = byte(acc), acc>>8, w+1
		}
	}
	out[w] = byte(acc)
	return out, true
}

// ranks decodes nine row ranks into a grid.
func (d *decoder) ranks(what string) solver.Grid {
	var g solver.Grid
	b := d.bytes(ranksLen, what)
	if d.err != nil {
		return g
	}
	if b[ranksLen-1]>>(9*rowRankBits%8) != 0 {
		d.off -= ranksLen
		d.fail(what + ": spare bits set after the ranks")
		return g
	}
	var acc uint64
	n, next := 0, 0
	for r := range 9 {
		for n < rowRankBits {
			acc |= uint64(b[next]) << n
			n, next = n+8, next+1
		}
		rank := acc & (1<<rowRankBits - 1)
		acc, n = acc>>rowRankBits, n-rowRankBits
		if rank >= perms {
			d.off -= ranksLen
			d.fail(fmt.Sprintf("%s: row %d has rank %d, past the last permutation", what, r+1, rank))
			return g
		}
		var lehmer [9]uint64
		for i := 8; i >= 0; i-- {
			lehmer[i], rank = rank%uint64(9-i), rank/uint64(9-i)
		}
		free := uint16(0x1ff)
		for i, c := range lehmer {
			f := free
			for ; c > 0; c-- {
				f &= f - 1
			}
			k := bits.TrailingZeros16(f)
			g[9*r+i], free = uint8(k+1), free&^(1<<k)
		}
	}
	return g
}
