package worker

import (
	"context"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestAnswerChecksTheProducersAnswers: the answers a producer sends in a
// work batch (from its cache) are checked before the worker's proof
// covers the batch: a unique for a puzzle with several solutions and a
// gave_up for an easy puzzle are solved again by the worker, a right
// unique is kept as sent.
func TestAnswerChecksTheProducersAnswers(t *testing.T) {
	e := newEnv(t, "embedded")
	w := e.worker(Options{Concurrency: 1})
	ctx := context.Background()
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 3)
	solve := func(p string) job.Outcome {
		g, err := solver.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := solver.Solve(ctx, &g, solver.Options{})
		return job.FromSolve(&g, r, err)
	}
	right := solve(puzzles[0])
	several := solve(puzzles[1])
	for i, v := range several.Puzzle { // a 17-clue puzzle less a given: several solutions
		if v != 0 {
			several.Puzzle[i] = 0
			break
		}
	}
	forgedUnique := several
	forgedUnique.Status, forgedUnique.Error = result.StatusUnique, ""
	easy := solve(puzzles[2])
	forgedGaveUp := job.Outcome{Status: result.StatusGaveUp, Puzzle: easy.Puzzle, Error: "forged"}
	b := &job.Batch{Job: "anonymous.1", Items: []job.Item{
		{Line: 1, Kind: job.Known, Outcome: right},
		{Line: 2, Kind: job.Known, Outcome: forgedUnique},
		{Line: 3, Kind: job.Known, Outcome: forgedGaveUp},
	}}
	w.answer(ctx, &solver.Solver{}, b, &BatchStats{}, scratches.Get().(*scratch))
	for i, want := range []result.Status{result.StatusUnique, result.StatusMultiple, result.StatusUnique} {
		it := &b.Items[i]
		if it.Kind != job.Known || it.Outcome.Status != want || it.Outcome.Verify(ctx, false, job.Unproven) != nil {
			t.Errorf("line %d: kind %v, %s (%v); want a right %s", it.Line, it.Kind, it.Outcome.Status,
				it.Outcome.Verify(ctx, false, job.Unproven), want)
		}
	}
}
