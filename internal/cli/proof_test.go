package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestGetRefusesAForgedCacheValue writes to Redis, under a puzzle's own
// key, a value that says what a reader cannot check without solving:
// unique (with a right solution) for a puzzle that has several. get does
// not print it (issue 28: a forged unique was served by get): the value
// is a miss. A right value is printed. (The cache holds no gave_up.)
func TestGetRefusesAForgedCacheValue(t *testing.T) {
	e := newQueueEnv(t)
	ctx := context.Background()
	rc := cache.NewRedis(testenv.Redis(t), cache.RedisOptions{Prefix: e.prefix + ":"})
	outcome := func(puzzle string) (solver.Grid, job.Outcome) {
		g, err := solver.Parse(puzzle)
		if err != nil {
			t.Fatal(err)
		}
		r, err := solver.Solve(ctx, &g, solver.Options{})
		return g, job.FromSolve(&g, r, err)
	}
	mg, multi := outcome(multipleSolutions)
	ug, right := outcome(unique)
	forgedUnique := multi
	forgedUnique.Status, forgedUnique.Error = result.StatusUnique, ""
	if err := forgedUnique.Check(); err != nil {
		t.Fatalf("fixture: the forged value's solution is not a solution: %v", err)
	}
	entries := []cache.Entry{
		{Key: job.KeyOf(&mg), Outcome: &forgedUnique},
		{Key: job.KeyOf(&ug), Outcome: &right},
	}
	if err := rc.Put(ctx, entries); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, puzzle string
		code         int
		want, not    string
	}{
		{"forged unique of a puzzle with several solutions", mg.String(), ExitFailure, "is not in the cache", multi.Solution.Digits()},
		{"right unique", ug.String(), ExitOK, right.Solution.Digits(), "not in the cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, ctx, "", "get", tc.puzzle)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.want) || strings.Contains(stdout+stderr, tc.not) {
				t.Errorf("get: exit %d, stdout %q, stderr %q; want exit %d, %q and not %q", code, stdout, stderr, tc.code, tc.want, tc.not)
			}
		})
	}
}
