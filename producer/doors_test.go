package producer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// progressLog keeps every Progress a Follow reported.
type progressLog struct {
	mu sync.Mutex
	ps []Progress
}

func (l *progressLog) add(p Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ps = append(l.ps, p)
}

func (l *progressLog) all() []Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Progress(nil), l.ps...)
}

// TestWaitTimeoutIsNoOutage: a wait that ends by its own deadline, with
// NATS up, never says NATS is unreachable.
func TestWaitTimeoutIsNoOutage(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 8), "\n")
		sub := e.submit(text, Options{BatchSize: 4})
		var log progressLog
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		_, err := Follow(ctx, e.q.Queue, sub.ID, func(result.Result) error { return nil },
			FollowOptions{Logger: quiet, Poll: 100 * time.Millisecond, Progress: log.add})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Follow without a worker = %v, want its deadline", err)
		}
		for _, p := range log.all() {
			if strings.Contains(p.Waiting, "unreachable") {
				t.Errorf("with NATS up, the reader said %q", p.Waiting)
			}
		}
	})
}

// TestNoWorkerListening: a job waiting for results with no worker of its
// queue online says so (a worker of another queue does not count), and
// goes on waiting until one starts.
func TestNoWorkerListening(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		if e.q.URL != "" {
			// Another queue's worker on the same server is no worker of
			// this one.
			other := &env{t: t, q: testenv.NewQueue(t, "shared", queue.Options{}), cache: e.cache}
			other.worker(worker.Options{})
		}
		text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 8), "\n")
		sub := e.submit(text, Options{BatchSize: 4})
		var log progressLog
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		type followed struct {
			n   int
			err error
		}
		done := make(chan followed, 1)
		go func() {
			n := 0
			_, err := Follow(ctx, e.q.Queue, sub.ID, func(result.Result) error { n++; return nil },
				FollowOptions{Logger: quiet, Poll: 100 * time.Millisecond, Progress: log.add})
			done <- followed{n, err}
		}()
		for !slices.ContainsFunc(log.all(), func(p Progress) bool { return p.NoWorkers }) {
			select {
			case f := <-done:
				t.Fatalf("Follow ended without a worker: %d results, %v", f.n, f.err)
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				t.Fatal("the reader never said that no worker is listening")
			}
		}
		e.worker(worker.Options{})
		f := <-done
		if f.err != nil || f.n != 8 {
			t.Fatalf("Follow after a worker started: %d results, %v", f.n, f.err)
		}
		ps := log.all()
		if ps[len(ps)-1].NoWorkers {
			t.Error("the last progress still says no worker is listening")
		}
	})
}
