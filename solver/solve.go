package solver

import (
	"context"
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
	// Guesses counts the branch points: cells where propagation was stuck
	// and the search had to try candidates in turn.
	Guesses int64
	// Nodes counts the positions the search propagated: the start plus one
	// for each candidate tried at a branch point.
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

// Solver holds the memory of one search (a few kilobytes: a copy of the
// position per level of the search tree), so that solving allocates
// nothing. The zero value is ready to use. A Solver is not safe for
// concurrent use; give each goroutine its own.
type Solver struct {
	e engine
}

// Solve is like the package-level Solve, reusing s's memory.
func (sv *Solver) Solve(ctx context.Context, g *Grid, opts Options) (Result, error) {
	if err := g.Validate(); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("solver: not started: %w", err)
	}
	e := &sv.e
	*e = engine{limit: 2, maxNodes: opts.MaxNodes, ctx: ctx, stack: e.stack}
	if opts.FirstSolution {
		e.limit = 1
	}
	if e.maxNodes == 0 {
		e.maxNodes = DefaultMaxNodes
	}
	if e.stack == nil {
		e.stack = new([maxDepth]state)
	}
	s := &e.stack[0]
	s.init(g)
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

// maxDepth bounds the depth of the search tree: every level places at
// least one more cell.
const maxDepth = 82

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
}

// init sets up the position of the givens of g.
func (s *state) init(g *Grid) {
	for i := range s.cand {
		s.cand[i] = 0x7ffffff
		s.prev[i] = 0 // differs from every live word: all get looked at
	}
	s.dirty = 1<<27 - 1
	s.unsolved = [3]uint32{0x7ffffff, 0x7ffffff, 0x7ffffff}
	for i, v := range g {
		if v != 0 {
			s.place(int(v-1), int(cellBand[i]), uint32(i%27))
		}
	}
}

