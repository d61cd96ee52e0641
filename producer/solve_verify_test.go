package producer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestConfirmCheaply checks the solve that may stand for a signed unique
// reply's proof: it settles only what it solved within its budget, and
// takes a unique only when it found that same answer.
func TestConfirmCheaply(t *testing.T) {
	outcome := func(t *testing.T, p string, opts solver.Options) (solver.Grid, job.Outcome) {
		t.Helper()
		g, err := solver.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := solver.Solve(context.Background(), &g, opts)
		return g, job.FromSolve(&g, r, err)
	}
	easy := testenv.Puzzles(t, "testdata/17_clue_100.txt", 1)[0]
	// A hard puzzle: one that the budget does not solve.
	var hard string
	for _, p := range testenv.Puzzles(t, "../solver/testdata/hardest_100.txt", 100) {
		g, _ := solver.Parse(p)
		if _, err := solver.Solve(context.Background(), &g, solver.Options{MaxNodes: cheapNodes}); errors.Is(err, solver.ErrGaveUp) {
			hard = p
			break
		}
	}
	if hard == "" {
		t.Fatalf("no puzzle of hardest_100.txt takes more than %d nodes", cheapNodes)
	}
	several := severalSolutions(t, 1)[0]
	for _, tc := range []struct {
		name        string
		puzzle      string
		reply       func(o *job.Outcome) // makes the reply out of the true outcome
		first       bool
		wantProv    job.Provenance
		wantSettled bool
	}{
		{"the true unique", easy, func(*job.Outcome) {}, false, job.Proven, true},
		{"another solution", easy, func(o *job.Outcome) {
			s := []byte(o.Solution.Digits())
			s[0], s[1] = s[1], s[0]
			o.Solution, _ = solver.Parse(string(s))
		}, false, job.Unproven, true},
		{"unique of several", several, func(o *job.Outcome) { o.Status = "unique" }, false, job.Unproven, true},
		{"beyond the budget", hard, func(*job.Outcome) {}, false, job.Unproven, false},
		{"not a unique", several, func(*job.Outcome) {}, false, job.Unproven, false},
		{"first-solution request", easy, func(*job.Outcome) {}, true, job.Unproven, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, o := outcome(t, tc.puzzle, solver.Options{})
			tc.reply(&o)
			prov, settled := confirmCheaply(context.Background(), &g, &o, tc.first)
			if prov != tc.wantProv || settled != tc.wantSettled {
				t.Errorf("confirmCheaply(%s) = %v, %v; want %v, %v", strings.TrimSpace(tc.name), prov, settled, tc.wantProv, tc.wantSettled)
			}
		})
	}
}
