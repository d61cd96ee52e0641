package worker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Fair turns: a worker's handlers take their batches by stride scheduling
// on two levels, owners first, then each owner's lanes (queue.Lane: an
// owner's jobs of one priority in one slot). Each owner with work has a
// pass; a handler takes its next batch from the owner with the lowest
// pass, whose pass then grows by 1/weight, the weight being that of the
// highest priority among its lanes with work; within the owner, the lane
// with the lowest pass gives the batch, its pass growing by 1/the weight
// of its priority. An owner or a lane that joins, or comes back after it
// had nothing to do, starts at the pass of the last turn taken at its
// level, so that it gets its turn at once but no credit for the time it
// was away. Over any run of batches each owner with work gets a share
// proportional to its weight, whatever the number of its jobs: splitting
// work into more jobs gains an owner nothing. Within an owner, its
// priorities share by weight, and its small jobs (one lane) never wait
// for its large ones (other lanes). Every worker does the same with its
// own handlers, so the pool as a whole shares itself the same way.
//
// Stride scheduling gives a lane its turn at the next batch a handler
// takes; with every handler in the middle of a large batch, that can be a
// batch's time away (0.3 s for 4,096 of the hardest puzzles). So each
// worker has one more handler, the first-batch lane, which takes a batch
// only from a lane a job joined since this worker last took from it: a
// job that arrives gets a batch in work at once, time-sliced by the Go
// scheduler with the batches in work, and from then on its lane takes its
// turns with the others.
//
// The jobs come from the jobs bucket: a watch of the records tells every
// worker at once of a job submitted, of more batches published, and of a
// job that ended. A lane whose consumer has nothing to deliver (its
// batches all taken, or not yet published) is left alone until one of
// its records changes or a short back-off passes (a batch handed back by
// another worker becomes deliverable again without any change to a
// record).

// jobTurn is an active job, as the watch last saw its record.
type jobTurn struct {
	rec  job.Record
	rev  uint64 // rec's revision
	lane *laneTurn
	// recounted is when the worker last recounted its results, and at
	// how many batches counted; recountWait how long it waits before it
	// recounts them again at that count (see recount).
	recounted   time.Time
	recountedAt int64
	recountWait time.Duration
}

// workable reports whether the job may have a batch to deliver: one it
// has not counted done, or, while it is publishing, one published since
// its record last counted its batches (its producer may never update it
// again: killed, its job goes stale, but the batches it published are
// done until then).
func (j *jobTurn) workable() bool {
	return j.rec.State == job.Publishing || j.rec.Batches > 0 && j.rec.DoneBatches < j.rec.Batches
}

// laneTurn is one lane in a worker's schedule: a queue.Lane with active
// jobs or stray work, or stray work on a subject of no lane.
type laneTurn struct {
	key  string // lane.String(), or "stray <subject>"
	lane queue.Lane
	// stray is the subject of stray work on no lane (queue.StrayWork),
	// taken to be dead-lettered; "" for a lane.
	stray  string
	owner  *ownerTurn
	weight int
	pass   float64
	// jobs are its active jobs; leftovers is set while the sweep has
	// found messages of jobs that ended in it.
	jobs      map[string]*jobTurn
	leftovers bool
	// idleUntil: the consumer had nothing to deliver; not asked again
	// before this (unless a record of it changes).
	idleUntil time.Time
	backoff   time.Duration
	// fresh is set when a job joins the lane, and cleared when this
	// worker takes a batch from it: the first-batch lane takes only from
	// fresh lanes.
	fresh bool
}

// hasWork reports whether the lane may have a batch to deliver.
func (l *laneTurn) hasWork() bool {
	if l.stray != "" || l.leftovers {
		return true
	}
	for _, j := range l.jobs {
		if j.workable() {
			return true
		}
	}
	return false
}

// ownerTurn is an owner with lanes in a worker's schedule.
type ownerTurn struct {
	name  string
	pass  float64
	vtime float64 // the pass of the last turn taken among its lanes
	lanes map[string]*laneTurn
}

// idle back-off bounds: how soon an idle lane's consumer is asked again
// without a change to its records.
const (
	minIdle = 10 * time.Millisecond
	maxIdle = time.Second
)

