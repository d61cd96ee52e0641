package worker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Fair turns: a worker's handlers take their batches from the jobs that
// have work by stride scheduling. Each active job has a pass; a handler
// takes the next batch from the job with the lowest pass among those with
// work, which then advances by 1/Weight of its priority. A job that
// joins, or comes back after it had nothing to do, starts at the pass of
// the last batch taken, so that it gets its turn at once but no credit
// for the time it was away. Over any run of batches each job with work
// gets a share proportional to its weight: nobody waits for another job
// to drain, and no priority is starved. Every worker does the same with
// its own handlers, so the pool as a whole shares itself the same way.
//
// Stride scheduling gives a job its turn at the next batch a handler
// takes; with every handler in the middle of a large batch of another job,
// that can be a batch's time away (0.3 s for 4,096 of the hardest
// puzzles). So each worker has one more handler, the first-batch lane,
// which takes only the first batch this worker takes of a job: a job that
// arrives gets a batch in work at once, time-sliced by the Go scheduler
// with the batches in work (its first results come in milliseconds, not
// after those batches), and from then on takes its turns with the others.
// It takes one batch per job and worker, so priorities' shares and a big
// job's throughput are left as they were.
//
// The jobs come from the jobs bucket: a watch of the records tells every
// worker at once of a job submitted, of more batches published, and of a
// job that ended. A job whose consumer has nothing to deliver (its
// batches all taken, or not yet published) is left alone until its record
// changes or a short back-off passes (a batch handed back by another
// worker becomes deliverable again without any change to the record).

// turn is one active job in a worker's schedule, or stray work.
type turn struct {
	id string
	// stray is the subject of stray work (queue.Queue.StrayWork), taken
	// to be dead-lettered; "" for a job.
	stray  string
	weight int
	pass   float64
	cons   jetstream.Consumer // nil until first needed
	// priority and pending (lines without a result yet) are the record's,
	// as last watched.
	priority job.Priority
	pending  int64
	// publishing, and the producer's last heartbeat (the job is stale
	// when it is older than job.StaleAfter: failStale).
	publishing bool
	heartbeat  time.Time
	// published, with doneBatches of batches counted (as last watched);
	// recounted is when the worker last recounted its results, and at
	// how many batches counted; recountWait how long it waits before it
	// recounts them again at that count (see recount).
	published            bool
	doneBatches, batches int64
	resultsFrom          uint64
	recounted            time.Time
	recountedAt          int64
	recountWait          time.Duration
	// idleUntil: the consumer had nothing to deliver; not asked again
	// before this (unless the record changes).
	idleUntil time.Time
	backoff   time.Duration
	// taken is set once this worker took a batch of the job: the
	// first-batch lane leaves it to the other handlers from then on.
	taken bool
}

// idle back-off bounds: how soon an idle job's consumer is asked again
// without a change to its record.
const (
	minIdle = 10 * time.Millisecond
	maxIdle = time.Second
)

// schedule is a worker's view of the active jobs and their turns.
type schedule struct {
	q   *queue.Queue
	log *slog.Logger

	mu      sync.Mutex
	jobs    map[string]*turn
	ended   map[string]job.State // jobs seen ending or removed (bounded)
	vtime   float64              // the pass of the last batch taken
	changed chan struct{}        // closed and replaced when a job may have work
	ready   chan struct{}        // closed once the first records are read
	once    sync.Once
}

func newSchedule(q *queue.Queue, log *slog.Logger) *schedule {
	return &schedule{q: q, log: log, jobs: map[string]*turn{}, ended: map[string]job.State{},
		changed: make(chan struct{}), ready: make(chan struct{})}
}

// maxEnded bounds schedule.ended.
const maxEnded = 4096

