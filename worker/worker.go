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
	"go.opentelemetry.io/otel/trace"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/nice"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
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
	OutcomeDropped    = "dropped"
)

// BatchStats describes one handled message.
type BatchStats struct {
	Interactive bool
	// Job and Batch name the batch (Job "" for a single puzzle, or a
	// message that does not decode).
	Job         string
	Batch       uint64
	Delivered   time.Time // when the worker took the batch
	Outcome     string    // one of the Outcome constants
	Redelivered bool      // delivered more than once
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
	// helps solve the puzzles of another's. One more handler, the
	// first-batch lane, takes only each job's first batch at this worker
	// (see schedule); one more goroutine serves the solve endpoint.
	Concurrency int
	// Nice is the CPU priority (nice value, 0 to 19) of the handlers'
	// threads, on Linux: their bulk solving then gives way to everything
	// else on the machine, this worker's endpoints and its first-batch
	// lane included (0: as the process runs).
	Nice int
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
	// Quota bounds what one owner may have queued: the worker fails the
	// newest of an owner's open jobs while the owner is over it (zero:
	// no bound).
	Quota job.Quota
	// Signer signs each results message and solve reply the worker
	// produces (proof.Header; config proof.key), so that readers that
	// trust its key take its unique and gave_up answers without solving
	// them again. Nil signs nothing.
	Signer *proof.Signer
	// Logger receives the worker's logs (default slog.Default()).
	Logger *slog.Logger
	// Observer receives per-batch statistics (optional).
	Observer Observer
}

// Worker handles batches from a queue. Create one with New and start it
// with Run.
type Worker struct {
	nc      *nats.Conn
	q       *queue.Queue
	jobs    *job.Store
	cache   *cache.Guard
	opts    Options
	log     *slog.Logger
	mf      manifestCache
	sched   *schedule
	counted countedBatches // each job's last batches counted
	// niceOnce logs once that Options.Nice could not be applied.
	niceOnce sync.Once

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
	w := &Worker{nc: nc, q: q, jobs: q.Store(), cache: c, opts: opts, log: opts.Logger,
		sched: newSchedule(q, opts.Quota, opts.Logger),
		solve: (*solver.Solver).Solve, commits: make(chan struct{}, 2*opts.Concurrency),
		help: make(chan *share), solves: make(chan *solveRequest, 64), ready: make(chan struct{})}
	w.sched.givenUp = w.sweepGivenUp
	return w
}

// Ready is closed once Run has registered the micro service and started
// pulling.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// Pending returns the lines of the active jobs without a result yet, by
// priority, as the worker's watch of the job records last saw them: the
// backlog an autoscaler reads.
func (w *Worker) Pending() map[job.Priority]int64 { return w.sched.pending() }

// Usage returns owner's open jobs and their lines without a result yet,
// as the worker's watch of the job records last saw them (a
// producer.UsageFunc for the micro service's submit endpoint).
func (w *Worker) Usage(_ context.Context, owner string) (jobs int, lines int64, err error) {
	jobs, lines = w.sched.usage(owner)
	return jobs, lines, nil
}

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

	// The schedule's watch of the job records runs until the worker has
	// stopped: batches in work still look up their jobs.
	watching, stopWatch := context.WithCancel(work)
	defer stopWatch()
	go w.sched.watch(watching)
	go w.sched.sweep(watching)
	select {
	case <-w.sched.ready:
	case <-ctx.Done():
	}
	var handlers sync.WaitGroup
	for i := 0; i < w.opts.Concurrency; i++ {
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			w.serveBatches(ctx, work, false)
		}()
	}
	// The first-batch lane (see schedule): one handler more, for the
	// first batch of each job.
	handlers.Add(1)
	go func() {
		defer handlers.Done()
		w.serveBatches(ctx, work, true)
	}()

	close(w.ready)
	w.log.Info("worker started", "concurrency", w.opts.Concurrency,
		"stream", w.q.Opts.Stream, "subjects", w.q.Opts.WorkFilter(), "solve", w.q.Opts.SolveSubject(),
		"cache", w.cache.Enabled(), "jobs", w.sched.active())

	<-ctx.Done()
	w.log.Info("worker stopping: no new messages; finishing batches in work", "in_flight", w.inFlight.Load(),
		"timeout", w.opts.ShutdownTimeout)

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