// strayOwner is the pseudo-owner of stray work on subjects of no lane.
const strayOwner = "~stray"

// schedule is a worker's view of the active jobs and their turns.
type schedule struct {
	q     *queue.Queue
	quota job.Quota
	log   *slog.Logger

	mu     sync.Mutex
	jobs   map[string]*jobTurn
	owners map[string]*ownerTurn
	ended  map[string]job.State // jobs seen ending or removed (bounded)
	left   map[string]leftLane  // lanes without a job since, by key
	vtime  float64              // the pass of the last owner's turn taken
	// wakeAny and wakeFirst each hold a token when a lane may have work:
	// one for a handler, one for the first-batch lane's (signal). A
	// handler that takes a batch passes a token on, so that as many wake
	// as there is work, and no more ask for it in vain.
	wakeAny, wakeFirst chan struct{}
	// waiting counts the handlers (not the first-batch lane's) waiting
	// for work.
	waiting atomic.Int32
	// cons keeps the lanes' consumers, by lane key, while they exist.
	cons  map[string]jetstream.Consumer
	ready chan struct{} // closed once the first records are read
	news  chan struct{} // closed and replaced when an active job's record changes
	once  sync.Once
	// givenUp dead-letters the work of a job left in its lane past its
	// last delivery (Worker.sweepGivenUp; nil: not looked for); givingUp
	// holds the jobs it is looking at.
	givenUp  func(ctx context.Context, id string, l queue.Lane) int
	givingUp map[string]bool
}

func newSchedule(q *queue.Queue, quota job.Quota, log *slog.Logger) *schedule {
	return &schedule{q: q, quota: quota, log: log, jobs: map[string]*jobTurn{}, owners: map[string]*ownerTurn{},
		ended: map[string]job.State{}, left: map[string]leftLane{}, cons: map[string]jetstream.Consumer{},
		wakeAny: make(chan struct{}, 1), wakeFirst: make(chan struct{}, 1), ready: make(chan struct{}),
		news: make(chan struct{}), givingUp: map[string]bool{}}
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.q.Store().Watch(ctx)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w:
			if !ok {
				return errors.New("watch closed")
			}
			if e.Key == "" {
				s.once.Do(func() { close(s.ready) }) // the initial values are read
				continue
			}
			s.update(e)
		}
	}
}

