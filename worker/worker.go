// Package worker is the consuming side of sudoku-queue: it pulls batches
// of puzzles from the work stream, checks each against its job's manifest,
// answers each puzzle from the cache or by solving it, publishes the
// batch's results to the results stream and only then acks the batch. It
// also answers single puzzles on the NATS micro service's solve endpoint,
// ahead of any bulk work.
//
// A message's fate follows the asynq model: success -> Ack; a permanent
// failure (a body that does not decode, a batch its job does not list) ->
// copy to the dead-letter stream with the reason, then Term; a transient
// failure (JetStream unavailable) -> NakWithDelay, growing with each
// delivery, and dead-letter on the last one. The cache is best-effort: a
// cache that is down, full or flushed only makes the worker solve more.
package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Observer receives what a worker did, for metrics. Its methods are called
// from many goroutines and must be safe for concurrent use.
type Observer interface {
	// Batch is called once per message handled (and per single puzzle
	// answered on the solve endpoint), with its outcome.
	Batch(s *BatchStats)
}

// The outcomes of a message, as in BatchStats.Outcome.
const (
	OutcomeAcked      = "acked"
	OutcomeNak        = "nak"
	OutcomeDeadLetter = "dead_letter"
	OutcomeAbandoned  = "abandoned"
)

// BatchStats describes one handled message.
type BatchStats struct {
	Interactive bool
	Outcome     string // one of the Outcome constants
	Redelivered bool   // delivered more than once
	Puzzles     int
	CacheHits   int
	Statuses    map[result.Status]int
	SolveTimes  []time.Duration // one per puzzle solved (not cached); valid during Observer.Batch only
	Latency     time.Duration   // from delivery to ack (or nak)
	Err         error           // why it was not acked
}

// Options tune a Worker. The zero value works.
type Options struct {
	// Concurrency is the number of handler goroutines (default
	// GOMAXPROCS): batches in work at once. A handler without a batch
	// helps solve the puzzles of another's. One more goroutine serves the
	// solve endpoint.
	Concurrency int
	// Fetch is how many messages the worker requests ahead (default
	// 4 x Concurrency): enough to keep every core busy while batches wait
	// for their round trips, few enough that no worker hoards messages
	// that then time out.
	Fetch int
	// MaxNodes is the solver's node budget per puzzle (0: the solver's
	// default).
	MaxNodes int64
	// Heartbeat is how often a message in work is reported InProgress
	// (default AckWait/3).
	Heartbeat time.Duration
	// NakDelays are the waits before the 1st, 2nd, ... redelivery after a
	// transient failure; the last repeats (default DefaultNakDelays).
	NakDelays []time.Duration
	// ShutdownTimeout bounds how long Run waits, once its context is done,
	// for the batches in work; those still running then are abandoned
	// unacked and redelivered (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Version is the version the micro service reports (default
	// "0.0.0").
	Version string
	// NoService skips the NATS micro service (and so the solve endpoint).
	NoService bool
	// Endpoints are more endpoints for the micro service (see
	// internal/service), added after solve.
	Endpoints []Endpoint
	// Logger receives the worker's logs (default slog.Default()).
	Logger *slog.Logger
	// Observer receives per-batch statistics (optional).
	Observer Observer
}

// Worker handles batches from a queue. Create one with New and start it
// with Run.
type Worker struct {
	nc    *nats.Conn
	q     *queue.Queue
	jobs  *job.Store
	cache *cache.Guard
	opts  Options
	log   *slog.Logger
	mf    manifestCache

	commits    chan struct{}  // a token per batch waiting for its round trips
	committing sync.WaitGroup // batches being committed

	inFlight atomic.Int64
	help     chan *share        // a batch's puzzles, offered to idle handlers
	solves   chan *solveRequest // requests of the solve endpoint
	ready    chan struct{}      // closed once Run serves and pulls

	// solve solves one grid; tests replace it.
	solve func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error)
}

