package solver

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// FuzzParseSolve parses any text and solves what parses, with a small node
// budget so that no input holds the fuzzer up. Parse must not panic, must
// agree with its general path, and must return either a valid grid or a
// *ParseError whose fields make sense. Solve must return a valid solution
// that keeps the givens, None, or give up; and its status must be right:
//
//   - Multiple must come with a second solution, different from the one
//     returned: one is looked for with each empty cell in turn barred from
//     the digit it has in the first (see checkSecondSolution), and checked
//     on its own;
//   - whenever the naive reference solver of the tests can decide the
//     puzzle within fuzzNaiveNodes nodes, its status (Unique, Multiple or
//     None) and, for Unique, its solution must be the same.
//
// The seeds are the inputs of TestParse, a few fixtures and statusSeeds.
// Run it with
//
//	go test -fuzz FuzzParseSolve -fuzztime 20s ./solver/
func FuzzParseSolve(f *testing.F) {
	for _, tc := range parseTests {
		f.Add(tc.in)
	}
	for _, name := range []string{"17_clue_300.txt", "hardest_100.txt", "serg_200.txt"} {
		f.Add(fixtureLines(f, name)[0])
	}
	gs, _ := statusSeeds(f)
	for _, g := range gs {
		f.Add(g.String())
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := Parse(s)
		if len(s) <= MaxInputLen {
			checkSameParse(t, s)
		}
		if err != nil {
			checkParseError(t, s, g, err)
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("Parse(%q) returned an invalid grid %s: %v", s, g.String(), err)
		}
		if h, err := Parse(g.String()); err != nil || h != g {
			t.Fatalf("Parse(%q) = %s, which parses again as %s, %v", s, g.String(), h.String(), err)
		}
		r, err := Solve(context.Background(), &g, Options{MaxNodes: fuzzMaxNodes})
		if err != nil {
			if !errors.Is(err, ErrGaveUp) {
				t.Fatalf("Solve(%s): %v", g.String(), err)
			}
			return
		}
		switch r.Status {
		case Unique, Multiple:
			checkSolution(t, &g, &r.Solution)
		case None:
		default:
			t.Fatalf("Solve(%s): status %v", g.String(), r.Status)
		}
		if r.Status == Multiple {
			checkSecondSolution(t, &g, &r.Solution)
		}
		if want, wantSol, ok := naiveSolveWithin(&g, fuzzNaiveNodes); ok {
			if r.Status != want {
				t.Fatalf("Solve(%s): status %v, the naive solver says %v", g.String(), r.Status, want)
			}
			if want == Unique && r.Solution != wantSol {
				t.Fatalf("Solve(%s): solution %s, the naive solver says %s", g.String(), r.Solution.String(), wantSol.String())
			}
		}
	})
}

// statusSeeds returns the puzzles of testdata/fuzz_status.txt and their
// statuses, which the naive solver decides quickly (TestStatusSeeds checks
// them): 20 of serg_200.txt (multiple solutions each), and 17-clue puzzles
// with 14 more givens from their solution (unique), 4 of their givens
// blanked too (most multiple), or one wrong given added (none).
func statusSeeds(tb testing.TB) ([]Grid, []Status) {
	tb.Helper()
	var gs []Grid
	var sts []Status
	names := map[string]Status{"unique": Unique, "multiple": Multiple, "none": None}
	for i, l := range fixtureLines(tb, "fuzz_status.txt") {
		p, name, _ := strings.Cut(l, " ")
		g, err := Parse(p)
		st, ok := names[name]
		if err != nil || !ok {
			tb.Fatalf("fuzz_status.txt:%d: %q: %v", i+1, l, err)
		}
		gs = append(gs, g)
		sts = append(sts, st)
	}
	return gs, sts
}

// fuzzMaxNodes, fuzzSecondNodes and fuzzNaiveNodes are the node budgets
// of FuzzParseSolve: ours, ours in all when looking for a second solution,
// and the naive solver's when it checks a status.
const (
	fuzzMaxNodes    = 20_000
	fuzzSecondNodes = 50_000
	fuzzNaiveNodes  = 100_000
)