// watch follows the job records until ctx is done, keeping the schedule's
// jobs: those Publishing or Published. A watch that fails is started
// again.
func (s *schedule) watch(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.watchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("worker: the watch of job records stopped; starting it again", "err", err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}

func (s *schedule) watchOnce(ctx context.Context) error {
	// Records only: a record's key is the job's id, a single token; the
	// manifests' keys have three.
	w, err := s.q.Jobs.Watch(ctx, "*")
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch closed")
			}
			if e == nil {
				s.once.Do(func() { close(s.ready) }) // the initial values are read
				continue
			}
			s.update(e)
		}
	}
}

// update applies one watched entry of the jobs bucket.
func (s *schedule) update(e jetstream.KeyValueEntry) {
	id := e.Key()
	if !job.ValidID(id) {
		return
	}
	var r job.Record
	deleted := e.Operation() != jetstream.KeyValuePut
	if !deleted {
		var err error
		if r, err = job.DecodeRecord(e.Value()); err != nil {
			s.log.Warn("worker: a job record does not decode; its job gets no turns", "job", id, "err", err)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if deleted || !r.State.Active() {
		delete(s.jobs, id)
		if len(s.ended) >= maxEnded {
			clear(s.ended)
		}
		s.ended[id] = r.State // "" when removed
		return
	}
	t := s.jobs[id]
	if t == nil {
		t = &turn{id: id, pass: s.vtime}
		s.jobs[id] = t
	}
	t.weight = r.Options.Priority.Weight()
	t.priority, t.pending = r.Options.Priority.Or(), max(0, r.Lines-r.LinesDone())
	t.publishing, t.heartbeat = r.State == job.Publishing, r.Heartbeat
	t.published, t.doneBatches, t.batches, t.resultsFrom = r.State == job.Published, r.DoneBatches, r.Batches, r.ResultsFrom
	if t.heartbeat.IsZero() {
		t.heartbeat = r.Created
	}
	t.idleUntil, t.backoff = time.Time{}, 0 // more batches, maybe
	if r.Batches == 0 {
		// Nothing published yet: a turn now would find nothing and go to
		// a job with work, leaving this one to wait for that batch.
		// Its record's next update, with its first batch, wakes it.
		t.idleUntil = time.Now().Add(time.Hour)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// endedState returns the state of job id if the schedule saw it end or
// go ("" for removed), and whether it did.
func (s *schedule) endedState(id string) (job.State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.ended[id]
	return st, ok
}

// next returns the next batch to handle, from the job whose turn it is,
// or nil when no job has one to deliver now; wake is then closed when one
// may have, and retry says when to ask again anyway.
// With first, only a job's first batch at this worker is taken (the
// first-batch lane).
func (s *schedule) next(ctx context.Context, first bool) (m jetstream.Msg, wake <-chan struct{}, retry time.Duration) {
	for tries := 0; ctx.Err() == nil; tries++ {
		t, wake, retry := s.pick(first)
		if t == nil {
			return nil, wake, retry
		}
		m, err := s.fetch(ctx, t)
		if m != nil {
			s.mu.Lock()
			t.taken = true
			s.mu.Unlock()
			return m, nil, 0
		}
		s.idle(t, err)
	}
	return nil, nil, 0
}

// pick returns the job with work whose turn it is, charging it for a
// batch, or nil and when to look again. With first, only the jobs of
// which this worker took no batch yet are considered.
func (s *schedule) pick(first bool) (*turn, <-chan struct{}, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var best *turn
	retry := maxIdle
	for _, t := range s.jobs {
		if first && (t.taken || t.stray != "") {
			continue
		}
		if now.Before(t.idleUntil) {
			retry = min(retry, t.idleUntil.Sub(now))
			continue
		}
		if best == nil || t.pass < best.pass || (t.pass == best.pass && t.id < best.id) {
			best = t
		}
	}
	if best == nil {
		return nil, s.changed, retry
	}
	best.pass = max(best.pass, s.vtime)
	s.vtime = best.pass
	best.pass += 1 / float64(max(1, best.weight))
	return best, nil, 0
}

// fetch asks t's consumer for one batch, without waiting for one.
func (s *schedule) fetch(ctx context.Context, t *turn) (jetstream.Msg, error) {
	s.mu.Lock()
	c := t.cons
	s.mu.Unlock()
	if c == nil {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		var err error
		if id, ok := s.q.Opts.WorkJob(t.stray); ok || t.stray == "" {
			// A job's subject: its own consumer, so as not to overlap it.
			c, err = s.q.JobWork(actx, cmp.Or(id, t.id))
		} else {
			c, err = s.q.StrayConsumer(actx, t.stray)
		}
		cancel()
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		t.cons = c
		s.mu.Unlock()
	}
	b, err := c.FetchNoWait(1)
	if err != nil {
		return nil, err
	}
	for m := range b.Messages() {
		return m, nil
	}
	return nil, b.Error()
}

// idle notes that t had nothing to deliver (err: or could not be asked):
// it is asked again after a back-off that grows while it stays idle.
func (s *schedule) idle(t *turn, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
			t.cons = nil // deleted: made again if the job is still active
		}
		s.log.Debug("worker: cannot ask a job's consumer for work", "job", t.id, "err", err)
	}
	if t.stray != "" {
		delete(s.jobs, t.id) // until the next sweep finds more
		if id, ok := s.q.Opts.WorkJob(t.stray); ok {
			// Its consumer goes once nothing is left: a message another
			// worker holds must stay where it can be acked.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
				defer cancel()
				_, _ = s.q.DropDoneJobWork(ctx, id)
			}()
		}
		return
	}
	// No charge for a turn that brought nothing.
	t.pass -= 1 / float64(max(1, t.weight))
	t.backoff = min(max(2*t.backoff, minIdle), maxIdle)
	t.idleUntil = time.Now().Add(t.backoff)
}

// pending returns the lines of the active jobs without a result yet, by
// priority.
func (s *schedule) pending() map[job.Priority]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[job.Priority]int64{}
	for _, t := range s.jobs {
		if t.stray == "" {
			out[t.priority] += t.pending
		}
	}
	return out
}

