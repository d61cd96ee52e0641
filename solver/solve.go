package solver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
)

// Status is the outcome of solving a valid puzzle.
type Status uint8

// The statuses Solve reports.
const (
	// Unique: the puzzle has exactly one solution.
	Unique Status = iota + 1
	// Multiple: the puzzle has two or more solutions; Result.Solution is one.
	Multiple
	// None: the puzzle has no solution (proved by exhausting the search).
	None
	// Solved: a solution was found and, as Options.FirstSolution asked, the
	// search stopped there without proving it unique.
	Solved
)

// String returns the status as it appears in output: "unique", "multiple",
// "none" or "solved".
func (s Status) String() string {
	switch s {
	case Unique:
		return "unique"
	case Multiple:
		return "multiple"
	case None:
		return "none"
	case Solved:
		return "solved"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// DefaultMaxNodes is the node budget Solve uses when Options.MaxNodes is 0.
// The hardest known puzzles need a few thousand nodes; a million takes
// well under a second.
const DefaultMaxNodes = 1_000_000

// Options tune Solve. The zero value counts solutions up to two with the
// default node budget.
type Options struct {
	// FirstSolution stops at the first solution (status Solved) instead of
	// searching on for a second one to tell Unique from Multiple.
	FirstSolution bool
	// MaxNodes bounds the search; past it Solve returns a *GaveUpError.
	// 0 means DefaultMaxNodes; a negative value means no bound.
	MaxNodes int64
}

// Result is what Solve found.
type Result struct {
	Status Status
	// Solution is the solved grid when Status is Unique, Multiple or Solved.
	Solution Grid
	// Guesses counts the branch points: positions where propagation was
	// stuck and the search had to try in turn the ways (configurations) a
	// digit has left in a band or stack.
	Guesses int64
	// Nodes counts the positions the search propagated: the start plus one
	// for each configuration tried at a branch point.
	Nodes int64
}

// ErrGaveUp is matched (with errors.Is) by the *GaveUpError Solve returns
// when the node budget runs out.
var ErrGaveUp = errors.New("solver: gave up")

// GaveUpError reports a search stopped by its node budget.
type GaveUpError struct {
	Nodes   int64 // nodes visited when the search stopped
	Guesses int64 // branch points met by then
}

// Error says how far the search went.
func (e *GaveUpError) Error() string {
	return fmt.Sprintf("solver: gave up after %d nodes (%d guesses) without an answer", e.Nodes, e.Guesses)
}

// Is makes errors.Is(err, ErrGaveUp) true.
func (e *GaveUpError) Is(target error) bool { return target == ErrGaveUp }

// ctxCheckEvery is how many nodes pass between two looks at the context.
const ctxCheckEvery = 1024

// Solve solves g. It validates g first (a repeated digit returns the
// *ParseError of Validate). It stops when the node budget runs out
// (*GaveUpError) or ctx is done (ctx.Err(), wrapped); the Result then still
// holds the statistics so far. It is safe for concurrent use; a loop that
// solves many puzzles on one goroutine may keep a Solver instead.
func Solve(ctx context.Context, g *Grid, opts Options) (Result, error) {
	sv := pool.Get().(*Solver)
	defer pool.Put(sv)
	return sv.Solve(ctx, g, opts)
}

var pool = sync.Pool{New: func() any { return new(Solver) }}

// Solver holds the memory of one search (about 25 kilobytes: a copy of the
// position per level of the search tree), so that solving allocates
// nothing. The zero value is ready to use. A Solver is not safe for
// concurrent use; give each goroutine its own.
type Solver struct {
	e engine
}

// Solve is like the package-level Solve, reusing s's memory.
func (sv *Solver) Solve(ctx context.Context, g *Grid, opts Options) (Result, error) {
	e := &sv.e
	if e.stack == nil {
		e.stack = new([maxDepth]state)
	}
	// Validation and the search's set-up share one pass over the givens;
	// the first bad cell is found (as Validate finds it) only when that
	// pass saw one.
	s := &e.stack[0]
	if !s.init(g, g.filled()) {
		return Result{}, g.conflict()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("solver: not started: %w", err)
	}
	*e = engine{limit: 2, maxNodes: opts.MaxNodes, ctx: ctx, stack: e.stack}
	if opts.FirstSolution {
		e.limit = 1
	}
	if e.maxNodes == 0 {
		e.maxNodes = DefaultMaxNodes
	}
	e.search(s, 1)
	e.ctx = nil
	res := Result{Guesses: e.guesses, Nodes: e.nodes, Solution: e.solution}
	switch {
	case e.err != nil:
		return res, e.err
	case e.found == 0:
		res.Status = None
	case e.found == 1 && opts.FirstSolution:
		res.Status = Solved
	case e.found == 1:
		res.Status = Unique
	default:
		res.Status = Multiple
	}
	return res, nil
}

// maxDepth bounds the depth of the search tree: every level fixes one more
// of the 54 pairs of a digit and a band or stack (see branchChute).
const maxDepth = 56

// engine holds one search: its limits, counters, the first solution and
// the positions of the current path through the search tree.
type engine struct {
	ctx      context.Context
	limit    int   // stop after this many solutions
	found    int   // solutions found so far
	maxNodes int64 // negative: unbounded
	nodes    int64
	guesses  int64
	err      error // set when the search was cut short
	solution Grid
	stack    *[maxDepth]state
}

// state is one position of the search. The candidates are kept per digit
// and band (see tables.go): cand[d*3+b] holds the cells of band b where
// digit d+1 may still go. A placed digit keeps its own bit and is cleared
// from every other digit's word. prev holds each word as propagation last
// saw it, so only words that changed are looked at again.
type state struct {
	cand     [27]uint32
	prev     [27]uint32
	unsolved [3]uint32 // cells whose digit is not yet known, per band
	dirty    uint32    // bit i: cand[i] may have changed since it was looked at
	moved    uint32    // bit i: cand[i] changed since stacks last looked at it
	tmoved   uint32    // bit i: cand[i] changed since triads last looked at it
	nmoved   uint32    // bit i: cand[i] changed since nakedSingles last looked at it
	poss     [9]uint64 // per digit, the triads where it is possible (see triads)
	cert     [9]uint64 // per digit, the triads where it is certain
	confs    [9]uint64 // per digit, its configurations (see branchChute) per band and stack, a byte each
}

// init sets up the position of the givens of g, whose filled cells are
// filled (g.filled). It does at once what placing each given would do: a
// digit's word keeps its givens and loses every other given cell and every
// cell in a row, column or box where the digit is given.
//
// It checks g on the way, as Validate does and in the same pass over the
// givens: it reports false when a digit repeats in a unit or a cell holds
// more than 9, and the position is then meaningless.
func (s *state) init(g *Grid, filled [2]uint64) (ok bool) {
	var units [16]uint32 // per value, the units (as in cellUnits) it is given in
	var given [3]uint32  // per band, the given cells
	var own [48]uint32   // per value and band, the value's givens
	var dup, over uint32
	// The givens, by the bits of filled: not a branch on every cell.
	for base, m := range filled {
		for ; m != 0; m &= m - 1 {
			i := 64*base + bits.TrailingZeros64(m)
			v := g[i] & 15
			over |= (9 - uint32(g[i])) >> 31 // above 9 (and then v means nothing)
			b, bit, u := cellBand[i], cellBit[i], cellUnits[i]
			dup |= units[v] & u
			units[v] |= u
			given[b] |= bit
			own[int(v)*3+int(b)] |= bit
		}
	}
	for d := 0; d < 9; d++ {
		u := units[d+1]
		o := (*[3]uint32)(own[(d+1)*3:])
		w := (*[3]uint32)(s.cand[d*3:])
		free := 0x7ffffff &^ colsMask(u>>9&0x1ff)
		w[0] = free&^(given[0]|bandRows[u&7]|boxCells[u>>18&7]) | o[0]
		w[1] = free&^(given[1]|bandRows[u>>3&7]|boxCells[u>>21&7]) | o[1]
		w[2] = free&^(given[2]|bandRows[u>>6&7]|boxCells[u>>24&7]) | o[2]
	}
	s.prev = [27]uint32{} // differs from every live word: all get looked at
	s.dirty = 1<<27 - 1
	s.moved = 1<<27 - 1
	s.tmoved = 1<<27 - 1
	s.nmoved = 1<<27 - 1
	for b := range s.unsolved {
		s.unsolved[b] = 0x7ffffff &^ given[b]
	}
	return dup|over == 0
}

// bandRows maps three bits, one per row of a band, to the band cells in
// those rows; boxCells maps three bits, one per box of a band, to the band
// cells in those boxes.
var bandRows, boxCells = func() (rows, boxes [8]uint32) {
	for m := range 8 {
		for k := 0; k < 3; k++ {
			if m&(1<<k) != 0 {
				rows[m] |= 0x1ff << (9 * k)
				boxes[m] |= colsMask(7 << (3 * k))
			}
		}
	}
	return
}()

// place puts digit d at cell p of band b: it marks the cell solved, and
// clears p's row and box in the digit's band word, p's column in the
// digit's other bands and p from every other digit.
func (s *state) place(d, b int, p uint32) {
	bit := uint32(1) << p
	s.unsolved[b] &^= bit
	col := colsMask(1 << (p % 9))
	i := d * 3
	dirty := s.clearBand(b, bit) |
		(clear(&s.cand[i], col)|clear(&s.cand[i+1], col)<<1|clear(&s.cand[i+2], col)<<2)<<i
	s.cand[i+b] = s.cand[i+b]&keepOnPlace[p] | bit
	s.dirty |= dirty | 1<<(i+b)
}

// clear clears the bits of m in *w and returns 1 if that changed it, else
// 0.
func clear(w *uint32, m uint32) uint32 {
	x := *w
	*w = x &^ m
	if x&m != 0 {
		return 1
	}
	return 0
}

// clearBand clears the cells of m from the nine words of band b and returns
// the bits (as in state.dirty) of the words that changed.
func (s *state) clearBand(b int, m uint32) uint32 {
	w := (*[25]uint32)(s.cand[b:])
	ch := clear27(&w[0], m) | clear27(&w[3], m)<<3 | clear27(&w[6], m)<<6 |
		clear27(&w[9], m)<<9 | clear27(&w[12], m)<<12 | clear27(&w[15], m)<<15 |
		clear27(&w[18], m)<<18 | clear27(&w[21], m)<<21 | clear27(&w[24], m)<<24
	return ch << b
}

// clear27 clears the bits of m in *w and returns 1 if that changed it,
// else 0, without a branch: the bits cleared, a 27-bit number, carry into
// bit 27 when added to 1<<27-1 unless they are none.
func clear27(w *uint32, m uint32) uint32 {
	x := *w
	*w = x &^ m
	return (x&m + (1<<27 - 1)) >> 27
}

// propagate applies the constraints until nothing changes. It reports
// false on a contradiction.
func (s *state) propagate() bool {
	for {
		if !s.propagateBands() {
			return false
		}
		placed, ok := s.nakedSingles()
		if !ok {
			return false
		}
		if placed {
			continue
		}
		// Every cell placed, each by a rule that took its digit out of
		// the cell's row, column and box first: a solution, with nothing
		// left for the other rules.
		if s.unsolved[0]|s.unsolved[1]|s.unsolved[2] == 0 {
			return true
		}
		placed, ok = s.stacks()
		if !ok {
			return false
		}
		if placed {
			continue
		}
		placed, ok = s.triads()
		if !ok {
			return false
		}
		if !placed {
			return true
		}
	}
}

// Triads. A minirow (three cells of a row inside one box) and a minicolumn
// hold three different digits, since their cells do. So for each of the 54
// of them:
//   - at least three digits must be possible there: if only three are, each
//     of them is certain to be there;
//   - at most three digits are certain to be there: if three are, no other
//     digit may be.
//
// A digit is certain to be in a minirow when the minirow is its only place
// in the row or in the box (and in a minicolumn likewise, in the column or
// in the box). Certainty is put into the words by taking the digit out of
// the rest of the row and box (column and box); band and stack rules do the
// rest.
//
// Each digit's triads fit one 64-bit word. Minirow (r, k) of band b, with
// its indicator at bit 9r+3k of the band word (see minirowsAt), is bit
// 9r+3k+b: the three bands interleave. Minicolumn c of band b is bit
// 32+9b+c. The digits are counted per triad, up to four, with bit-sliced
// adders over the nine words, so all 54 triads are decided at once.

const (
	// rowFirst, rowSecond and rowThird have the triad bits (all bands) of
	// the minirows in the first, second and third box of each row.
	rowFirst  = 0x1c0e07
	rowSecond = rowFirst << 3
	rowThird  = rowFirst << 6
	// stackFirst has, for the minicolumn half, the first column of each
	// stack in each band; stackSecond and stackThird the next two.
	stackFirst  = 0x1249249
	stackSecond = stackFirst << 1
	stackThird  = stackFirst << 2
	all27       = 1<<27 - 1
)

// triads applies the triad rules. It reports whether it removed any
// candidate, and false for ok on a contradiction.
//
// The marks of a digit depend on its three words only, so they are kept in
// s.poss and s.cert and worked out again only for the digits whose words
// changed since (bits of s.tmoved). branchChute reads s.poss too.
func (s *state) triads() (changed, ok bool) {
	tm := s.tmoved
	s.tmoved = 0
	for tm != 0 {
		d := bits.TrailingZeros32(tm) / 3
		tm &^= 7 << (d * 3)
		x0, x1, x2 := s.cand[d*3], s.cand[d*3+1], s.cand[d*3+2]
		h := minirowsAt(x0) | minirowsAt(x1)<<1 | minirowsAt(x2)<<2
		v := columnsOf(x0) | columnsOf(x1)<<9 | columnsOf(x2)<<18
		// The other minirows of the same row, and of the same box.
		inRow := (h>>3)&(rowFirst|rowSecond) | (h<<6)&rowThird |
			(h>>6)&rowFirst | (h<<3)&(rowSecond|rowThird)
		inBox := (h>>9 | h>>18 | h<<9 | h<<18) & all27
		hc := h &^ (inRow & inBox)
		// The other minicolumns of the same column, and of the same box.
		inCol := (v>>9 | v>>18 | v<<9 | v<<18) & all27
		inStack := (v>>1)&(stackFirst|stackSecond) | (v<<2)&stackThird |
			(v>>2)&stackFirst | (v<<1)&(stackSecond|stackThird)
		vc := v &^ (inCol & inStack)
		s.poss[d] = uint64(h) | uint64(v)<<32
		s.cert[d] = uint64(hc) | uint64(vc)<<32
		s.confs[d] = uint64(permCount[fold(h&minirowTops)]) |
			uint64(permCount[fold(h>>1&minirowTops)])<<8 |
			uint64(permCount[fold(h>>2&minirowTops)])<<16 |
			uint64(permCount[v&7|v>>6&0x38|v>>12&0x1c0])<<24 |
			uint64(permCount[v>>3&7|v>>9&0x38|v>>15&0x1c0])<<32 |
			uint64(permCount[v>>6&7|v>>12&0x38|v>>18&0x1c0])<<40
	}
	// Written out, not a loop: nine additions of each kind.
	var p1, p2, p4, c1, c2, c4 uint64
	p1, p2, p4 = add4(p1, p2, p4, s.poss[0])
	p1, p2, p4 = add4(p1, p2, p4, s.poss[1])
	p1, p2, p4 = add4(p1, p2, p4, s.poss[2])
	p1, p2, p4 = add4(p1, p2, p4, s.poss[3])
	p1, p2, p4 = add4(p1, p2, p4, s.poss[4])
	p1, p2, p4 = add4(p1, p2, p4, s.poss[5])
	p1, p2, p4 = add4(p1, p2, p4, s.poss[6])
	p1, p2, p4 = add4(p1, p2, p4, s.poss[7])
	p1, p2, p4 = add4(p1, p2, p4, s.poss[8])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[0])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[1])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[2])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[3])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[4])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[5])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[6])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[7])
	c1, c2, c4 = add4(c1, c2, c4, s.cert[8])
	const live = all27 | all27<<32
	if live&^(p4|p1&p2) != 0 || c4 != 0 {
		return false, false // a triad with fewer than three digits possible, or more than three certain
	}
	p3 := p1 & p2 &^ p4
	c3 := c1 & c2
	if p3^c3 == 0 {
		return false, true
	}
	act := p3 ^ c3
	for d := 0; d < 9; d++ {
		news := act & s.poss[d] &^ s.cert[d]
		if news == 0 {
			continue
		}
		// Triads where d is now certain, and triads it leaves.
		lock, drop := news&p3, news&c3
		hl, hd := uint32(lock)&all27, uint32(drop)&all27
		vl, vd := uint32(lock>>32), uint32(drop>>32)
		var vcols [3]uint32
		for b := 0; b < 3; b++ {
			vcols[b] = vl >> (9 * b) & 0x1ff
		}
		for b := 0; b < 3; b++ {
			x := s.cand[d*3+b]
			if m := hd >> b & minirowTops; m != 0 {
				x &^= m * 7
			}
			if m := hl >> b & minirowTops; m != 0 {
				cells := m * 7
				rows := (m | m>>3 | m>>6) & 0x40201 * 0x1ff
				boxes := colsMask(((m | m>>9 | m>>18) & 0x49) * 7)
				x &= ^(rows | boxes) | cells
			}
			if cols := vd >> (9 * b) & 0x1ff; cols != 0 {
				x &^= colsMask(cols)
			}
			own := vcols[b]
			other := vcols[(b+1)%3] | vcols[(b+2)%3]
			stack := ((own | own>>1 | own>>2) & 0x49) * 7
			if clear := other | stack&^own; clear != 0 {
				x &^= colsMask(clear)
			}
			if x != s.cand[d*3+b] {
				s.cand[d*3+b] = x
				s.dirty |= 1 << (d*3 + b)
				changed = true
			}
		}
	}
	return changed, true
}