// checkSecondSolution fails t unless g, for which Solve returned sol and
// status Multiple, has a second solution. A second solution differs from
// sol in some empty cell, so it searches each empty cell in turn with the
// digit of sol taken out of the cell's candidates, and checks the first
// solution found on its own. If the searches need more than
// fuzzSecondNodes nodes in all, the status cannot be checked, and it
// returns.
func checkSecondSolution(t *testing.T, g, sol *Grid) {
	t.Helper()
	var sv Solver
	e := &sv.e
	nodes := int64(0)
	for i, v := range g {
		if v != 0 {
			continue
		}
		*e = engine{limit: 1, maxNodes: fuzzSecondNodes - nodes, ctx: context.Background(), stack: e.stack}
		if e.stack == nil {
			e.stack = new([maxDepth]state)
		}
		s := &e.stack[0]
		s.init(g, g.filled())
		w := int(sol[i]-1)*3 + int(cellBand[i])
		s.cand[w] &^= cellBit[i]
		s.dirty |= 1 << w
		e.search(s, 1)
		nodes += e.nodes
		if e.err != nil {
			return // out of budget: undecided
		}
		if e.found > 0 {
			checkSolution(t, g, &e.solution)
			if e.solution[i] == sol[i] {
				t.Fatalf("puzzle %s: a solution with %d at %s, which was taken out", g.String(), sol[i], CellName(i))
			}
			return
		}
	}
	t.Fatalf("puzzle %s: status %v, but every empty cell must hold the digit of the solution %s", g.String(), Multiple, sol.String())
}

// checkParseError fails t unless err, returned with g by Parse(s), is a
// *ParseError that Parse may return, with a zero g.
func checkParseError(t *testing.T, s string, g Grid, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("Parse(%q): %v (%T), want a *ParseError", s, err, err)
	}
	if g != (Grid{}) {
		t.Fatalf("Parse(%q) returned grid %s with error %v", s, g.String(), err)
	}
	var ok bool
	switch pe.Kind {
	case TooLong:
		ok = len(s) > MaxInputLen && pe.Len == len(s)
	case CellCount:
		// Every cell is counted; a whole input of 81 cells, or a grid
		// line of 9, is no error.
		ok = pe.Cells >= 0 && pe.Cells <= len(s) && pe.Line >= 0 &&
			(pe.Line == 0 && pe.Cells != 81 || pe.Line > 0 && pe.Cells != 9)
	case BadChar:
		ok = pe.Line >= 1 && pe.Col >= 1 && pe.Cell >= -1 && pe.Cell <= 80
	case Conflict:
		ok = pe.Digit >= 1 && pe.Digit <= 9 && pe.Cell >= 0 && pe.Cell < pe.Cell2 && pe.Cell2 <= 80
	}
	if !ok {
		t.Fatalf("Parse(%q): unexpected error %+v", s, *pe)
	}
	if pe.Error() == "" {
		t.Fatalf("Parse(%q): empty error message", s)
	}
}

// TestStatusSeeds checks the statuses of testdata/fuzz_status.txt with the
// naive solver, within the budget FuzzParseSolve gives it, and that there
// are enough of each for the fuzz target's status checks.
func TestStatusSeeds(t *testing.T) {
	counts := map[Status]int{}
	gs, sts := statusSeeds(t)
	for i, g := range gs {
		st, _, ok := naiveSolveWithin(&g, fuzzNaiveNodes)
		if !ok || st != sts[i] {
			t.Errorf("fuzz_status.txt:%d: %s: the naive solver says %v (decided: %v), the file %v", i+1, g.String(), st, ok, sts[i])
		}
		counts[st]++
	}
	for _, st := range []Status{Unique, Multiple, None} {
		if counts[st] < 10 {
			t.Errorf("only %d seeds of status %v: FuzzParseSolve needs more", counts[st], st)
		}
	}
}
