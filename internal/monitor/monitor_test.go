package monitor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestMonitor counts the puzzles of the workers' events (a job's and the
// solve endpoint's), gives the figures of a queue with no worker and no
// cache, and sends each subscriber the snapshot rendered for its key.
func TestMonitor(t *testing.T) {
	q := testenv.NewQueue(t, "embedded", queue.Options{})
	m, err := New(q.NC, q.Queue, nil, Options{
		Interval: 20 * time.Millisecond,
		History:  3,
		Lookups:  func() (int64, int64) { return 3, 1 },
		Render: func(ctx context.Context, keys []string) [][]byte {
			out := make([][]byte, len(keys))
			for i, k := range keys {
				out[i] = []byte(k)
			}
			return out
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for subject, n := range map[string]int{"alice.v1": 5, "solve": 1, "bob.v2": 0} {
		data, _ := json.Marshal(queue.Event{Job: subject, N: n})
		if err := q.NC.Publish(q.Opts.EventSubject(subject), data); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var f Figures
	for f = m.Figures(ctx, true); f.SolvedTotal < 6 && ctx.Err() == nil; f = m.Figures(ctx, true) {
		time.Sleep(10 * time.Millisecond)
	}
	if f.SolvedTotal != 6 {
		t.Errorf("solved %d, want 6", f.SolvedTotal)
	}
	if f.Queue == nil || f.Queue.Pending != 0 || f.Workers == nil || *f.Workers != 0 {
		t.Errorf("queue %+v, workers %v: want an empty queue and no worker (%s)", f.Queue, f.Workers, f.QueueError)
	}
	if f.Cache.State != "none" || f.Cache.Hits != 3 || f.Cache.HitRatio == nil || *f.Cache.HitRatio != 0.75 {
		t.Errorf("cache %+v: want none, 3 hits of 4", f.Cache)
	}
	if len(f.History) > 3 {
		t.Errorf("history of %d periods, want at most 3", len(f.History))
	}
	a, stopA := m.Subscribe("alice")
	defer stopA()
	b, stopB := m.Subscribe("")
	defer stopB()
	for ch, want := range map[<-chan []byte]string{a: "alice", b: ""} {
		select {
		case got := <-ch:
			if string(got) != want {
				t.Errorf("snapshot %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("no snapshot for %q", want)
		}
	}
}