// active returns the number of active jobs.
func (s *schedule) active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

// strayEvery is how often a worker looks for stray work.
const strayEvery = 2 * time.Second

// sweep adds the stray work of the work stream to the schedule every
// strayEvery until ctx is done: messages on subjects no active job's
// consumer delivers (a job id without a record, or not a job's subject at
// all). They are handled as any batch, and so dead-lettered with the
// reason, instead of lying unseen in the stream.
func (s *schedule) sweep(ctx context.Context) {
	store := job.NewStore(s.q.JS, s.q.Jobs)
	t := time.NewTicker(strayEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		stray, err := s.q.StrayWork(actx, func(id string) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			_, ok := s.jobs[id]
			return ok
		})
		s.failStale(actx, store)
		s.recount(actx, store)
		for subject := range stray {
			if id, ok := s.q.Opts.WorkJob(subject); ok {
				// A job just submitted, not yet in the watch's view, is
				// not stray: its record is created before its work.
				if r, _, err := store.Get(actx, id); err == nil && r.State.Active() {
					continue
				}
			}
			s.addStray(subject)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			s.log.Debug("worker: cannot look for stray work", "err", err)
		}
	}
}

// addStray gives the stray work on subject a turn.
func (s *schedule) addStray(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := "stray " + subject
	if _, ok := s.jobs[key]; ok {
		return
	}
	s.jobs[key] = &turn{id: key, stray: subject, weight: 1, pass: s.vtime}
	close(s.changed)
	s.changed = make(chan struct{})
}

// failStale marks failed the jobs whose producer stopped publishing
// (killed, or cut off: no heartbeat for job.StaleAfter): they will never
// finish, and nobody should wait for them. Every worker may try; the
// record's compare-and-set lets one do it, and only while it is stale.
func (s *schedule) failStale(ctx context.Context, store *job.Store) {
	now := time.Now()
	var stale []string
	s.mu.Lock()
	for id, t := range s.jobs {
		if t.stray == "" && t.publishing && now.Sub(t.heartbeat) > job.StaleAfter {
			stale = append(stale, id)
		}
	}
	s.mu.Unlock()
	for _, id := range stale {
		_, err := store.ApplyConfirmed(ctx, id, func(r *job.Record) error {
			if !r.Stale(time.Now()) {
				return job.ErrUnchanged
			}
			r.FailStale(time.Now())
			return nil
		}, func(r *job.Record) bool { return !r.State.Active() })
		if err != nil {
			s.log.Debug("worker: cannot mark a stale job failed", "job", id, "err", err)
			continue
		}
		// Its batches left are stray work now, dropped by the sweep.
		if err := s.q.DropJobWork(ctx, id); err != nil {
			s.log.Debug("worker: a stale job's consumer stays until idle", "job", id, "err", err)
		}
	}
}