// add4 adds the bits of x to bit-sliced counters (ones, twos, and fours
// or more, which saturates) and returns them.
func add4(c1, c2, c4, x uint64) (uint64, uint64, uint64) {
	carry := c1 & x
	c1 ^= x
	c4 |= c2 & carry
	c2 ^= carry
	return c1, c2, c4
}

// propagateBands runs the band rules on every changed word until all are
// stable. For a word x of digit d in band b:
//   - bandMask keeps only cells in minirows that can be part of a valid
//     placement of d in the band (locked candidates, hidden singles in
//     boxes);
//   - a row left with one cell is a solved cell (hidden single in the row):
//     the cell is cleared from the other digits and its column from d's
//     other two bands.
//
// The words to look at are the bits of s.dirty; a word marked dirty whose
// value has not changed since it was last looked at is skipped.
func (s *state) propagateBands() bool {
	dirty := s.dirty
	var seen uint32 // the words looked at, for the other rules
	for dirty != 0 {
		i := bits.TrailingZeros32(dirty)
		dirty &= dirty - 1
		x := s.cand[i]
		if x == s.prev[i] {
			continue
		}
		// The minirows holding exactly one cell (marked at their first
		// cell), worked out beside the table lookup: the band rule keeps
		// or drops whole minirows.
		t, u, v := x&minirowTops, x>>1&minirowTops, x>>2&minirowTops
		oneCell := (t ^ u ^ v) &^ (t & u)
		lone := x & (oneCell | oneCell<<1 | oneCell<<2) // the cells alone in their minirow
		e := bandRule[shrink(x)]
		x &= uint32(e)
		if x == 0 {
			s.dirty = 0
			return false
		}
		seen |= 1 << i
		s.cand[i], s.prev[i] = x, x
		// Rows of the band that hold exactly one cell: rows left with one
		// minirow, which holds one cell.
		single := lone & uint32(e>>32)
		b := int(bandOf[i])
		solved := single & s.unsolved[b]
		if solved == 0 {
			continue
		}
		s.unsolved[b] &^= solved
		// The solved cells leave the band's other digits, and their
		// columns the digit's other bands. In its own band the columns
		// hold nothing else: bandMask left the digit only the solved
		// cell's minirow in its box. So the columns are cleared from all
		// three words and the word put back.
		// (clearBand written out: a call spills the loop's registers.)
		wb := (*[25]uint32)(s.cand[b:])
		ch := (clear27(&wb[0], solved) | clear27(&wb[3], solved)<<3 | clear27(&wb[6], solved)<<6 |
			clear27(&wb[9], solved)<<9 | clear27(&wb[12], solved)<<12 | clear27(&wb[15], solved)<<15 |
			clear27(&wb[18], solved)<<18 | clear27(&wb[21], solved)<<21 | clear27(&wb[24], solved)<<24) << b
		col := colsMask(columnsOf(solved))
		w := (*[3]uint32)(s.cand[i-b:])
		ch |= (clear27(&w[0], col) | clear27(&w[1], col)<<1 | clear27(&w[2], col)<<2) << (i - b)
		s.cand[i] = x
		dirty |= ch &^ (1 << i)
	}
	s.dirty = 0
	s.moved |= seen
	s.tmoved |= seen
	s.nmoved |= seen
	return true
}