// update applies one watched entry of the jobs bucket.
func (s *schedule) update(e job.Entry) {
	id := e.Key
	if !job.ValidID(id) {
		return
	}
	var r job.Record
	deleted := e.Deleted
	if !deleted {
		var err error
		if r, err = job.DecodeRecord(e.Value); err != nil || r.ID != id {
			s.log.Warn("worker: a job record does not decode; its job gets no turns", "job", id, "err", err)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if deleted || !r.State.Active() {
		s.endLocked(id, r.State)
		return
	}
	j := s.jobs[id]
	lane := queue.LaneOf(&r)
	if j != nil && j.lane.lane != lane {
		s.endLocked(id, "") // a record rewritten into another lane: start again
		j = nil
	}
	if j == nil {
		j = &jobTurn{}
		s.jobs[id] = j
		j.lane = s.laneLocked(lane.String(), lane, "")
		j.lane.jobs[id] = j
	}
	was := j.workable()
	j.rec, j.rev = r, e.Revision
	close(s.news)
	s.news = make(chan struct{})
	if j.workable() {
		if !was {
			j.lane.fresh = true
		}
		j.lane.idleUntil, j.lane.backoff = time.Time{}, 0 // more batches, maybe
		s.wakeLocked()
	}
}

// laneLocked returns the lane turn of key, added to the schedule at the
// current passes when missing; s.mu is held.
func (s *schedule) laneLocked(key string, lane queue.Lane, stray string) *laneTurn {
	name := lane.Owner
	if stray != "" {
		name = strayOwner
	}
	o := s.owners[name]
	if o == nil {
		o = &ownerTurn{name: name, pass: s.vtime, lanes: map[string]*laneTurn{}}
		s.owners[name] = o
	}
	l := o.lanes[key]
	if l == nil {
		if len(o.lanes) == 0 {
			o.pass = max(o.pass, s.vtime) // back after an absence: no credit
		}
		l = &laneTurn{key: key, lane: lane, stray: stray, owner: o, weight: lane.Priority.Weight(), pass: o.vtime,
			jobs: map[string]*jobTurn{}}
		if stray != "" {
			l.weight = 1
		}
		o.lanes[key] = l
	}
	return l
}

// endLocked removes job id from the schedule, noting its final state st
// ("" for removed); s.mu is held. A lane left without jobs goes, and its
// consumer with it once no message is left in it.
func (s *schedule) endLocked(id string, st job.State) {
	if len(s.ended) >= maxEnded {
		clear(s.ended)
	}
	s.ended[id] = st
	j := s.jobs[id]
	if j == nil {
		return
	}
	delete(s.jobs, id)
	l := j.lane
	delete(l.jobs, id)
	if len(l.jobs) == 0 && !l.leftovers {
		s.removeLaneLocked(l)
	}
}

// removeLaneLocked takes lane l out of the schedule; its consumer is
// deleted once the lane has been without a job for laneDropAfter
// (dropLeftLanes); s.mu is held.
func (s *schedule) removeLaneLocked(l *laneTurn) {
	o := l.owner
	delete(o.lanes, l.key)
	if len(o.lanes) == 0 {
		delete(s.owners, o.name)
	}
	if l.stray == "" {
		s.left[l.key] = leftLane{lane: l.lane, since: time.Now()}
	}
}

// leftLane is a lane that has had no job since.
type leftLane struct {
	lane  queue.Lane
	since time.Time
}

// laneDropAfter is how long a lane goes without a job before a worker
// deletes its consumer: an owner submitting job after job keeps it.
const laneDropAfter = 30 * time.Second

// dropLeftLanes deletes the consumers of the lanes without a job for
// laneDropAfter that hold no message (queue.Queue.DropIdleLane).
func (s *schedule) dropLeftLanes(ctx context.Context) {
	now := time.Now()
	var due []queue.Lane
	s.mu.Lock()
	for key, l := range s.left {
		if o := s.owners[l.lane.Owner]; o != nil && o.lanes[key] != nil {
			delete(s.left, key) // back
			continue
		}
		if now.Sub(l.since) >= laneDropAfter {
			due = append(due, l.lane)
			delete(s.left, key)
		}
	}
	s.mu.Unlock()
	for _, l := range due {
		s.mu.Lock()
		delete(s.cons, l.String())
		s.mu.Unlock()
		if _, err := s.q.DropIdleLane(ctx, l); err != nil {
			s.log.Debug("worker: an idle lane's consumer stays until the server removes it", "lane", l, "err", err)
		}
	}
}

// wakeLocked wakes a handler waiting for work, and the first-batch
// lane's; s.mu is held.
func (s *schedule) wakeLocked() {
	s.signal(s.wakeAny)
	if s.waiting.Load() == 0 {
		// Every handler is busy: the first-batch lane's turn.
		s.signal(s.wakeFirst)
	}
}

// signal puts a token in ch, unless it holds one.
func (s *schedule) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// noteEnded takes job id out of the schedule on the word of a record read
// apart from the watch, which may be behind (it brings every change of
// the record in order): a cancelled job's batches left in its lane are
// dropped from then on, not solved.
func (s *schedule) noteEnded(id string, st job.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(id, st)
}

// endedState returns the state of job id if the schedule saw it end or
// go ("" for removed), and whether it did.
func (s *schedule) endedState(id string) (job.State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.ended[id]
	return st, ok
}

// record returns job id's record as last watched, and its revision, if
// the job is active.
func (s *schedule) record(id string) (job.Record, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		return job.Record{}, 0, false
	}
	return j.rec, j.rev, true
}

// awaitRecord returns job id's record as the watch has it, waiting up to
// d for the watch to bring it: a small job's batch is published before
// its record is created (producer.Start), and may be taken first. It
// reports false when the job is not active by then, or ended.
func (s *schedule) awaitRecord(ctx context.Context, id string, d time.Duration) (job.Record, uint64, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		j, news := s.jobs[id], s.news
		_, ended := s.ended[id]
		s.mu.Unlock()
		if j != nil {
			return s.record(id)
		}
		if ended {
			return job.Record{}, 0, false
		}
		select {
		case <-news:
		case <-t.C:
			return job.Record{}, 0, false
		case <-ctx.Done():
			return job.Record{}, 0, false
		}
	}
}