// serveBatches is one handler: until ctx is done it takes the next batch
// of whichever job's turn it is and handles it; with none to take, it
// helps the other handlers solve theirs, or waits for work. The handler
// of the first-batch lane (first) takes only a job's first batch at this
// worker, and helps no other: it is there to start a job at once.
func (w *Worker) serveBatches(ctx, work context.Context, first bool) {
	if !first && w.opts.Nice > 0 {
		// Never unlocked: the thread ends with the handler, so no other
		// goroutine runs at its priority.
		runtime.LockOSThread()
		if err := nice.Thread(w.opts.Nice); err != nil {
			w.niceOnce.Do(func() {
				w.log.Warn("worker: the handlers solve at the process's priority", "nice", w.opts.Nice, "err", err)
			})
		}
	}
	var sv solver.Solver
	help := w.help
	if first {
		help = nil
	}
	for ctx.Err() == nil {
		m, wake, retry := w.sched.next(ctx, first)
		if m != nil {
			w.handle(ctx, work, &sv, m)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		t := time.NewTimer(retry)
		if !first {
			w.sched.waiting.Add(1)
		}
		select {
		case sh := <-help:
			sh.work(&sv)
			sh.helpers.Done()
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		}
		if !first {
			w.sched.waiting.Add(-1)
		}
		t.Stop()
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
	// span is the batch's span (CONSUMER), a child of its submit's
	// through the message's traceparent; ctx carries it.
	span trace.Span
	ctx  context.Context
}

// handle processes one message: it decodes it, checks it against its
// job's manifest, answers every puzzle (from the cache or by solving) and
// hands the results to a committer goroutine that publishes them and
// acks, so that this solver goroutine goes on with the next message during
// the round trips. It abandons the batch when ctx is done.
func (w *Worker) handle(run, ctx context.Context, sv *solver.Solver, m jetstream.Msg) {
	w.inFlight.Add(1)
	t := &task{w: w, m: m, start: time.Now(), sc: scratches.Get().(*scratch)}
	t.st.Delivered = t.start
	t.delivered = 1
	md, err := m.Metadata()
	if err == nil {
		t.delivered = md.NumDelivered
	}
	t.st.Redelivered = t.delivered > 1
	ctx = t.startSpan(ctx, md)

	b, err := job.DecodeWorkInto(m.Data(), t.sc.items)
	if cap(b.Items) > cap(t.sc.items) {
		t.sc.items = b.Items
	}
	if err != nil {
		t.deadLetter(queue.ReasonUndecodable, err)
		return
	}
	t.batch = &b
	t.st.Puzzles, t.st.Job, t.st.Batch = len(b.Items), b.Job, b.Index
	if t.span.IsRecording() {
		t.span.SetAttributes(telemetry.JobID.String(b.Job), telemetry.BatchIndex.Int64(int64(b.Index)),
			telemetry.BatchPuzzles.Int(len(b.Items)))
	}
	if st, ok := w.sched.endedState(b.Job); ok && st != job.Finished {
		if st == job.Cancelled {
			t.digest = b.ComputeDigest()
			if t.countStored(ctx) {
				return
			}
		}
		t.drop(st)
		return
	}

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
	case reason == queue.ReasonUnknownJob:
		if st, ok := w.sched.endedState(b.Job); ok {
			t.drop(st) // removed while the batch was in work
			return
		}
		fallthrough
	case reason != "":
		t.deadLetter(reason, &RejectError{Reason: reason, Text: reasonText(reason, &b)})
		return
	}
	if t.delivered > 1 && t.countStored(ctx) {
		return // its results were stored before
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
	t.endSpan()
	if o := t.w.opts.Observer; o != nil {
		o.Batch(&t.st)
	}
	t.w.inFlight.Add(-1)
	t.sc.release()
}

// tail recounts the results of a published job that is not finished once
// its last batch is acked (none was left in its lane to deliver when it
// was taken): a count lost in a cluster (see Worker.count) would leave
// it so.
func (t *task) tail(rec *job.Record) {
	if rec.State != job.Published || rec.Complete() {
		return
	}
	md, err := t.m.Metadata()
	if err != nil || md.NumPending > 0 {
		return
	}
	w, id, lane, from := t.w, rec.ID, queue.LaneOf(rec), rec.ResultsFrom
	go func() {
		time.Sleep(100 * time.Millisecond) // the other workers' last acks
		ctx, cancel := context.WithTimeout(context.Background(), 3*apiTimeout)
		defer cancel()
		_, _ = w.sched.recountJob(ctx, w.jobs, id, lane, from)
	}()
}

// drop ends a batch of a job that was cancelled or removed (state st,
// "" for removed) while it waited: its work left the queue, so the message
// is gone or going; it is not a failure, and no dead letter.
func (t *task) drop(st job.State) {
	t.st.Outcome = OutcomeDropped
	_ = t.m.Term()
	t.w.log.Debug("worker: batch of an ended job dropped", "job", t.batch.Job, "batch", t.batch.Index,
		"state", cmp.Or(string(st), "removed"))
	t.done()
}

// countStored counts the batch's results in its job's record, if that
// was lost, and acks it, if the results are stored (t.digest set): the
// ack was lost, or the worker before it, or before the count. A
// cancelled job's batch may come back as stray work of the job (a first
// delivery, to another consumer), so it is asked for those too. It
// reports whether it handled the batch. A count that fails leaves the
// batch for redelivery.
func (t *task) countStored(ctx context.Context) bool {
	w, b := t.w, t.batch
	c, ok := w.stored(ctx, b, t.digest)
	if !ok {
		return false
	}
	finished, rec, err := w.count(ctx, b, c)
	if err != nil {
		t.fail(ctx, err)
		return true
	}
	t.ack()
	w.finished(finished, b.Job)
	t.tail(&rec)
	t.done()
	return true
}

// ack acks the message, whose results are stored.
func (t *task) ack() {
	if err := t.m.Ack(); err != nil {
		if _, ended := t.w.sched.endedState(t.batch.Job); ended {
			// Cancelled or finished meanwhile: its consumer is gone.
			t.st.Outcome = OutcomeAcked
			return
		}
		// The results are stored: a redelivery finds them and acks.
		t.w.log.Warn("worker: ack failed; the batch will be redelivered", "job", t.batch.Job, "batch", t.batch.Index, "err", err)
	}
	t.st.Outcome = OutcomeAcked
	t.st.Latency = time.Since(t.start)
}

// commit publishes the batch's results, adds the puzzles it solved to the
// cache (best effort: a cache that fails only makes later jobs slower),
// counts the results in the job's record, then acks.
//
// While JetStream does not answer (a stream or bucket electing a leader,
// a server restarting), each step is tried again in place for up to
// retryFor, the message kept in progress meanwhile: an outage of seconds
// costs the batch no delivery, so it never reaches the dead letters for
// it.
func (t *task) commit(ctx context.Context, solved []cache.Entry) {
	ctx, span := telemetry.Tracer().Start(ctx, "results write")
	err := retryUnavailable(ctx, retryFor, func() error {
		return t.w.publishResults(ctx, t.batch, t.digest, t.sc)
	})
	if err != nil {
		endSpan(span, err)
		t.fail(ctx, err)
		return
	}
	// Before the record: a job that reads finished has its puzzles in the
	// cache already, for the next one that asks.
	t.w.cache.Put(ctx, solved)
	var finished bool
	var rec job.Record
	err = retryUnavailable(ctx, retryFor, func() (err error) {
		finished, rec, err = t.w.count(ctx, t.batch, job.CountItems(t.batch.Items))
		return err
	})
	endSpan(span, err)
	if err != nil {
		t.fail(ctx, err)
		return
	}
	t.ack()
	t.w.finished(finished, t.batch.Job)
	t.tail(&rec)
	t.w.event(t.batch.Job, t.batch.Index, len(t.batch.Items))
	t.done()
}

// retryFor bounds how long commit tries a step again while JetStream
// does not answer, before the batch is handed back for redelivery.
const retryFor = 30 * time.Second

// retryUnavailable runs op until it succeeds, fails otherwise than by
// JetStream not answering (queue.Unavailable), ctx ends, or d has passed;
// it waits 100 ms after the first failure, doubling up to 2 s. It returns
// op's last error.
func retryUnavailable(ctx context.Context, d time.Duration, op func() error) error {
	deadline := time.Now().Add(d)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := op()
		if err == nil || !queue.Unavailable(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
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
	w.log.WarnContext(t.ctx, "worker: batch failed; it will be redelivered", "subject", t.m.Subject(), "deliveries", t.delivered, "err", err)
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
		w.log.ErrorContext(t.ctx, "worker: cannot store a dead letter; leaving the message for redelivery",
			"reason", reason, "err", err)
		_ = m.NakWithDelay(w.opts.NakDelays[len(w.opts.NakDelays)-1])
		t.st.Outcome = OutcomeNak
		return
	}
	_ = m.Term()
	w.log.WarnContext(t.ctx, "worker: message moved to the dead-letter stream", "reason", reason, "err", cause,
		"subject", m.Subject(), "deliveries", t.delivered, "dlq", w.q.Opts.DLQStream)
}

// answer turns every Solve item of b into a Known item: from the cache
// (unless the batch says not to look) or by solving. It returns the cache
// entries of what it solved, in sc's memory.
func (w *Worker) answer(ctx context.Context, sv *solver.Solver, b *job.Batch, st *BatchStats, sc *scratch) []cache.Entry {
	first := b.Flags&job.FlagFirstSolution != 0
	sc.idx = sc.idx[:0]
	for i := range b.Items {
		it := &b.Items[i]
		if it.Kind == job.Known && it.Outcome.Status != result.StatusInvalid &&
			it.Outcome.Verify(ctx, first, job.Unproven) != nil {
			// An answer the producer sent (from the cache) that does not
			// stand: the worker's proof will cover the batch, so it
			// answers the puzzle itself (the digest covers the puzzle
			// only, either way).
			it.Kind, it.Grid, it.Outcome = job.Solve, it.Outcome.Puzzle, job.Outcome{}
		}
		if it.Kind == job.Solve {
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
		hits = w.lookup(ctx, keys)
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
	_, span := telemetry.Tracer().Start(ctx, "solve")
	if span.IsRecording() {
		span.SetAttributes(telemetry.BatchPuzzles.Int(len(sh.idx)), telemetry.CacheHits.Int(st.CacheHits))
	}
	sh.solve(sv)
	span.End()
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
		o, _ := sh.w.solveOne(sh.ctx, sv, &it.Grid, sh.opts)
		now := time.Now()
		sh.times[k], t = now.Sub(t), now
		it.Kind, it.Outcome = job.Known, o
	}
	return true
}

// solveOne validates and solves g (an invalid puzzle is the solver's
// *ParseError, made an invalid outcome by FromSolve), and returns the
// search's nodes with the outcome; a panic in the solver becomes the
// puzzle's error instead of killing the worker.
func (w *Worker) solveOne(ctx context.Context, sv *solver.Solver, g *solver.Grid, opts solver.Options) (o job.Outcome, nodes int64) {
	defer func() {
		if p := recover(); p != nil {
			*sv = solver.Solver{} // its state may be inconsistent
			o, nodes = job.Outcome{Status: result.StatusGaveUp, Puzzle: *g, Error: fmt.Sprintf("solver: internal error: %v", p)}, 0
		}
	}()
	r, err := w.solve(sv, ctx, g, opts)
	return job.FromSolve(g, r, err), r.Nodes
}