// bandOf[i] is the band of word i.
var bandOf = [27]uint8{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}

// bandWords has the bits of the nine words of band 0 in state.dirty; shift
// it by b for band b.
const bandWords = 0x1249249

// nakedSingles places every unsolved cell that has one candidate left. It
// reports whether it placed any, and false for ok on a contradiction (a
// cell with no candidate).
//
// Only the bands where a word changed since it last looked (bits of
// s.nmoved) are looked at again.
func (s *state) nakedSingles() (placed, ok bool) {
	nm := s.nmoved
	s.nmoved = 0
	for b := 0; b < 3; b++ {
		u := s.unsolved[b]
		if u == 0 || nm&(bandWords<<b) == 0 {
			continue
		}
		// Count candidates per cell, saturating at two: bit-sliced addition
		// over the nine digit words.
		w := (*[25]uint32)(s.cand[b:])
		one, two := w[0], uint32(0)
		two, one = two|one&w[3], one|w[3]
		two, one = two|one&w[6], one|w[6]
		two, one = two|one&w[9], one|w[9]
		two, one = two|one&w[12], one|w[12]
		two, one = two|one&w[15], one|w[15]
		two, one = two|one&w[18], one|w[18]
		two, one = two|one&w[21], one|w[21]
		two, one = two|one&w[24], one|w[24]
		if u&^one != 0 {
			return false, false
		}
		singles := u &^ two
		if singles == 0 {
			continue
		}
		// The digit of each single, from the bits of its index: plane k
		// has the cells where a digit with bit k set is possible.
		p0 := w[3] | w[9] | w[15] | w[21]
		p1 := w[6] | w[9] | w[18] | w[21]
		p2 := w[12] | w[15] | w[18] | w[21]
		p3 := w[24]
		for singles != 0 {
			p := uint32(bits.TrailingZeros32(singles))
			singles &= singles - 1
			d := int(p0>>p&1 | (p1>>p&1)<<1 | (p2>>p&1)<<2 | (p3>>p&1)<<3)
			if s.cand[d*3+b]>>p&1 == 0 { // an earlier single in this pass took its last digit
				return false, false
			}
			s.place(d, b, p)
			placed = true
		}
	}
	return placed, true
}