// charge is one turn taken: what pick added to the passes, to give back
// when the turn brought nothing.
type charge struct {
	lane         *laneTurn
	owner, inner float64
}

// next returns the next batch to handle, from the lane whose turn it is,
// or nil when no lane has one to deliver now; wake then receives when
// one may have, and retry says when to ask again anyway. With first,
// only fresh lanes are asked (the first-batch lane).
func (s *schedule) next(ctx context.Context, first bool) (m jetstream.Msg, wake <-chan struct{}, retry time.Duration) {
	for ctx.Err() == nil {
		c, wake, retry := s.pick(first)
		if c.lane == nil {
			return nil, wake, retry
		}
		m, err := s.fetch(ctx, c.lane)
		if m != nil {
			s.mu.Lock()
			c.lane.fresh = false
			s.mu.Unlock()
			if md, err := m.Metadata(); !first && err == nil && md.NumPending > 0 {
				s.signal(s.wakeAny) // more: the next idle handler asks
			}
			return m, nil, 0
		}
		s.idle(c, err)
	}
	return nil, nil, 0
}

// pick returns the lane with work whose turn it is, charging it and its
// owner for a batch, or no lane and when to look again. With first, only
// fresh lanes are considered.
func (s *schedule) pick(first bool) (charge, <-chan struct{}, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	retry := maxIdle
	ready := func(l *laneTurn) bool {
		if first && (!l.fresh || l.stray != "") || !l.hasWork() {
			return false
		}
		if now.Before(l.idleUntil) {
			retry = min(retry, l.idleUntil.Sub(now))
			return false
		}
		return true
	}
	var best *ownerTurn
	var bestLane *laneTurn
	bestWeight := 0
	for _, o := range s.owners {
		weight := 0
		var lane *laneTurn
		for _, l := range o.lanes {
			if !ready(l) {
				continue
			}
			weight = max(weight, l.weight)
			if lane == nil || l.pass < lane.pass || (l.pass == lane.pass && l.key < lane.key) {
				lane = l
			}
		}
		if lane == nil {
			continue
		}
		if best == nil || o.pass < best.pass || (o.pass == best.pass && o.name < best.name) {
			best, bestLane, bestWeight = o, lane, weight
		}
	}
	if best == nil {
		if first {
			return charge{}, s.wakeFirst, retry
		}
		return charge{}, s.wakeAny, retry
	}
	c := charge{lane: bestLane, owner: 1 / float64(max(1, bestWeight)), inner: 1 / float64(max(1, bestLane.weight))}
	best.pass = max(best.pass, s.vtime)
	s.vtime = best.pass
	best.pass += c.owner
	bestLane.pass = max(bestLane.pass, best.vtime)
	best.vtime = bestLane.pass
	bestLane.pass += c.inner
	return c, nil, 0
}

// fetch asks l's consumer for one batch, without waiting for one.
func (s *schedule) fetch(ctx context.Context, l *laneTurn) (jetstream.Msg, error) {
	s.mu.Lock()
	c := s.cons[l.key]
	s.mu.Unlock()
	if c == nil {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		var err error
		if l.stray == "" {
			c, err = s.q.LaneWork(actx, l.lane)
		} else {
			c, err = s.q.StrayConsumer(actx, l.stray)
		}
		cancel()
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.cons[l.key] = c
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

// idle notes that c's lane had nothing to deliver (err: or could not be
// asked): it is asked again after a back-off that grows while it stays
// idle, and the turn is given back.
func (s *schedule) idle(c charge, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := c.lane
	if err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
			delete(s.cons, l.key) // deleted: made again while the lane has work
		}
		s.log.Debug("worker: cannot ask a lane's consumer for work", "lane", l.key, "err", err)
	}
	// No charge for a turn that brought nothing.
	l.owner.pass -= c.owner
	l.pass -= c.inner
	if err == nil || errors.Is(err, jetstream.ErrNoMessages) {
		// Nothing left of the stray work the sweep found, until it finds
		// more.
		l.leftovers = false
		if l.stray != "" || len(l.jobs) == 0 {
			if l.owner.lanes[l.key] == l {
				s.removeLaneLocked(l)
			}
			return
		}
	}
	l.backoff = min(max(2*l.backoff, minIdle), maxIdle)
	l.idleUntil = time.Now().Add(l.backoff)
}