// place puts digit d at cell p of band b: it clears p's row and box in the
// digit's band word, p's column in the digit's other bands and p from every
// other digit. Propagation later notices the row now has one candidate and
// marks the cell solved.
func (s *state) place(d, b int, p uint32) {
	bit := uint32(1) << p
	col := colsMask(1 << (p % 9))
	for i := b; i < 27; i += 3 {
		s.cand[i] &^= bit
	}
	i := d * 3
	s.cand[i] &^= col
	s.cand[i+1] &^= col
	s.cand[i+2] &^= col
	s.cand[i+b] = s.cand[i+b]&keepOnPlace[p] | bit
	s.dirty |= bandWords<<b | 7<<i
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
		placed, ok = s.stacks()
		if !ok {
			return false
		}
		if !placed {
			return true
		}
	}
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
	for dirty != 0 {
		i := bits.TrailingZeros32(dirty)
		dirty &= dirty - 1
		x := s.cand[i]
		if x == s.prev[i] {
			continue
		}
		x &= bandMask[shrink(x)]
		if x == 0 {
			s.dirty = 0
			return false
		}
		s.cand[i], s.prev[i] = x, x
		// Rows of the band that hold exactly one cell.
		var single uint32
		if r := x & 0x1ff; r&(r-1) == 0 {
			single |= r
		}
		if r := x & (0x1ff << 9); r&(r-1) == 0 {
			single |= r
		}
		if r := x & (0x1ff << 18); r&(r-1) == 0 {
			single |= r
		}
		b := int(bandOf[i])
		solved := single & s.unsolved[b]
		if solved == 0 {
			continue
		}
		s.unsolved[b] &^= solved
		for j := b; j < 27; j += 3 {
			s.cand[j] &^= solved
		}
		s.cand[i] = x
		s.prev[i] = x
		col := colsMask(columnsOf(solved))
		d := i - b
		switch b {
		case 0:
			s.cand[d+1] &^= col
			s.cand[d+2] &^= col
		case 1:
			s.cand[d] &^= col
			s.cand[d+2] &^= col
		default:
			s.cand[d] &^= col
			s.cand[d+1] &^= col
		}
		dirty |= bandWords<<b | 7<<d
	}
	s.dirty = 0
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
func (s *state) nakedSingles() (placed, ok bool) {
	for b := 0; b < 3; b++ {
		u := s.unsolved[b]
		if u == 0 {
			continue
		}
		// Count candidates per cell, saturating at two: bit-sliced addition
		// over the nine digit words.
		var one, two uint32
		for d := b; d < 27; d += 3 {
			x := s.cand[d]
			two |= one & x
			one |= x
		}
		if u&^one != 0 {
			return false, false
		}
		singles := u &^ two
		for singles != 0 {
			p := uint32(bits.TrailingZeros32(singles))
			bit := uint32(1) << p
			singles &^= bit
			d := 0
			for ; d < 9; d++ {
				if s.cand[d*3+b]&bit != 0 {
					break
				}
			}
			if d == 9 { // an earlier single in this pass took its last digit
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
// band and once in each column. This gives locked candidates between boxes
// and columns, and hidden singles in columns. It reports whether it removed
// any candidate, and false for ok on a contradiction.
func (s *state) stacks() (changed, ok bool) {
	for d := 0; d < 27; d += 3 {
		x0, x1, x2 := s.cand[d], s.cand[d+1], s.cand[d+2]
		c0, c1, c2 := columnsOf(x0), columnsOf(x1), columnsOf(x2)
		var k0, k1, k2 uint32
		for sh := uint32(0); sh < 9; sh += 3 {
			a := stackKeep[c0>>sh&7|(c1>>sh&7)<<3|(c2>>sh&7)<<6]
			if a == 0 {
				return false, false
			}
			k0 |= (a & 7) << sh
			k1 |= (a >> 3 & 7) << sh
			k2 |= (a >> 6) << sh
		}
		if k0 != c0 || k1 != c1 || k2 != c2 {
			s.cand[d] = x0 & colsMask(k0)
			s.cand[d+1] = x1 & colsMask(k1)
			s.cand[d+2] = x2 & colsMask(k2)
			s.dirty |= 7 << d
			changed = true
		}
	}
	return changed, true
}

// search propagates s and, if it is neither solved nor contradictory,
// branches on the cell with the fewest candidates.
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
	b, p := s.branchCell()
	e.guesses++
	bit := uint32(1) << p
	var digits [9]uint8
	n := 0
	for d := 0; d < 9; d++ {
		if s.cand[d*3+b]&bit != 0 {
			digits[n] = uint8(d)
			n++
		}
	}
	for k := 0; k < n-1; k++ {
		next := &e.stack[depth]
		*next = *s
		next.place(int(digits[k]), b, p)
		e.search(next, depth+1)
		if e.found >= e.limit || e.err != nil {
			return
		}
	}
	s.place(int(digits[n-1]), b, p)
	e.search(s, depth)
}

// branchCell picks the unsolved cell to branch on: the first cell with two
// candidates if there is one, else one with the fewest.
func (s *state) branchCell() (band int, p uint32) {
	best, bestN := -1, 10
	for b := 0; b < 3; b++ {
		u := s.unsolved[b]
		if u == 0 {
			continue
		}
		var one, two, three uint32
		for d := b; d < 27; d += 3 {
			x := s.cand[d]
			three |= two & x
			two |= one & x
			one |= x
		}
		if pairs := u & two &^ three; pairs != 0 {
			return b, uint32(bits.TrailingZeros32(pairs))
		}
		for m := u; m != 0; m &= m - 1 {
			q := bits.TrailingZeros32(m)
			n := 0
			for d := b; d < 27; d += 3 {
				n += int(s.cand[d] >> q & 1)
			}
			if n < bestN {
				best, bestN = b*27+q, n
			}
		}
	}
	return best / 27, uint32(best % 27)
}

// fill writes the solved position to g.
func (s *state) fill(g *Grid) {
	for d := 0; d < 9; d++ {
		for b := 0; b < 3; b++ {
			for m := s.cand[d*3+b]; m != 0; m &= m - 1 {
				g[b*27+bits.TrailingZeros32(m)] = uint8(d + 1)
			}
		}
	}
}