// stacks applies, for each digit, the rule of bandMask to the three boxes
// of each stack (a column of boxes): in a stack the digit sits once in each
// band and once in each column, so of its minicolumns (the 3x3 matrix of
// bands and columns) only those on a permutation can hold it. This gives
// locked candidates between boxes and columns, and hidden singles in
// columns. It reports whether it removed any candidate, and false for ok
// on a contradiction.
//
// The rule is worked out with shifts for the three stacks at once: a mark
// at band b, column j of a stack stays when bands b+1 and b+2 have marks at
// columns j+1 and j+2 or at j+2 and j+1 (all modulo 3).
//
// Only the digits whose words changed since it last looked at them (bits
// of s.moved) are looked at again.
func (s *state) stacks() (changed, ok bool) {
	moved := s.moved
	s.moved = 0
	for moved != 0 {
		d := bits.TrailingZeros32(moved) / 3 * 3
		moved &^= 7 << d
		x0, x1, x2 := s.cand[d], s.cand[d+1], s.cand[d+2]
		v := columnsOf(x0) | columnsOf(x1)<<9 | columnsOf(x2)<<18
		// The same marks one band and two bands on, then each with the
		// columns of the stack turned by one and by two: a mark stays if
		// the two other bands can take the two other columns.
		r1 := (v>>9 | v<<18) & all27
		r2 := (v>>18 | v<<9) & all27
		keep := v & (nextCol(r1)&prevCol(r2) | prevCol(r1)&nextCol(r2))
		if keep == v {
			continue
		}
		if f := columnsOf(keep); (f|f>>1|f>>2)&0x49 != 0x49 {
			return false, false // a stack where the digit has no place left
		}
		s.cand[d] = x0 & colsMask(keep&0x1ff)
		s.cand[d+1] = x1 & colsMask(keep>>9&0x1ff)
		s.cand[d+2] = x2 & colsMask(keep>>18)
		s.dirty |= 7 << d
		changed = true
	}
	return changed, true
}

