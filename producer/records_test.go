package producer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// The tests of this file run the producer's record logic (statuses,
// listings, cancels, its own updates of a job's record) on a queue whose
// jobs bucket is in memory (queue.InMemory): no server.

// stateOf returns job id's state as stored.
func stateOf(t *testing.T, q *queue.Queue, id string) job.Record {
	t.Helper()
	rec, _, err := q.Store().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestCancelInMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		was  job.State
		done int64
		want job.State
	}{
		{"a job publishing", job.Publishing, 1, job.Cancelled},
		{"a running job", job.Published, 2, job.Cancelled},
		{"a finished job stays finished", job.Finished, 4, job.Finished},
		{"a failed job stays failed", job.Failed, 1, job.Failed},
		{"a cancelled job stays cancelled", job.Cancelled, 1, job.Cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := queue.InMemory(queue.Options{})
			rec := testenv.MemJob(t, q, "alice", 4, tc.done, tc.was)
			st, err := Cancel(context.Background(), q, rec.ID)
			if err != nil || st.State != tc.want || st.ID != rec.ID {
				t.Fatalf("Cancel = %s %s, %v; want %s", st.ID, st.State, err, tc.want)
			}
			back := stateOf(t, q, rec.ID)
			if back.State != tc.want || back.DoneBatches != tc.done {
				t.Fatalf("record after Cancel: %s with %d batches done; want %s with %d", back.State, back.DoneBatches, tc.want, tc.done)
			}
			if st.Done != 10*tc.done || st.BatchesDone != tc.done {
				t.Errorf("status after Cancel: %d lines, %d batches done; want %d, %d", st.Done, st.BatchesDone, 10*tc.done, tc.done)
			}
			if got, err := JobStatus(context.Background(), q, rec.ID); err != nil || got.State != tc.want {
				t.Errorf("JobStatus after Cancel = %s, %v; want %s", got.State, err, tc.want)
			}
		})
	}
	t.Run("an unknown job", func(t *testing.T) {
		q := queue.InMemory(queue.Options{})
		id := job.NewID("alice")
		if _, err := Cancel(context.Background(), q, id); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("Cancel: %v; want job.ErrNotFound", err)
		}
		if _, err := JobStatus(context.Background(), q, id); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("JobStatus: %v; want job.ErrNotFound", err)
		}
	})
}

// memSubmission returns a submission of job rec by a producer on q, as
// Start leaves it once the record is created.
func memSubmission(q *queue.Queue, rec job.Record) *submission {
	return &submission{p: New(q, nil, Options{Logger: slog.New(slog.DiscardHandler)}), pub: &publisher{},
		sub: Submitted{ID: rec.ID, Tally: rec.Tally}, rec: rec}
}

// TestSubmissionCancelledInMemory cancels a job while its producer
// publishes it: the producer's next update of the record (its heartbeat)
// finds it cancelled and stops the submission with job.ErrCancelled,
// without writing; the failure that ends the submission leaves the
// record cancelled.
func TestSubmissionCancelledInMemory(t *testing.T) {
	for _, cause := range []error{job.ErrCancelled, errors.New("the input broke")} {
		t.Run(cause.Error(), func(t *testing.T) {
			ctx := context.Background()
			q := queue.InMemory(queue.Options{})
			rec := testenv.MemJob(t, q, "alice", 4, 0, job.Publishing)
			s := memSubmission(q, rec)
			s.mu.Lock()
			defer s.mu.Unlock()
			if err := s.updateLocked(ctx); err != nil {
				t.Fatalf("update of a job publishing: %v", err)
			}
			if _, err := Cancel(ctx, q, rec.ID); err != nil {
				t.Fatal(err)
			}
			_, rev, _ := q.Store().Get(ctx, rec.ID)
			if err := s.updateLocked(ctx); !errors.Is(err, job.ErrCancelled) {
				t.Fatalf("update of a cancelled job: %v; want job.ErrCancelled", err)
			}
			s.fail(cause)
			back, now, _ := q.Store().Get(ctx, rec.ID)
			if back.State != job.Cancelled || now != rev {
				t.Fatalf("record after the submission stopped: %s at revision %d (cancelled at %d); want cancelled, unchanged", back.State, now, rev)
			}
		})
	}
}