// DefaultNakDelays returns Options.NakDelays' default, and so queue.backoff's
// (internal/config takes it from here): 1s, 5s, 30s, 1m.
func DefaultNakDelays() []time.Duration {
	return []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, time.Minute}
}

// DefaultShutdownTimeout is Options.ShutdownTimeout's default, and so
// worker.shutdown_timeout's.
const DefaultShutdownTimeout = 30 * time.Second

// New returns a worker for q that looks puzzles up in, and adds their
// results to, the cache c (nil for none).
func New(nc *nats.Conn, q *queue.Queue, c *cache.Guard, opts Options) *Worker {
	if opts.Concurrency <= 0 {
		opts.Concurrency = runtime.GOMAXPROCS(0)
	}
	if opts.Fetch <= 0 {
		opts.Fetch = 4 * opts.Concurrency
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = q.Opts.AckWait / 3
	}
	if len(opts.NakDelays) == 0 {
		opts.NakDelays = DefaultNakDelays()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Version == "" {
		opts.Version = "0.0.0"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if c == nil {
		c = cache.NewGuard(nil, cache.GuardOptions{})
	}
	return &Worker{nc: nc, q: q, jobs: job.NewStore(q.JS, q.Jobs), cache: c, opts: opts, log: opts.Logger,
		solve: (*solver.Solver).Solve, commits: make(chan struct{}, 2*opts.Concurrency),
		help: make(chan *share), solves: make(chan *solveRequest, 64), ready: make(chan struct{})}
}

// Ready is closed once Run has registered the micro service and started
// pulling.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// InFlight returns the number of messages being handled now.
func (w *Worker) InFlight() int64 { return w.inFlight.Load() }

// Run pulls and handles messages until ctx is done, then shuts down: it
// stops the micro service and the pulling, hands back (Nak) messages
// fetched but not started, waits up to ShutdownTimeout for the batches in
// work and returns. It returns nil after a clean shutdown, or the error
// that stopped it.
func (w *Worker) Run(ctx context.Context) error {
	// work is cancelled only when the shutdown timeout has passed: batches
	// in work may finish after ctx is done.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	// Listen before pulling: the server gives up on a message only while
	// someone pulls (see maxdeliver.go).
	adv, err := w.watchMaxDeliveries()
	if err != nil {
		return err
	}
	defer func() { _ = adv.Unsubscribe() }()

	var interactive sync.WaitGroup
	interactive.Add(1)
	go func() {
		defer interactive.Done()
		w.serveSolves(work)
	}()
	defer func() { close(w.solves); interactive.Wait() }()
	if !w.opts.NoService {
		svc, err := w.startService()
		if err != nil {
			return err
		}
		defer func() { _ = svc.Stop() }()
	}

	// Short-lived pull requests with frequent heartbeats: when a cluster
	// node dies with the consumer's leader, the pull requests it held die
	// too, and the client notices (and asks again) within seconds rather
	// than after the default 30 s expiry.
	p := puller{c: w.q.Work, subject: w.q.Opts.WorkFilter(), opts: []jetstream.PullMessagesOpt{
		jetstream.PullExpiry(5 * time.Second), jetstream.PullHeartbeat(time.Second),
		jetstream.PullMaxMessages(w.opts.Fetch)}}
	if p.it, err = p.c.Messages(p.opts...); err != nil {
		return fmt.Errorf("worker: pull from %s: %w", p.subject, err)
	}
	msgs := make(chan jetstream.Msg)
	var pulling, handlers sync.WaitGroup
	pulling.Add(1)
	go w.pull(ctx, &p, msgs, &pulling)
	for i := 0; i < w.opts.Concurrency; i++ {
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			var sv solver.Solver
			for {
				select {
				case m, ok := <-msgs:
					if !ok {
						return
					}
					w.handle(ctx, work, &sv, m)
				case sh := <-w.help:
					sh.work(&sv)
					sh.helpers.Done()
				}
			}
		}()
	}

	close(w.ready)
	w.log.Info("worker started", "concurrency", w.opts.Concurrency, "fetch", w.opts.Fetch,
		"stream", w.q.Opts.Stream, "subjects", w.q.Opts.WorkFilter(), "solve", w.q.Opts.SolveSubject(),
		"cache", w.cache.Enabled())

	<-ctx.Done()
	w.log.Info("worker stopping: no new messages; finishing batches in work", "in_flight", w.inFlight.Load(),
		"timeout", w.opts.ShutdownTimeout)
	pulling.Wait()

	done := make(chan struct{})
	go func() { handlers.Wait(); w.committing.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.opts.ShutdownTimeout):
		w.log.Warn("worker shutdown timeout: abandoning batches in work; they will be redelivered",
			"in_flight", w.inFlight.Load())
		cancelWork()
		<-done
	}
	w.log.Info("worker stopped")
	return nil
}

