package producer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestCancelledReaderPassesEachLineOnce follows a job whose batches 1 and
// 2 have results and batch 0 none (no worker), and cancels it once the
// reader holds 1 and 2, waiting for 0 (it says no worker listens): the
// reader passes on the lines of 1 and 2, each once, in order, then says
// cancelled. Before, it released 1 and 2 together, then read batch 2
// again by subject and passed its lines on a second time.
func TestCancelledReaderPassesEachLineOnce(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 20)
		sub := e.submit(strings.Join(puzzles, "\n"), Options{BatchSize: 5})
		store := job.NewStore(e.q.JS, e.q.Jobs)
		rec, rev, err := store.Get(ctx, sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Batches != 4 || rec.State != job.Published {
			t.Fatalf("record %+v, want 4 batches published", rec)
		}
		for _, index := range []uint64{1, 2} {
			b := answer(t, sub.ID, index, strings.Join(puzzles[5*index:5*index+5], "\n"))
			b.First = 5 * index
			for i := range b.Items {
				b.Items[i].Line += int(b.First)
			}
			b.Digest = b.ComputeDigest()
			if _, err := e.q.JS.PublishMsg(ctx, e.q.Opts.ResultsMsg(b), queue.ExpectResults()); err != nil {
				t.Fatal(err)
			}
			rec.AddResults(index, job.Counts{result.StatusUnique: 5}, time.Now())
		}
		if _, err := store.Update(ctx, &rec, rev); err != nil {
			t.Fatal(err)
		}

		var once sync.Once
		cancelJob := func() {
			rec, rev, err := store.Get(ctx, sub.ID)
			if err == nil && rec.Cancel(time.Now()) {
				_, err = store.Update(ctx, &rec, rev)
			}
			if err != nil {
				t.Errorf("cancel: %v", err)
			}
		}
		var lines []int
		_, err = Follow(ctx, e.q.Queue, sub.ID, func(r result.Result) error {
			lines = append(lines, r.Line)
			return nil
		}, FollowOptions{Poll: 50 * time.Millisecond, Logger: quiet, Progress: func(p Progress) {
			if p.NoWorkers {
				once.Do(cancelJob) // the reader holds 1 and 2 and waits for 0
			}
		}})
		if !errors.Is(err, job.ErrCancelled) {
			t.Fatalf("Follow = %v, want ErrCancelled", err)
		}
		if len(lines) != 10 {
			t.Fatalf("lines passed on %v, want 6-15 once each", lines)
		}
		for i, l := range lines {
			if l != 6+i {
				t.Fatalf("lines passed on %v, want 6-15 once each", lines)
			}
		}
	})
}
