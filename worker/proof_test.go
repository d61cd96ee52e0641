package worker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
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

// TestSolveRepliesSignedWhenNeeded checks which solve replies a worker
// with a key signs: those a reader could confirm only by a solve costlier
// than checking a signature (a unique found past proof.CheapNodes, a
// cached unique, a gave_up), and no others; and that a reader trusting
// the key takes every reply, signed or not, as the true answer.
func TestSolveRepliesSignedWhenNeeded(t *testing.T) {
	key, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer := proof.NewSigner(key)
	e := newEnv(t, "embedded")
	e.run(e.worker(Options{Signer: signer, MaxNodes: 200}))
	easy := testenv.Puzzles(t, "testdata/17_clue_300.txt", 1)[0]
	var hard, tooHard string // past CheapNodes but within 200; past 200
	for _, p := range testenv.Puzzles(t, "../solver/testdata/hardest_100.txt", 100) {
		g, _ := solver.Parse(p)
		r, err := solver.Solve(context.Background(), &g, solver.Options{MaxNodes: -1})
		switch {
		case err != nil:
		case hard == "" && r.Nodes > proof.CheapNodes && r.Nodes <= 200:
			hard = p
		case tooHard == "" && r.Nodes > 200:
			tooHard = p
		}
	}
	if hard == "" || tooHard == "" {
		t.Fatalf("hardest_100.txt lacks a puzzle of %d-200 nodes (%q) or one past 200 (%q)", proof.CheapNodes, hard, tooHard)
	}
	trust := proof.NewTrust(signer.PublicKey())
	for _, tc := range []struct {
		name, body string
		status     result.Status
		signed     bool
	}{
		{"easy unique", easy, result.StatusUnique, false},
		{"easy first, cached", `{"puzzle": "` + easy + `", "first": true}`, result.StatusUnique, false},
		{"hard unique", hard, result.StatusUnique, true},
		{"hard unique, cached", hard, result.StatusUnique, true},
		{"gave up", tooHard, result.StatusGaveUp, true},
	} {
		m, err := e.q.NC.Request(e.q.Opts.SolveSubject(), []byte(tc.body), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r result.Result
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Status != tc.status {
			t.Fatalf("%s: reply %s (%v), want %s", tc.name, m.Data, err, tc.status)
		}
		if cached := strings.HasSuffix(tc.name, "cached"); r.Cached != cached {
			t.Errorf("%s: cached %v, want %v", tc.name, r.Cached, cached)
		}
		sig := m.Header.Get(proof.Header)
		if (sig != "") != tc.signed {
			t.Errorf("%s: signed %v, want %v", tc.name, sig != "", tc.signed)
		}
		if sig != "" {
			if err := trust.VerifyReply(sig, m.Data); err != nil {
				t.Errorf("%s: the proof does not verify: %v", tc.name, err)
			}
		}
		if tc.name == "hard unique" {
			time.Sleep(100 * time.Millisecond) // the cache is written after the reply
		}
	}
}