// pending returns the lines of the active jobs without a result yet, by
// priority.
func (s *schedule) pending() map[job.Priority]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[job.Priority]int64{}
	for _, j := range s.jobs {
		out[j.rec.Options.Priority.Or()] += max(0, j.rec.Lines-j.rec.LinesDone())
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
// strayEvery until ctx is done: messages on subjects no active job has
// (batches of jobs that ended, left in their lanes; a job id without a
// record; or not a job's subject at all). They are handled as any batch,
// and so dropped or dead-lettered with the reason, instead of lying
// unseen in the stream. It also fails stale jobs and recounts jobs whose
// counts were lost.
func (s *schedule) sweep(ctx context.Context) {
	store := s.q.Store()
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
		s.enforceQuota(actx, store)
		s.recount(ctx, actx, store)
		s.dropLeftLanes(actx)
		for subject := range stray {
			if id, _, ok := s.q.Opts.WorkJob(subject); ok {
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

// addStray gives the stray work on subject a turn: its lane's, or one of
// its own when it is no lane's.
func (s *schedule) addStray(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, lane, ok := s.q.Opts.WorkJob(subject); ok {
		l := s.laneLocked(lane.String(), lane, "")
		l.leftovers, l.idleUntil = true, time.Time{}
	} else {
		s.laneLocked("stray "+subject, queue.Lane{}, subject)
	}
	s.wakeLocked()
}

// failStale marks failed the jobs whose producer stopped publishing
// (killed, or cut off: no heartbeat for job.StaleAfter): they will never
// finish, and nobody should wait for them. Every worker may try; the
// record's compare-and-set lets one do it, and only while it is stale.
// Their batches left are dropped as their lanes deliver them.
func (s *schedule) failStale(ctx context.Context, store *job.Store) {
	now := time.Now()
	var stale []string
	s.mu.Lock()
	for id, j := range s.jobs {
		if j.rec.Stale(now) {
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
		}
	}
}

// usage returns owner's open jobs and their lines without a result yet.
func (s *schedule) usage(owner string) (jobs int, lines int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owners[owner]
	if o == nil {
		return 0, 0
	}
	for _, l := range o.lanes {
		for _, j := range l.jobs {
			jobs++
			lines += max(0, j.rec.Lines-j.rec.LinesDone())
		}
	}
	return jobs, lines
}

// enforceQuota fails the newest open jobs of each owner over the quota
// (open jobs, or lines without a result), until it is within: jobs
// submitted past the doors' own checks (by hand, or by many producers at
// once), which would otherwise take the workers from other owners'. The
// failed job's error names the quota. Every worker may try; the record's
// compare-and-set lets one do it.
func (s *schedule) enforceQuota(ctx context.Context, store *job.Store) {
	if s.quota.JobsOpen <= 0 && s.quota.LinesPending <= 0 {
		return
	}
	type over struct {
		id  string
		err error
	}
	var fail []over
	s.mu.Lock()
	for name, o := range s.owners {
		var open []*jobTurn
		var lines int64
		for _, l := range o.lanes {
			for _, j := range l.jobs {
				open = append(open, j)
				lines += max(0, j.rec.Lines-j.rec.LinesDone())
			}
		}
		slices.SortFunc(open, func(a, b *jobTurn) int { return job.CompareIDs(b.rec.ID, a.rec.ID) }) // newest first
		for i, j := range open {
			err := s.quota.Admit(name, len(open)-i, lines)
			if err == nil {
				break
			}
			fail = append(fail, over{j.rec.ID, err})
			lines -= max(0, j.rec.Lines-j.rec.LinesDone())
		}
	}
	s.mu.Unlock()
	for _, f := range fail {
		_, err := store.ApplyConfirmed(ctx, f.id, func(r *job.Record) error {
			if !r.Fail(f.err.Error(), time.Now()) {
				return job.ErrUnchanged
			}
			return nil
		}, func(r *job.Record) bool { return !r.State.Active() })
		if err != nil {
			s.log.Debug("worker: cannot fail a job over its owner's quota", "job", f.id, "err", err)
			continue
		}
		s.log.Warn("worker: a job over its owner's quota failed", "job", f.id, "err", f.err)
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
// them ('sudoku dlq replay'), recounted at most every recountEvery. One
// still short of batches with its work left in its lane, none of the
// lane's pending or in work, has work given up by the server without a
// word: it is dead-lettered (s.givenUp, in the background until run is
// done).
func (s *schedule) recount(run, ctx context.Context, store *job.Store) {
	type due struct {
		id   string
		lane queue.Lane
		from uint64
	}
	var jobs []due
	now := time.Now()
	s.mu.Lock()
	for id, j := range s.jobs {
		if j.rec.State != job.Published || j.rec.DoneBatches >= j.rec.Batches {
			continue
		}
		if j.recountedAt == j.rec.DoneBatches && now.Sub(j.recounted) < j.recountWait {
			continue
		}
		jobs = append(jobs, due{id, j.lane.lane, j.rec.ResultsFrom})
	}
	s.mu.Unlock()
	for _, j := range jobs {
		if rec, idle := s.recountJob(ctx, store, j.id, j.lane, j.from); idle && rec.State == job.Published && !rec.Complete() {
			s.lookForGivenUp(run, j.id, j.lane)
		}
	}
}

// lookForGivenUp starts s.givenUp for job id in lane l, unless it is
// looking at the job already.
func (s *schedule) lookForGivenUp(run context.Context, id string, l queue.Lane) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.givenUp == nil || s.givingUp[id] {
		return
	}
	s.givingUp[id] = true
	go func() {
		ctx, cancel := context.WithTimeout(run, givenUpTimeout)
		defer cancel()
		s.givenUp(ctx, id, l)
		s.mu.Lock()
		delete(s.givingUp, id)
		s.mu.Unlock()
	}()
}

// givenUpTimeout bounds one look for a job's work given up, its grace
// included.
const givenUpTimeout = 5 * time.Minute

// recountJob recounts job id's results (see recount) if its work in lane
// l has nothing left to deliver or to ack; from is the record's
// ResultsFrom. It returns the record as recounted, and whether it was
// (the work idle, the recount done).
func (s *schedule) recountJob(ctx context.Context, store *job.Store, id string, l queue.Lane, from uint64) (job.Record, bool) {
	if idle, err := s.q.JobIdle(ctx, id, l); err != nil || !idle {
		return job.Record{}, false // work is left: its batches are counted as they are done
	}
	done := map[uint64]job.Counts{}
	if err := s.q.TallyResults(ctx, id, from, func(index uint64, c job.Counts) { done[index] = c }); err != nil {
		s.log.Debug("worker: cannot recount a job's results", "job", id, "err", err)
		return job.Record{}, false
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
		return job.Record{}, false
	}
	if rec.DoneBatches > was {
		s.log.Info("worker: a job's record counted fewer batches than its results: recounted",
			"job", id, "counted", was, "results", rec.DoneBatches, "state", rec.State)
	}
	s.mu.Lock()
	if j := s.jobs[id]; j != nil {
		// Again soon while results may still be coming in (a count
		// lost in the last moments), then less and less often.
		if !j.recounted.IsZero() && j.recountedAt == rec.DoneBatches {
			j.recountWait = min(2*j.recountWait, recountEvery)
		} else {
			j.recountWait = recountFirst
		}
		j.recounted, j.recountedAt = time.Now(), rec.DoneBatches
	}
	s.mu.Unlock()
	return rec, true
}