// nextCol moves each minicolumn mark (bit 9b+c, as triads lays them out)
// to the column before it in its stack, turning around: at column c it
// gives the mark of the next column of the stack.
func nextCol(y uint32) uint32 {
	return (y>>1)&(stackFirst|stackSecond) | (y<<2)&stackThird
}

// prevCol is like nextCol, giving the mark of the column two on.
func prevCol(y uint32) uint32 {
	return (y>>2)&stackFirst | (y<<1)&(stackSecond|stackThird)
}

// search propagates s and, if it is neither solved nor contradictory,
// branches on the configurations of one digit in one band or stack (see
// branchChute). The last branch reuses s; the others work on a copy one
// level down e.stack.
func (e *engine) search(s *state, depth int) {
	e.nodes++
	if e.nodes > e.maxNodes && e.maxNodes >= 0 {
		e.nodes-- // this node was not visited
		e.err = &GaveUpError{Nodes: e.nodes, Guesses: e.guesses}
		return
	}
	if e.nodes&(ctxCheckEvery-1) == 0 {
		if err := e.ctx.Err(); err != nil {
			e.err = fmt.Errorf("solver: stopped after %d nodes: %w", e.nodes, err)
			return
		}
	}
	if !s.propagate() {
		return
	}
	if s.unsolved[0]|s.unsolved[1]|s.unsolved[2] == 0 {
		e.found++
		if e.found == 1 {
			s.fill(&e.solution)
		}
		return
	}
	e.guesses++
	st, u, d, pat := s.branchChute()
	// The configurations left, in the order of perms, by the bits of a
	// table entry: no branch per permutation.
	left := uint32(permsIn[pat])
	for ; left&(left-1) != 0; left &= left - 1 {
		next := &e.stack[depth]
		*next = *s
		next.keepConfig(st, u, d, uint32(perms[bits.TrailingZeros32(left)]))
		e.search(next, depth+1)
		if e.found >= e.limit || e.err != nil {
			return
		}
	}
	s.keepConfig(st, u, d, uint32(perms[bits.TrailingZeros32(left)&7]))
	e.search(s, depth)
}

