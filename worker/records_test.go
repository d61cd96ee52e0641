package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// The tests of this file run the workers' record logic (counting a
// batch's results, the schedule's watch of the records, the sweep's
// transitions, dropping the work of an ended job) on a queue whose jobs
// bucket is in memory (queue.InMemory): no server.

// memWorker returns a worker on q (a queue.InMemory) that must solve
// nothing: its solver fails the test.
func memWorker(t *testing.T, q *queue.Queue, opts Options) *Worker {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.NoService = true
	w := New(nil, q, nil, opts)
	w.solve = func(*solver.Solver, context.Context, *solver.Grid, solver.Options) (solver.Result, error) {
		t.Error("a puzzle was solved")
		return solver.Result{}, errors.New("not to be solved")
	}
	return w
}

// change applies fn to job id's record.
func change(t *testing.T, q *queue.Queue, id string, fn func(r *job.Record)) {
	t.Helper()
	if _, err := q.Store().Apply(context.Background(), id, func(r *job.Record) error { fn(r); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestCountInMemory counts the results of a job's batches as workers
// do once they are stored: the count of the last batch of a published
// job finishes it (and only that one says so), a batch delivered again
// counts once, a job still publishing is not finished, a cancelled one
// counts the batches that were in work and ends in the worker's
// schedule, and a job removed has nothing to count.
func TestCountInMemory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		st       job.State
		counts   []uint64 // batch indexes counted, in order
		finishes int      // the count that reports the job finished (-1: none)
		want     job.State
		done     int64
	}{
		{"in order", job.Published, []uint64{0, 1, 2}, 2, job.Finished, 3},
		{"out of order", job.Published, []uint64{2, 0, 1}, 2, job.Finished, 3},
		{"delivered again", job.Published, []uint64{0, 0, 1, 1, 2, 2}, 4, job.Finished, 3},
		{"still publishing", job.Publishing, []uint64{0, 1, 2}, -1, job.Publishing, 3},
		{"cancelled", job.Cancelled, []uint64{0, 1}, -1, job.Cancelled, 2},
		{"failed", job.Failed, []uint64{0}, -1, job.Failed, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q := queue.InMemory(queue.Options{})
			w := memWorker(t, q, Options{})
			rec := testenv.MemJob(t, q, "alice", 3, 0, tc.st)
			for i, index := range tc.counts {
				finished, got, err := w.count(ctx, &job.Batch{Job: rec.ID, Index: index}, job.Counts{result.StatusUnique: 10})
				if err != nil {
					t.Fatal(err)
				}
				if finished != (i == tc.finishes) {
					t.Errorf("count %d (batch %d) says finished: %v", i, index, finished)
				}
				if got.ID != rec.ID {
					t.Fatalf("count returned the record of %q", got.ID)
				}
			}
			back, _, err := q.Store().Get(ctx, rec.ID)
			if err != nil || back.State != tc.want || back.DoneBatches != tc.done || back.LinesDone() != 10*tc.done {
				t.Fatalf("record: %s, %d batches (%d lines) done, %v; want %s, %d", back.State, back.DoneBatches, back.LinesDone(), err, tc.want, tc.done)
			}
			st, ended := w.sched.endedState(rec.ID)
			if ended != !tc.want.Active() || ended && st != tc.want {
				t.Errorf("the schedule has it ended: %v (%s); want %v", ended, st, !tc.want.Active())
			}
		})
	}
	t.Run("removed", func(t *testing.T) {
		q := queue.InMemory(queue.Options{})
		w := memWorker(t, q, Options{})
		finished, _, err := w.count(context.Background(), &job.Batch{Job: job.NewID("alice"), Index: 0}, job.Counts{result.StatusUnique: 10})
		if err != nil || finished {
			t.Fatalf("count of a job without a record = %v, %v; want nothing counted, no error", finished, err)
		}
	})
}

// watching starts w's schedule's watch of the records, until the test
// ends, and waits for its first values.
func watching(t *testing.T, s *schedule) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.watch(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-s.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch brought no records")
	}
}

// eventually waits for cond, failing the test after a long while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("never: %s", what)
		}
	}
}