// puller is the consumer's message iterator, which pull opens again when
// it fails.
type puller struct {
	c       jetstream.Consumer
	subject string
	opts    []jetstream.PullMessagesOpt
	it      jetstream.MessagesContext
}

// idleReopen is how long pull waits without a message before it opens its
// iterator again: a pull request lost in a cluster failover, or a client
// stall (nats.go#1622), costs at most this long.
const idleReopen = 10 * time.Second

// pull feeds messages from p to ch until ctx is done, then drains p:
// messages that arrive after that (from the client's buffer) are handed
// back at once with a Nak. An iterator that fails, or stays idle for
// idleReopen, is stopped and opened again.
func (w *Worker) pull(ctx context.Context, p *puller, ch chan<- jetstream.Msg, wg *sync.WaitGroup) {
	defer wg.Done()
	defer close(ch)
	draining := false
	last := time.Now()
	failing := false // log a run of pull errors once
	reopen := func(err error) bool {
		if p.it != nil {
			p.it.Stop()
		}
		if err != nil && !failing {
			w.log.Warn("worker: pull failed; asking again", "subject", p.subject, "err", err)
			failing = true
		}
		for ctx.Err() == nil {
			it, err := p.c.Messages(p.opts...)
			if err == nil {
				p.it, last = it, time.Now()
				return true
			}
			select {
			case <-time.After(500 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		return false
	}
	for {
		if ctx.Err() != nil && !draining {
			p.it.Drain()
			draining = true
		}
		// A bounded wait: Next without one has been seen to stall for the
		// heartbeat period with a small window (nats.go#1622).
		m, err := p.it.Next(jetstream.NextMaxWait(100 * time.Millisecond))
		switch {
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			if draining || !reopen(nil) {
				return
			}
			continue
		case errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded):
			if !draining && time.Since(last) > idleReopen && !reopen(nil) {
				return
			}
			continue
		case err != nil:
			if !draining && !reopen(err) {
				return
			}
			continue
		}
		last, failing = time.Now(), false
		if draining {
			_ = m.Nak()
			continue
		}
		select {
		case ch <- m:
		case <-ctx.Done():
			_ = m.Nak()
		}
	}
}

// task is one message in work, from its delivery to its ack (or nak).
type task struct {
	w         *Worker
	m         jetstream.Msg
	batch     *job.Batch
	digest    job.Digest
	delivered uint64
	start     time.Time
	st        BatchStats
	stopBeat  chan struct{}
	sc        *scratch // the batch's memory, released when it is done
}

// handle processes one message: it decodes it, checks it against its
// job's manifest, answers every puzzle (from the cache or by solving) and
// hands the results to a committer goroutine that publishes them and
// acks, so that this solver goroutine goes on with the next message during
// the round trips. It abandons the batch when ctx is done.
func (w *Worker) handle(run, ctx context.Context, sv *solver.Solver, m jetstream.Msg) {
	w.inFlight.Add(1)
	t := &task{w: w, m: m, start: time.Now(), sc: scratches.Get().(*scratch)}
	t.delivered = 1
	if md, err := m.Metadata(); err == nil {
		t.delivered = md.NumDelivered
	}
	t.st.Redelivered = t.delivered > 1

	b, err := job.DecodeWorkInto(m.Data(), t.sc.items)
	if cap(b.Items) > cap(t.sc.items) {
		t.sc.items = b.Items
	}
	if err != nil {
		t.deadLetter(queue.ReasonUndecodable, err)
		return
	}
	t.batch = &b
	t.st.Puzzles = len(b.Items)

	// Keep the message ours while we work on it.
	t.stopBeat = make(chan struct{})
	go func() {
		tk := time.NewTicker(w.opts.Heartbeat)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				_ = m.InProgress()
			case <-t.stopBeat:
				return
			}
		}
	}()

	t.digest = b.ComputeDigest()
	reason, err := w.check(ctx, &b, t.digest, m.Subject())
	switch {
	case err != nil:
		t.fail(ctx, err)
		return
	case reason != "":
		t.deadLetter(reason, &RejectError{Reason: reason, Text: reasonText(reason, &b)})
		return
	}
	if t.delivered > 1 && w.stored(ctx, &b, t.digest) {
		// Its results were published, and the ack was lost: nothing to do.
		t.ack()
		t.done()
		return
	}
	solved := w.answer(ctx, sv, &b, &t.st, t.sc)
	if ctx.Err() != nil {
		t.fail(ctx, ctx.Err())
		return
	}
	// Bound the batches waiting for their round trips.
	select {
	case w.commits <- struct{}{}:
	case <-ctx.Done():
		t.fail(ctx, ctx.Err())
		return
	}
	w.committing.Add(1)
	go func() {
		defer func() { <-w.commits; w.committing.Done() }()
		t.commit(ctx, solved)
	}()
}

