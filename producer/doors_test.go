package producer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
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
