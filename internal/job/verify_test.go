package job_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestVerify checks that Verify refuses every answer that can be caught
// as wrong (issue 22, findings 5, 7, 8 and 9: forged answers were
// printed): a solution against the rules or the givens, none for a
// solvable puzzle, multiple for a unique one; and accepts the right ones.
// A unique solution's uniqueness, and a gave_up, are taken at their word
// only when Proven (issue 28: forged unique and gave_up were printed);
// Unproven, solving must agree.
func TestVerify(t *testing.T) {
	ctx := context.Background()
	parse := func(s string) solver.Grid {
		g, err := solver.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	solve := func(g solver.Grid, first bool) job.Outcome {
		r, err := solver.Solve(ctx, &g, solver.Options{FirstSolution: first})
		return job.FromSolve(&g, r, err)
	}
	uniquePuzzle := parse("..............3.85..1.2.......5.7.....4...1...9.......5......73..2.1........4...9")
	unique := solve(uniquePuzzle, false)
	multiPuzzle := uniquePuzzle
	multiPuzzle[14], multiPuzzle[16] = 0, 0
	multi := solve(multiPuzzle, false)
	if unique.Status != result.StatusUnique || multi.Status != result.StatusMultiple {
		t.Fatalf("fixtures: %s and %s", unique.Status, multi.Status)
	}
	broken := unique
	broken.Solution[0], broken.Solution[1] = broken.Solution[1], broken.Solution[0]
	otherGivens := unique
	otherGivens.Puzzle = multiPuzzle // the same solution, other givens: still right
	wrongGiven := unique
	for i, v := range wrongGiven.Puzzle {
		if v == 0 {
			wrongGiven.Puzzle[i] = wrongGiven.Solution[i]%9 + 1
			break
		}
	}
	for _, tc := range []struct {
		name  string
		o     job.Outcome
		first bool
		prov  job.Provenance
		ok    bool
	}{
		{"unique", unique, false, job.Unproven, true},
		{"solved", solve(multiPuzzle, true), true, job.Unproven, true},
		{"multiple", multi, false, job.Unproven, true},
		{"unique, same solution, fewer givens, proven", otherGivens, false, job.Proven, true},
		{"unique, same solution, fewer givens (several solutions), unproven", otherGivens, false, job.Unproven, false},
		{"none of a puzzle without a solution", noSolution(t, unique), false, job.Unproven, true},
		{"unique breaking the rules", broken, false, job.Unproven, false},
		{"unique against a given", wrongGiven, false, job.Unproven, false},
		{"none of a solvable puzzle", job.Outcome{Status: result.StatusNone, Puzzle: uniquePuzzle}, false, job.Unproven, false},
		{"none of a solvable puzzle, first", job.Outcome{Status: result.StatusNone, Puzzle: uniquePuzzle}, true, job.Unproven, false},
		{"multiple of a unique puzzle", job.Outcome{Status: result.StatusMultiple, Puzzle: uniquePuzzle, Solution: unique.Solution}, false, job.Unproven, false},
		// A right solution is checked; that no other exists takes a
		// full solve, unless a trusted worker's proof vouches for it.
		{"unique of a puzzle with several, proven", job.Outcome{Status: result.StatusUnique, Puzzle: multiPuzzle, Solution: multi.Solution}, false, job.Proven, true},
		{"unique of a puzzle with several, unproven", job.Outcome{Status: result.StatusUnique, Puzzle: multiPuzzle, Solution: multi.Solution}, false, job.Unproven, false},
		{"unique, proven", unique, false, job.Proven, true},
		{"gave_up of an easy puzzle, proven", job.Outcome{Status: result.StatusGaveUp, Puzzle: uniquePuzzle, Error: "forged"}, false, job.Proven, true},
		{"gave_up of an easy puzzle, unproven", job.Outcome{Status: result.StatusGaveUp, Puzzle: uniquePuzzle, Error: "forged"}, false, job.Unproven, false},
		{"gave_up of an easy puzzle, unproven, first", job.Outcome{Status: result.StatusGaveUp, Puzzle: uniquePuzzle, Error: "forged"}, true, job.Unproven, false},
		{"invalid is no answer", job.Outcome{Status: result.StatusInvalid, Text: "x", Error: "bad"}, false, job.Unproven, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Verify(ctx, tc.first, tc.prov)
			if (err == nil) != tc.ok {
				t.Errorf("Verify = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// BenchmarkVerify measures what a reader pays per answer it verifies: a
// unique solution is checked (proven) or solved again (unproven), none
// and multiple solved again.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	g, err := solver.Parse("..............3.85..1.2.......5.7.....4...1...9.......5......73..2.1........4...9")
	if err != nil {
		b.Fatal(err)
	}
	r, err := solver.Solve(ctx, &g, solver.Options{})
	unique := job.FromSolve(&g, r, err)
	multiPuzzle := g
	multiPuzzle[14], multiPuzzle[16] = 0, 0
	r, err = solver.Solve(ctx, &multiPuzzle, solver.Options{})
	multi := job.FromSolve(&multiPuzzle, r, err)
	none := noSolution(b, unique)
	for _, bc := range []struct {
		name string
		o    job.Outcome
		prov job.Provenance
	}{{"unique/proven", unique, job.Proven}, {"unique/unproven", unique, job.Unproven},
		{"multiple", multi, job.Unproven}, {"none", none, job.Unproven}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.o.Verify(ctx, false, bc.prov); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// noSolution returns the outcome of a puzzle without a solution: u's
// puzzle with a blank filled by a digit that breaks no rule and is not
// the solution's.
func noSolution(t testing.TB, u job.Outcome) job.Outcome {
	t.Helper()
	for i, v := range u.Puzzle {
		if v != 0 {
			continue
		}
		for d := uint8(1); d <= 9; d++ {
			g := u.Puzzle
			if g[i] = d; d == u.Solution[i] || g.Validate() != nil {
				continue
			}
			r, err := solver.Solve(context.Background(), &g, solver.Options{})
			if o := job.FromSolve(&g, r, err); o.Status == result.StatusNone {
				return o
			}
		}
	}
	t.Fatal("no puzzle without a solution found")
	return job.Outcome{}
}

// TestVerifySettlesAnUnprovenGaveUp: an unproven gave_up that the
// reader's solve settles is refused with that answer (a *SettledError,
// matching ErrUnproven), in each mode, for the reader to print instead.
func TestVerifySettlesAnUnprovenGaveUp(t *testing.T) {
	ctx := context.Background()
	g, err := solver.Parse("..............3.85..1.2.......5.7.....4...1...9.......5......73..2.1........4...9")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		first bool
		want  result.Status
	}{{false, result.StatusUnique}, {true, result.StatusSolved}} {
		o := job.Outcome{Status: result.StatusGaveUp, Puzzle: g, Error: "forged"}
		err := o.Verify(ctx, tc.first, job.Unproven)
		se, ok := errors.AsType[*job.SettledError](err)
		if !ok || !errors.Is(err, job.ErrUnproven) {
			t.Fatalf("first %v: Verify = %v, want a *SettledError matching ErrUnproven", tc.first, err)
		}
		if se.Outcome.Status != tc.want || se.Outcome.Check() != nil {
			t.Errorf("first %v: settled as %s (check %v), want a right %s", tc.first, se.Outcome.Status, se.Outcome.Check(), tc.want)
		}
	}
}