// RejectError is why a batch was refused: its job's producer did not
// publish it (Reason is one of queue.ReasonUnknownJob,
// queue.ReasonOutOfRange or queue.ReasonMismatch).
type RejectError struct {
	Reason string
	Text   string
}

func (e *RejectError) Error() string { return e.Text }

// reasonText says why a batch is dead-lettered.
func reasonText(reason string, b *job.Batch) string {
	switch reason {
	case queue.ReasonUnknownJob:
		return fmt.Sprintf("batch %d names job %s, which has no record (never submitted, removed or expired)", b.Index, b.Job)
	case queue.ReasonOutOfRange:
		return fmt.Sprintf("job %s has no batch %d (items %d-%d): its producer published none", b.Job, b.Index,
			b.First, b.First+uint64(len(b.Items))-1)
	case queue.ReasonMismatch:
		return fmt.Sprintf("batch %d of job %s is not the one its producer published (the digests differ)", b.Index, b.Job)
	}
	return reason
}

// done ends the task: the heartbeat stops, the observer hears of it and
// its memory is released. Latency is from delivery to now unless set.
func (t *task) done() {
	if t.stopBeat != nil {
		close(t.stopBeat)
	}
	if t.st.Latency == 0 {
		t.st.Latency = time.Since(t.start)
	}
	if o := t.w.opts.Observer; o != nil {
		o.Batch(&t.st)
	}
	t.w.inFlight.Add(-1)
	t.sc.release()
}

// ack acks the message, whose results are stored.
func (t *task) ack() {
	if err := t.m.Ack(); err != nil {
		// The results are stored: a redelivery finds them and acks.
		t.w.log.Warn("worker: ack failed; the batch will be redelivered", "job", t.batch.Job, "batch", t.batch.Index, "err", err)
	}
	t.st.Outcome = OutcomeAcked
	t.st.Latency = time.Since(t.start)
}

// commit publishes the batch's results, acks, then adds the puzzles it
// solved to the cache.
func (t *task) commit(ctx context.Context, solved []cache.Entry) {
	if err := t.w.publishResults(ctx, t.batch, t.digest, t.sc); err != nil {
		t.fail(ctx, err)
		return
	}
	t.ack()
	t.w.event(t.batch.Job, t.batch.Index, len(t.batch.Items))
	t.w.cache.Put(ctx, solved)
	t.done()
}