// fill writes the solved position to g. A band's 27 cells are
// consecutive in g, so eight cells are written at once: each bit of a
// cell's digit is gathered from the words of the digits that have it (a
// bit plane), and spread to one bit per byte with a table.
func (s *state) fill(g *Grid) {
	var out [3*27 + 8]uint8 // room for the last band's last eight bytes
	for b := 0; b < 3; b++ {
		w := (*[25]uint32)(s.cand[b:])
		// Digit d+1's word is w[3d]; the planes of the digit's bits.
		q0 := w[0] | w[6] | w[12] | w[18] | w[24] // 1, 3, 5, 7, 9
		q1 := w[3] | w[6] | w[15] | w[18]         // 2, 3, 6, 7
		q2 := w[9] | w[12] | w[15] | w[18]        // 4, 5, 6, 7
		q3 := w[21] | w[24]                       // 8, 9
		for k := uint(0); k < 32; k += 8 {
			v := spread8[q0>>k&0xff] | spread8[q1>>k&0xff]<<1 | spread8[q2>>k&0xff]<<2 | spread8[q3>>k&0xff]<<3
			binary.LittleEndian.PutUint64(out[b*27+int(k):], v)
		}
	}
	*g = Grid(out[:81])
}

// keepConfig keeps digit d only in configuration m of band u (of stack u
// when st): m has one bit per row and box of the band (band and column of
// the stack) that the digit takes.
func (s *state) keepConfig(st bool, u, d int, m uint32) {
	if !st {
		s.cand[d*3+u] &= minirowCells[m]
	} else {
		for b := 0; b < 3; b++ {
			j := (m >> (3 * b)) & 7
			s.cand[d*3+b] &^= colsMask((7 &^ j) << (3 * u))
		}
	}
	s.dirty |= 7 << (d * 3)
}