// TestScheduleInMemory runs a worker's schedule on records in memory:
// its watch brings the active jobs (with their lines to do, by
// priority) and drops those that end or go; its sweep fails a job whose
// producer stopped heartbeating, and the newest jobs of an owner over a
// quota.
func TestScheduleInMemory(t *testing.T) {
	ctx := context.Background()
	q := queue.InMemory(queue.Options{})
	before := testenv.MemJob(t, q, "alice", 2, 0, job.Published) // there before the watch
	s := memWorker(t, q, Options{}).sched
	watching(t, s)
	if _, _, ok := s.record(before.ID); !ok {
		t.Fatal("a job there before the watch is not in the schedule")
	}
	bobs := testenv.MemJob(t, q, "bob", 3, 0, job.Publishing)
	eventually(t, "a new job in the schedule", func() bool { return s.active() == 2 })
	if p := s.pending(); p[job.PriorityNormal] != 50 {
		t.Errorf("pending %v; want 50 lines of normal priority", p)
	}

	for _, tc := range []struct {
		name string
		end  func(id string)
		want job.State // "": removed
	}{
		{"cancelled", func(id string) { change(t, q, id, func(r *job.Record) { r.Cancel(time.Now()) }) }, job.Cancelled},
		{"failed", func(id string) { change(t, q, id, func(r *job.Record) { r.Fail("broke", time.Now()) }) }, job.Failed},
		{"removed", func(id string) {
			if err := q.Store().DeleteKeys(ctx, id, 1); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := testenv.MemJob(t, q, "carol", 1, 0, job.Published)
			eventually(t, "the job in the schedule", func() bool { _, _, ok := s.record(rec.ID); return ok })
			tc.end(rec.ID)
			eventually(t, "the job out of the schedule", func() bool { _, ended := s.endedState(rec.ID); return ended })
			if st, _ := s.endedState(rec.ID); st != tc.want {
				t.Errorf("ended as %q, want %q", st, tc.want)
			}
		})
	}

	t.Run("stale", func(t *testing.T) {
		change(t, q, bobs.ID, func(r *job.Record) { r.Heartbeat = time.Now().Add(-2 * job.StaleAfter).UTC() })
		eventually(t, "the stale heartbeat watched", func() bool { r, _, _ := s.record(bobs.ID); return r.Stale(time.Now()) })
		s.failStale(ctx, q.Store())
		back, _, err := q.Store().Get(ctx, bobs.ID)
		if err != nil || back.State != job.Failed {
			t.Fatalf("a stale job after the sweep: %s, %v; want failed", back.State, err)
		}
		if r, _, _ := q.Store().Get(ctx, before.ID); r.State != job.Published {
			t.Errorf("a job heartbeating after the sweep: %s; want published", r.State)
		}
	})

	t.Run("over quota", func(t *testing.T) {
		s.quota = job.Quota{JobsOpen: 1}
		defer func() { s.quota = job.Quota{} }()
		older := testenv.MemJob(t, q, "dave", 1, 0, job.Published)
		time.Sleep(2 * time.Millisecond) // ids sort by the millisecond
		newer := testenv.MemJob(t, q, "dave", 1, 0, job.Published)
		eventually(t, "dave's jobs in the schedule", func() bool { j, _ := s.usage("dave"); return j == 2 })
		s.enforceQuota(ctx, q.Store())
		for id, want := range map[string]job.State{older.ID: job.Published, newer.ID: job.Failed, before.ID: job.Published} {
			if r, _, err := q.Store().Get(ctx, id); err != nil || r.State != want {
				t.Errorf("%s after the quota's sweep: %s, %v; want %s", id, r.State, err, want)
			}
		}
	})
}

// memMsg is a message of the work stream as a consumer delivers it,
// recording what the worker did with it.
type memMsg struct {
	subject string
	data    []byte
	// delivered is the delivery's number (0: 1); pending the lane's
	// messages after it.
	delivered, pending uint64

	mu                         sync.Mutex
	acked, naked, termed, beat int
}

func (m *memMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: max(1, m.delivered), NumPending: m.pending, Timestamp: time.Now()}, nil
}
func (m *memMsg) Data() []byte                     { return m.data }
func (m *memMsg) Headers() nats.Header             { return nats.Header{} }
func (m *memMsg) Subject() string                  { return m.subject }
func (m *memMsg) Reply() string                    { return "" }
func (m *memMsg) Ack() error                       { m.note(&m.acked); return nil }
func (m *memMsg) DoubleAck(context.Context) error  { m.note(&m.acked); return nil }
func (m *memMsg) Nak() error                       { m.note(&m.naked); return nil }
func (m *memMsg) NakWithDelay(time.Duration) error { m.note(&m.naked); return nil }
func (m *memMsg) InProgress() error                { m.note(&m.beat); return nil }
func (m *memMsg) Term() error                      { m.note(&m.termed); return nil }
func (m *memMsg) TermWithReason(string) error      { m.note(&m.termed); return nil }
func (m *memMsg) note(n *int)                      { m.mu.Lock(); *n++; m.mu.Unlock() }
func (m *memMsg) counts() (acked, naked, termed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acked, m.naked, m.termed
}