// event publishes a dashboard's note of work done.
func (w *Worker) event(jobID string, index uint64, n int) {
	data, err := json.Marshal(queue.Event{Job: jobID, Batch: index, N: n})
	if err == nil {
		_ = w.nc.Publish(w.q.Opts.EventSubject(cmp.Or(jobID, "solve")), data)
	}
}

// fail hands the message back after a failure: abandoned (Nak) when ctx
// is done, dead-lettered on its last delivery, else nak'ed with a delay
// that grows with its deliveries.
func (t *task) fail(ctx context.Context, err error) {
	w := t.w
	t.st.Err = err
	if ctx.Err() != nil {
		t.st.Outcome = OutcomeAbandoned
		_ = t.m.Nak()
		t.done()
		return
	}
	if t.delivered >= uint64(w.q.Opts.MaxDeliver) {
		t.deadLetter(queue.ReasonMaxDeliver, err)
		return
	}
	w.log.Warn("worker: batch failed; it will be redelivered", "subject", t.m.Subject(), "deliveries", t.delivered, "err", err)
	t.st.Outcome = OutcomeNak
	delay := w.opts.NakDelays[min(int(t.delivered)-1, len(w.opts.NakDelays)-1)]
	_ = t.m.NakWithDelay(delay)
	t.done()
}