// A worker recounts the results of a job whose record has not changed
// since its last recount after recountFirst, then after twice as long each
// time, up to recountEvery.
const (
	recountFirst = 2 * time.Second
	recountEvery = time.Minute
)

// recount repairs the record of a published job with no work left whose
// record counts fewer batches than it has: every batch was acknowledged,
// so each had its results stored and counted, and a count was lost (see
// job.Record.Recount). The results stream's headers are tallied and the
// record rewritten from them, which finishes the job when they are all
// there. A job whose missing batches are dead letters keeps waiting for
// them ('sudoku dlq replay'), recounted at most every recountEvery.
func (s *schedule) recount(ctx context.Context, store *job.Store) {
	type due struct {
		id   string
		from uint64
	}
	var jobs []due
	now := time.Now()
	s.mu.Lock()
	for id, t := range s.jobs {
		if t.stray != "" || !t.published || t.doneBatches >= t.batches {
			continue
		}
		if t.recountedAt == t.doneBatches && now.Sub(t.recounted) < t.recountWait {
			continue
		}
		jobs = append(jobs, due{id, t.resultsFrom})
	}
	s.mu.Unlock()
	for _, j := range jobs {
		s.recountJob(ctx, store, j.id, j.from)
	}
}

// recountJob recounts job id's results (see recount) if its consumer has
// nothing left to deliver or to ack; from is the record's ResultsFrom.
func (s *schedule) recountJob(ctx context.Context, store *job.Store, id string, from uint64) {
	if idle, err := s.q.JobIdle(ctx, id); err != nil || !idle {
		return // work is left: its batches are counted as they are done
	}
	done := map[uint64]job.Counts{}
	if err := s.q.TallyResults(ctx, id, from, func(index uint64, c job.Counts) { done[index] = c }); err != nil {
		s.log.Debug("worker: cannot recount a job's results", "job", id, "err", err)
		return
	}
	var was int64
	rec, err := store.ApplyConfirmed(ctx, id, func(r *job.Record) error {
		was = r.DoneBatches
		if !r.Recount(done, time.Now()) {
			return job.ErrUnchanged
		}
		return nil
	}, func(r *job.Record) bool { return r.DoneBatches >= int64(len(done)) })
	if err != nil {
		s.log.Debug("worker: cannot recount a job's results", "job", id, "err", err)
		return
	}
	if rec.DoneBatches > was {
		s.log.Info("worker: a job's record counted fewer batches than its results: recounted",
			"job", id, "counted", was, "results", rec.DoneBatches, "state", rec.State)
	}
	s.mu.Lock()
	if t := s.jobs[id]; t != nil {
		// Again soon while results may still be coming in (a count
		// lost in the last moments), then less and less often.
		if !t.recounted.IsZero() && t.recountedAt == rec.DoneBatches {
			t.recountWait = min(2*t.recountWait, recountEvery)
		} else {
			t.recountWait = recountFirst
		}
		t.recounted, t.recountedAt = time.Now(), rec.DoneBatches
	}
	s.mu.Unlock()
	if rec.State == job.Finished {
		// Its consumer goes once no message of it is left: one nak'ed
		// (its count failed) is still to be delivered, and acked.
		if _, err := s.q.DropDoneJobWork(ctx, id); err != nil {
			s.log.Debug("worker: a finished job's consumer stays until idle", "job", id, "err", err)
		}
	}
}