// TestSubmissionFinishesInMemory checks the producer's last update of a job: it
// moves the record to published, adding the batches it answered itself,
// and to finished when the workers have counted the rest, whatever the
// order.
func TestSubmissionFinishesInMemory(t *testing.T) {
	for _, tc := range []struct {
		name      string
		counted   int64    // batches the workers counted first (0..counted-1)
		answered  []uint64 // batches the producer answered itself
		published bool
		want      job.State
	}{
		{"workers counted every batch", 4, nil, true, job.Finished},
		{"the producer answered the last", 3, []uint64{3}, true, job.Finished},
		{"the producer answered every batch", 0, []uint64{0, 1, 2, 3}, true, job.Finished},
		{"a batch without results", 2, []uint64{3}, true, job.Published},
		{"not yet published", 4, nil, false, job.Publishing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q := queue.InMemory(queue.Options{})
			rec := testenv.MemJob(t, q, "alice", 4, 0, job.Publishing)
			s := memSubmission(q, rec)
			for i := range tc.counted { // the workers, meanwhile
				if _, err := q.Store().Apply(ctx, rec.ID, func(r *job.Record) error {
					r.AddResults(uint64(i), job.Counts{result.StatusUnique: 10}, time.Now())
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range tc.answered {
				s.answered = append(s.answered, answeredBatch{i, job.Counts{result.StatusNone: 10}})
			}
			s.published = tc.published
			s.mu.Lock()
			err := s.updateLocked(ctx)
			s.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			back := stateOf(t, q, rec.ID)
			want := tc.counted + int64(len(tc.answered))
			if back.State != tc.want || back.DoneBatches != want || s.rec.State != tc.want {
				t.Fatalf("record: %s with %d batches done (the submission's: %s); want %s with %d",
					back.State, back.DoneBatches, s.rec.State, tc.want, want)
			}
			if got := back.Counts[result.StatusNone]; got != 10*int64(len(tc.answered)) {
				t.Errorf("%d lines counted none, want the producer's %d", got, 10*len(tc.answered))
			}
			if len(s.answered) != 0 {
				t.Errorf("%d answered batches kept after they were stored", len(s.answered))
			}
		})
	}
}

// TestJobsInMemory lists jobs by owner, newest first, and skips (naming
// it once in the log) a record that does not decode.
func TestJobsInMemory(t *testing.T) {
	ctx := context.Background()
	q := queue.InMemory(queue.Options{})
	var alices []string
	for i := range 3 {
		alices = append(alices, testenv.MemJob(t, q, "alice", 3, int64(i), job.Published).ID)
		testenv.MemJob(t, q, "bob", 1, 0, job.Publishing)
		time.Sleep(2 * time.Millisecond) // ids sort by the millisecond
	}
	broken := "alice.vvvvvvvvvvvvvvvvvvvvvvvvvv" // a valid id, newer than any
	if _, err := q.Records.Put(ctx, broken, []byte("not a record")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		owner string
		limit int
		want  []string
	}{
		{"alice", 10, []string{alices[2], alices[1], alices[0]}},
		{"alice", 2, []string{alices[2], alices[1]}},
		{"carol", 10, nil},
	} {
		var log bytes.Buffer
		got, err := Jobs(ctx, q, tc.owner, tc.limit, slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, st := range got {
			ids = append(ids, st.ID)
			if st.State != job.Published {
				t.Errorf("%s: %s, want published", st.ID, st.State)
			}
		}
		if strings.Join(ids, " ") != strings.Join(tc.want, " ") {
			t.Errorf("Jobs(%s, %d) = %q, want %q", tc.owner, tc.limit, ids, tc.want)
		}
		if skipped := strings.Contains(log.String(), broken); skipped != (tc.owner == "alice") {
			t.Errorf("Jobs(%s): the log names the broken record: %v; log %q", tc.owner, skipped, log.String())
		}
	}
	all, err := Jobs(ctx, q, "", 100, slog.New(slog.DiscardHandler))
	if err != nil || len(all) != 6 {
		t.Fatalf("Jobs of every owner: %d, %v; want 6", len(all), err)
	}
}

// memResults stores the results of batch index of job id (one puzzle,
// line index+1, solved) in q's results, as a worker does, and returns
// the manifest digest of its work batch.
func memResults(t *testing.T, q *queue.Queue, id string, index uint64, store bool) job.Digest {
	t.Helper()
	g, err := solver.Parse(memPuzzle)
	if err != nil {
		t.Fatal(err)
	}
	b := job.Batch{Job: id, Index: index, First: index, Items: []job.Item{{Line: int(index) + 1, Kind: job.Solve, Grid: g}}}
	d := b.ComputeDigest()
	if !store {
		return d
	}
	res, err := (&solver.Solver{}).Solve(context.Background(), &g, solver.Options{})
	b.Items[0] = job.Item{Line: int(index) + 1, Kind: job.Known, Outcome: job.FromSolve(&g, res, err)}
	b.Digest = d
	if _, err := q.ResultStore().Publish(context.Background(), q.Opts.ResultsMsg(&b)); err != nil {
		t.Fatal(err)
	}
	return d
}

const memPuzzle = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"

// TestFollowInMemory reads jobs' results on a queue in memory: an
// unknown job is not found, a failed one says so, and a cancelled one
// passes on the results that were stored, in input order, then says it
// was cancelled.
func TestFollowInMemory(t *testing.T) {
	ctx := context.Background()
	q := queue.InMemory(queue.Options{})
	opts := FollowOptions{Logger: slog.New(slog.DiscardHandler)}
	none := func(result.Result) error { t.Error("a result passed on"); return nil }
	if _, err := Follow(ctx, q, job.NewID("alice"), none, opts); !errors.Is(err, job.ErrNotFound) {
		t.Errorf("Follow of an unknown job: %v; want job.ErrNotFound", err)
	}
	failed := testenv.MemJob(t, q, "alice", 2, 0, job.Failed)
	if _, err := Follow(ctx, q, failed.ID, none, opts); !errors.Is(err, ErrJobFailed) {
		t.Errorf("Follow of a failed job: %v; want ErrJobFailed", err)
	}

	// A job of 4 batches of one line, whose batches 0, 1 and 3 have
	// results when it is cancelled.
	rec := job.NewRecord(job.NewID("alice"), job.Options{}, time.Now())
	rec.Lines, rec.Queued, rec.Batches = 4, 4, 4
	var m job.Manifest
	done := map[uint64]bool{0: true, 1: true, 3: true}
	for i := range uint64(4) {
		m.Digests = append(m.Digests, memResults(t, q, rec.ID, i, done[i]))
		if done[i] {
			rec.AddResults(i, job.Counts{result.StatusUnique: 1}, time.Now())
		}
	}
	rec.Manifest = m.Encode()
	rec.Publish(time.Now())
	rec.Cancel(time.Now())
	if _, err := q.Store().Create(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	var lines []int
	f := &follower{q: q, jobs: q.Store(), id: rec.ID, opts: opts, out: func(r result.Result) error {
		lines = append(lines, r.Line)
		if r.Status != result.StatusUnique {
			t.Errorf("line %d: %s, want unique", r.Line, r.Status)
		}
		return nil
	}}
	if err := f.readRecord(ctx); err != nil {
		t.Fatal(err)
	}
	f.init()
	if err := f.cancelled(ctx); !errors.Is(err, job.ErrCancelled) {
		t.Fatalf("cancelled: %v; want job.ErrCancelled", err)
	}
	if want := []int{1, 2, 4}; !slices.Equal(lines, want) {
		t.Fatalf("lines passed on %v, want %v", lines, want)
	}
}