// deadLetter copies the message to the dead-letter stream with why it
// failed, then terminates it so it is never delivered again. If the copy
// cannot be stored, the message is left to be redelivered rather than
// lost.
func (t *task) deadLetter(reason string, cause error) {
	w, m := t.w, t.m
	t.st.Outcome, t.st.Err = OutcomeDeadLetter, cause
	defer t.done()
	dl := w.q.Opts.DeadLetterMsg(m.Subject(), m.Headers(), m.Data(), reason, cause, t.delivered)
	if md, err := m.Metadata(); err == nil {
		// One dead letter per message and reason, however many
		// deliveries end here (a message redelivered while a first
		// delivery is being dead-lettered).
		dl.Header.Set(nats.MsgIdHdr, md.Stream+"."+strconv.FormatUint(md.Sequence.Stream, 10)+"."+reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.q.JS.PublishMsg(ctx, dl); err != nil {
		w.log.Error("worker: cannot store a dead letter; leaving the message for redelivery",
			"reason", reason, "err", err)
		_ = m.NakWithDelay(w.opts.NakDelays[len(w.opts.NakDelays)-1])
		t.st.Outcome = OutcomeNak
		return
	}
	_ = m.Term()
	w.log.Warn("worker: message moved to the dead-letter stream", "reason", reason, "err", cause,
		"subject", m.Subject(), "deliveries", t.delivered, "dlq", w.q.Opts.DLQStream)
}

// answer turns every Solve item of b into a Known item: from the cache
// (unless the batch says not to look) or by solving. It returns the cache
// entries of what it solved, in sc's memory.
func (w *Worker) answer(ctx context.Context, sv *solver.Solver, b *job.Batch, st *BatchStats, sc *scratch) []cache.Entry {
	first := b.Flags&job.FlagFirstSolution != 0
	sc.idx = sc.idx[:0]
	for i := range b.Items {
		if b.Items[i].Kind == job.Solve {
			sc.idx = append(sc.idx, i)
		}
	}
	idx := sc.idx
	keys := sc.keys[:0]
	if w.cache.Enabled() {
		for _, i := range idx {
			keys = append(keys, job.KeyOf(&b.Items[i].Grid))
		}
	}
	sc.keys = keys
	var hits []*job.Outcome
	if b.Flags&job.FlagNoLookup == 0 {
		hits, _ = w.cache.LookupBatch(ctx, keys)
	}
	sh := &share{w: w, ctx: ctx, b: b, opts: solver.Options{MaxNodes: w.opts.MaxNodes, FirstSolution: first},
		idx: sc.todo[:0]}
	misses := sc.misses[:0] // indexes into idx of the puzzles to solve
	for j, i := range idx {
		it := &b.Items[i]
		if hits != nil && hits[j] != nil && hits[j].Answers(first) && hits[j].Puzzle == it.Grid {
			it.Kind, it.Outcome = job.Known, *hits[j]
			it.Outcome.Cached = true
			st.CacheHits++
			continue
		}
		misses = append(misses, j)
		sh.idx = append(sh.idx, i)
	}
	sc.misses, sc.todo = misses, sh.idx
	sh.times = slices.Grow(sc.times[:0], len(sh.idx))[:len(sh.idx)]
	sc.times = sh.times
	sh.solve(sv)
	if ctx.Err() != nil {
		return nil
	}
	st.SolveTimes = sh.times
	solved := sc.entries[:0]
	if len(keys) > 0 {
		// The cache forms, in one buffer: one that grows
		// leaves the earlier values in the one before, as they are.
		arena := slices.Grow(sc.arena[:0], 64*len(misses))
		for _, j := range misses {
			o := &b.Items[idx[j]].Outcome
			n := len(arena)
			arena = job.AppendCacheValue(arena, o)
			solved = append(solved, cache.Entry{Key: keys[j], Outcome: o, Value: arena[n:len(arena):len(arena)]})
		}
		sc.arena = arena
	}
	sc.entries = solved
	st.Statuses = make(map[result.Status]int, 2)
	for i := range b.Items {
		if b.Items[i].Kind == job.Known {
			st.Statuses[b.Items[i].Outcome.Status]++
		}
	}
	return solved
}

// share is the puzzles of one batch that are to be solved, shared out in
// chunks between the handler that took the batch and the handlers that
// are idle meanwhile, so that a job of few batches still uses every core.
type share struct {
	w     *Worker
	ctx   context.Context
	b     *job.Batch
	opts  solver.Options
	idx   []int           // the items to solve
	times []time.Duration // the solving time of each
	next  atomic.Int64    // the next chunk to take

	helpers sync.WaitGroup
}

// shareChunk is how many puzzles a handler takes from a share at a time:
// small enough to balance hard puzzles, large enough that taking one costs
// nothing next to solving it.
const shareChunk = 8

// solve solves every item of sh, with the help of idle handlers, and
// returns when all are done.
func (sh *share) solve(sv *solver.Solver) {
	offered := 1 // handlers at work on sh, this one included
	for sh.take(sv) {
		if offered < sh.w.opts.Concurrency {
			sh.helpers.Add(1)
			select {
			case sh.w.help <- sh:
				offered++
			default:
				sh.helpers.Done()
			}
		}
	}
	sh.helpers.Wait()
}

// work solves chunks of sh until none is left.
func (sh *share) work(sv *solver.Solver) {
	for sh.take(sv) {
	}
}

// take solves the next chunk of sh, and reports whether there was one.
func (sh *share) take(sv *solver.Solver) bool {
	start := int(sh.next.Add(shareChunk)) - shareChunk
	if start >= len(sh.idx) || sh.ctx.Err() != nil {
		return false
	}
	t := time.Now()
	for k := start; k < min(start+shareChunk, len(sh.idx)); k++ {
		it := &sh.b.Items[sh.idx[k]]
		o := sh.w.solveOne(sh.ctx, sv, &it.Grid, sh.opts)
		now := time.Now()
		sh.times[k], t = now.Sub(t), now
		it.Kind, it.Outcome = job.Known, o
	}
	return true
}

// solveOne validates and solves g (an invalid puzzle is the solver's
// *ParseError, made an invalid outcome by FromSolve); a panic in the
// solver becomes the puzzle's error instead of killing the worker.
func (w *Worker) solveOne(ctx context.Context, sv *solver.Solver, g *solver.Grid, opts solver.Options) (o job.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			*sv = solver.Solver{} // its state may be inconsistent
			o = job.Outcome{Status: result.StatusGaveUp, Puzzle: *g, Error: fmt.Sprintf("solver: internal error: %v", p)}
		}
	}()
	r, err := w.solve(sv, ctx, g, opts)
	return job.FromSolve(g, r, err)
}
