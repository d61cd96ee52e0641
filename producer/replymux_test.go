package producer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// TestConcurrentSolvesShareTheConnection solves puzzles at once on one
// connection, with two workers: each request gets the answer to its own
// puzzle through the connection's one reply subscription.
func TestConcurrentSolvesShareTheConnection(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		e.worker(worker.Options{})
		e.worker(worker.Options{})
		puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 24)
		var wg sync.WaitGroup
		for _, p := range puzzles {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				r, err := Solve(ctx, e.q.NC, e.q.Opts, p, SolveOptions{NoLookup: true, Logger: quiet})
				if err != nil {
					t.Error(err)
					return
				}
				g, _ := solver.Parse(p)
				if r.Status != result.StatusUnique || r.Puzzle != g.String() {
					t.Errorf("Solve(%s) = %+v", p, r)
					return
				}
				testenv.CheckSolution(t, p, r.Solution)
			})
		}
		wg.Wait()
	})
}

// TestSolveEndsWithItsConnection closes the connection while a request
// waits for a reply that never comes: Solve returns at once, with
// nats.ErrConnectionClosed, as a subscription of its own did, not at its
// deadline with ErrNoAnswer. A new connection solves as before.
func TestSolveEndsWithItsConnection(t *testing.T) {
	q := testenv.NewQueue(t, "shared", queue.Options{})
	for _, tc := range []struct {
		name  string
		early bool // closed before the request
	}{
		{"while waiting", false},
		{"before the request", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := testenv.NATS(t)
			// A responder that never answers.
			mute, err := q.NC.Subscribe(q.Opts.SolveSubject(), func(*nats.Msg) {})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = mute.Unsubscribe() }()
			if err := q.NC.Flush(); err != nil {
				t.Fatal(err)
			}
			// A first request makes the connection's reply subscription.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err = Solve(ctx, nc, q.Opts, testenv.Puzzles(t, "testdata/17_clue_100.txt", 1)[0], SolveOptions{NoLookup: true})
			cancel()
			if !errors.Is(err, ErrNoAnswer) {
				t.Fatalf("Solve with a mute responder = %v, want ErrNoAnswer", err)
			}
			if tc.early {
				nc.Close()
			} else {
				time.AfterFunc(100*time.Millisecond, nc.Close)
			}
			ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err = Solve(ctx, nc, q.Opts, testenv.Puzzles(t, "testdata/17_clue_100.txt", 1)[0], SolveOptions{NoLookup: true})
			if !errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, ErrNoAnswer) {
				t.Errorf("Solve on a closed connection = %v (after %v), want nats.ErrConnectionClosed", err, time.Since(start))
			}
		})
	}
}