// branchChute picks what to branch on. A digit's configuration in a band
// is the set of three minirows it takes, one per row and box: one of six
// permutations (in a stack, the three minicolumns). A digit is open in a
// chute when it has two or more left. branchChute takes, of the chutes
// with an open digit, the one with the fewest open digits when that is six
// or fewer (see openMost), and among those, or among all when every chute
// has seven or more, the one with the fewest configurations left over all
// digits (tdoku's rule); in it, the digit with the fewest configurations,
// two or more. The search then tries each of them.
//
// When every band and stack is fixed, propagation has placed every digit
// (each box of a digit's band word is down to the cell where its minirow
// and minicolumn cross), so a position that is not solved always has a
// chute to branch on. Every level of the search fixes one more digit in
// one more chute, so the search is at most 54 levels deep.
func (s *state) branchChute() (st bool, u, d int, pat uint32) {
	// Per chute, a byte each: the configurations summed over the digits,
	// and the open digits (two or more configurations; a count is at most
	// 6, so adding 0x7e sets a byte's top bit exactly from 2 on).
	var tot, open uint64
	for _, c := range s.confs {
		tot += c
		open += (c + 0x7e7e7e7e7e7e) >> 7 & 0x010101010101
	}
	// The minimum of keys made of the open digits, the configurations and
	// the index: the first of the best, found with min, not a branch per
	// comparison. A fixed chute (no open digit) gets a key past the rest;
	// seven or more open digits count as fifteen, so that those chutes go
	// by their configurations alone.
	key := uint64(1 << 16)
	for c := uint64(0); c < 6; c++ {
		n, o := tot>>(8*c)&0xff, open>>(8*c)&0xff
		key = min(key, (o-1)&(1<<15)|(o|(openMost-o)>>60)<<11|n<<3|c)
	}
	best := int(key & 7)
	dkey := uint64(1 << 16)
	for dd, c := range s.confs {
		n := c >> (8 * best) & 0xff
		dkey = min(dkey, (n-2)&(1<<15)|n<<4|uint64(dd))
	}
	bd := int(dkey & 15)
	return best >= 3, best % 3, bd, chutePattern(s.poss[bd], best)
}

// openMost is the most open digits a chute may have to be ranked by them
// first (see branchChute). Measured counting to two on slices of
// forum_hardest_1905_11plus and top1465, as given and with their digits,
// rows, columns, bands and stacks shuffled at random (so that no labelling
// or order of a file counts): 6 gives the fewest nodes (4 and 5 change
// little, 7 to 9 give 2-3% more); ranking by the configurations alone, as
// tdoku does, gives 7-14% more on the hard list and 2% more on top1465,
// and 10% fewer on 17_clue, whose trees are one or two nodes.
const openMost = 6

// chutePattern returns the 3x3 matrix (see tables.go) of a digit in chute
// c (bands 0-2, then stacks 0-2), from its triads t as triads lays them
// out: for a band, bit 3k+r says whether row r has a candidate in box k;
// for a stack, bit 3b+j whether band b has one in the stack's column j.
func chutePattern(t uint64, c int) uint32 {
	if c < 3 {
		return fold(uint32(t) >> c & minirowTops)
	}
	w := uint32(t>>32) >> (3 * (c - 3))
	return w&7 | w>>6&0x38 | w>>12&0x1c0
}