// puzzle is the one puzzle of each batch of these tests.
const puzzle = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"

// workBatch returns batch index of job id: one puzzle, line index+1.
func workBatch(id string, index uint64) job.Batch {
	g, err := solver.Parse(puzzle)
	if err != nil {
		panic(err)
	}
	return job.Batch{Job: id, Index: index, First: index, Items: []job.Item{{Line: int(index) + 1, Kind: job.Solve, Grid: g}}}
}

// newWorkMsg returns batch index of job rec as its lane delivers it.
func newWorkMsg(q *queue.Queue, rec job.Record, index uint64) *memMsg {
	b := workBatch(rec.ID, index)
	m := q.Opts.WorkMsg(&b, queue.LaneOf(&rec))
	return &memMsg{subject: m.Subject, data: m.Data}
}

// manifestedJob stores the record of a new published job of alice's of
// the given number of batches (workBatch's), their digests in it (as a
// small job's are).
func manifestedJob(t *testing.T, q *queue.Queue, batches int64) job.Record {
	t.Helper()
	now := time.Now()
	rec := job.NewRecord(job.NewID("alice"), job.Options{}, now)
	rec.Lines, rec.Queued, rec.Batches = batches, batches, batches
	var m job.Manifest
	for i := range uint64(batches) {
		b := workBatch(rec.ID, i)
		m.Digests = append(m.Digests, b.ComputeDigest())
	}
	rec.Manifest = m.Encode()
	rec.Publish(now)
	if _, err := q.Store().Create(context.Background(), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// storedAnswer returns the status of the one answer of job id's batch
// index stored in q's results, verified.
func storedAnswer(t *testing.T, q *queue.Queue, id string, index uint64) result.Status {
	t.Helper()
	ctx := context.Background()
	m, err := q.ResultStore().Last(ctx, q.Opts.ResultSubject(id, index))
	if err != nil {
		t.Fatalf("results of batch %d: %v", index, err)
	}
	b, err := job.DecodeAnyResults(m.Data)
	if err != nil || len(b.Items) != 1 || b.Items[0].Kind != job.Known {
		t.Fatalf("results of batch %d: %+v, %v", index, b, err)
	}
	if err := b.Items[0].Outcome.Verify(ctx, false, job.Proven); err != nil {
		t.Fatalf("the answer of batch %d: %v", index, err)
	}
	return b.Items[0].Outcome.Status
}

// TestHandleInMemory hands a worker the batches of a job, on a queue in
// memory: each is checked against the job's manifest, solved, its
// results stored and counted, and acked; the last one finishes the job.
// A batch delivered again whose results are stored is counted and
// acked, not solved again.
func TestHandleInMemory(t *testing.T) {
	q := queue.InMemory(queue.Options{})
	var o observer
	w := memWorker(t, q, Options{Concurrency: 1, Observer: &o})
	solved := 0
	w.solve = func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error) {
		solved++
		return sv.Solve(ctx, g, opts)
	}
	watching(t, w.sched)
	rec := manifestedJob(t, q, 2)
	eventually(t, "the job in the schedule", func() bool { _, _, ok := w.sched.record(rec.ID); return ok })
	ctx := context.Background()
	for _, step := range []struct {
		index     uint64
		delivered uint64
		pending   uint64
		solved    int
		want      job.State
		done      int64
	}{
		{0, 1, 1, 1, job.Published, 1},
		{0, 2, 1, 1, job.Published, 1}, // again: stored, not solved
		{1, 1, 0, 2, job.Finished, 2},
	} {
		m := newWorkMsg(q, rec, step.index)
		m.delivered, m.pending = step.delivered, step.pending
		w.handle(ctx, ctx, &solver.Solver{}, m)
		w.committing.Wait()
		if acked, naked, termed := m.counts(); acked != 1 || naked+termed != 0 {
			t.Fatalf("batch %d (delivery %d): acked %d, naked %d, terminated %d times; want acked once",
				step.index, step.delivered, acked, naked, termed)
		}
		if solved != step.solved {
			t.Errorf("after batch %d (delivery %d): %d puzzles solved, want %d", step.index, step.delivered, solved, step.solved)
		}
		if st := storedAnswer(t, q, rec.ID, step.index); st != result.StatusUnique {
			t.Errorf("batch %d answered %s, want unique", step.index, st)
		}
		back, _, err := q.Store().Get(ctx, rec.ID)
		if err != nil || back.State != step.want || back.DoneBatches != step.done || back.Counts[result.StatusUnique] != step.done {
			t.Fatalf("record after batch %d: %s, %d batches done, counts %v, %v; want %s, %d",
				step.index, back.State, back.DoneBatches, back.Counts, err, step.want, step.done)
		}
	}
	if n, _, _ := o.get(OutcomeAcked); n != 3 {
		t.Errorf("observed %d batches acked, want 3", n)
	}
}

// TestHandleCancelledInMemory hands a worker a batch of a job cancelled
// while it waited: its results stored already (a worker stored them,
// and its ack was lost) are counted and the batch acked; without
// results it is dropped. Nothing is solved either way.
func TestHandleCancelledInMemory(t *testing.T) {
	for _, stored := range []bool{true, false} {
		t.Run(map[bool]string{true: "results stored", false: "no results"}[stored], func(t *testing.T) {
			ctx := context.Background()
			q := queue.InMemory(queue.Options{})
			w := memWorker(t, q, Options{Concurrency: 1})
			watching(t, w.sched)
			rec := manifestedJob(t, q, 2)
			if stored {
				b := workBatch(rec.ID, 0)
				d := b.ComputeDigest()
				g := b.Items[0].Grid
				res, err := (&solver.Solver{}).Solve(ctx, &g, solver.Options{})
				b.Items[0] = job.Item{Line: 1, Kind: job.Known, Outcome: job.FromSolve(&g, res, err)}
				b.Digest = d
				if _, err := q.ResultStore().Publish(ctx, q.Opts.ResultsMsg(&b)); err != nil {
					t.Fatal(err)
				}
			}
			change(t, q, rec.ID, func(r *job.Record) { r.Cancel(time.Now()) })
			eventually(t, "the job ended in the schedule", func() bool { _, ended := w.sched.endedState(rec.ID); return ended })

			m := newWorkMsg(q, rec, 0)
			m.pending = 1
			w.handle(ctx, ctx, &solver.Solver{}, m)
			w.committing.Wait()
			acked, naked, termed := m.counts()
			back, _, err := q.Store().Get(ctx, rec.ID)
			if err != nil || back.State != job.Cancelled {
				t.Fatalf("record: %s, %v; want cancelled", back.State, err)
			}
			if stored && (acked != 1 || naked+termed != 0 || back.DoneBatches != 1) {
				t.Fatalf("acked %d, naked %d, terminated %d, %d batches counted; want acked, counted", acked, naked, termed, back.DoneBatches)
			}
			if !stored && (termed != 1 || acked+naked != 0 || back.DoneBatches != 0) {
				t.Fatalf("acked %d, naked %d, terminated %d, %d batches counted; want terminated, none counted", acked, naked, termed, back.DoneBatches)
			}
		})
	}
}

// TestHandleEndedInMemory hands a worker a batch of a job that
// ended after its batch was published (failed: over a quota, or its
// producer gone; or removed): the worker drops it (terminates the
// message, solves nothing) once its watch of the records has the job
// ended.
func TestHandleEndedInMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, q *queue.Queue, id string)
	}{
		{"failed", func(t *testing.T, q *queue.Queue, id string) {
			change(t, q, id, func(r *job.Record) { r.Fail("over quota", time.Now()) })
		}},
		{"removed", func(t *testing.T, q *queue.Queue, id string) {
			if err := q.Store().DeleteKeys(context.Background(), id, 1); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := queue.InMemory(queue.Options{})
			var o observer
			w := memWorker(t, q, Options{Concurrency: 1, Observer: &o})
			watching(t, w.sched)
			rec := testenv.MemJob(t, q, "alice", 1, 0, job.Published)
			eventually(t, "the job in the schedule", func() bool { _, _, ok := w.sched.record(rec.ID); return ok })
			tc.end(t, q, rec.ID)
			eventually(t, "the job ended in the schedule", func() bool { _, ended := w.sched.endedState(rec.ID); return ended })

			m := newWorkMsg(q, rec, 0)
			ctx := context.Background()
			w.handle(ctx, ctx, &solver.Solver{}, m)
			if acked, naked, termed := m.counts(); termed != 1 || acked+naked != 0 {
				t.Fatalf("the batch was acked %d, naked %d, terminated %d times; want terminated once", acked, naked, termed)
			}
			if n, _, solved := o.get(OutcomeDropped); n != 1 || solved != 0 {
				t.Errorf("observed %d batches dropped, %d puzzles solved; want 1, 0", n, solved)
			}
			if w.InFlight() != 0 {
				t.Errorf("%d batches still in flight", w.InFlight())
			}
		})
	}
}
