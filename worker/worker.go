// Package worker is the consuming side of sudoku-queue: it pulls batches of
// puzzles from the JetStream consumers, answers each puzzle from the cache
// or by solving it, stores the results, publishes completion events and
// only then acks the message.
//
// A message's fate follows the asynq model: success -> Ack; a permanent
// failure (a body that does not decode) -> copy to the dead-letter stream
// and Term; a transient failure (Redis down) -> NakWithDelay, growing with
// each delivery, and dead-letter on the last delivery.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Store is the result store a worker writes to: *cache.Redis or
// *cache.Memory.
type Store interface {
	Get(ctx context.Context, keys []string) ([]*result.Result, error)
	CompleteBatch(ctx context.Context, jobID string, index uint64, rs []result.Result) (finished bool, err error)
	Ping(ctx context.Context) error
}

// Observer receives what a worker did, for metrics. Its methods are called
// from many goroutines and must be safe for concurrent use.
type Observer interface {
	// Batch is called once per message handled, with its outcome.
	Batch(s *BatchStats)
}

// BatchStats describes one handled message.
type BatchStats struct {
	Interactive bool
	Outcome     string // "acked", "nak", "dead_letter", "abandoned"
	Redelivered bool   // delivered more than once
	Puzzles     int
	CacheHits   int
	Statuses    map[result.Status]int
	SolveTimes  []time.Duration // one per puzzle solved (not cached)
	Latency     time.Duration   // from delivery to ack (or nak)
	Err         error           // why it was not acked
}

// Options tune a Worker. The zero value works.
type Options struct {
	// Concurrency is the number of batches handled at once (default
	// GOMAXPROCS). One more goroutine serves interactive requests.
	Concurrency int
	// Fetch is how many messages each consumer requests ahead (default
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
	// transient failure; the last repeats (default 1s, 5s, 30s, 60s).
	NakDelays []time.Duration
	// ShutdownTimeout bounds how long Run waits, once its context is done,
	// for the batches in work; those still running then are abandoned
	// unacked and redelivered (default 30s).
	ShutdownTimeout time.Duration
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
	store Store
	opts  Options
	log   *slog.Logger

	commits    chan struct{}  // a token per batch waiting for its round trips
	committing sync.WaitGroup // batches being committed

	storeDown atomic.Bool // the store failed last time; log once per outage
	pingMu    sync.Mutex  // one goroutine at a time probes a store that is down
	inFlight  atomic.Int64

	// solve solves one grid; tests replace it.
	solve func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error)
}

// New returns a worker for q that stores results in store and publishes
// completion events on nc.
func New(nc *nats.Conn, q *queue.Queue, store Store, opts Options) *Worker {
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
		opts.NakDelays = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, time.Minute}
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Worker{nc: nc, q: q, store: store, opts: opts, log: opts.Logger, solve: (*solver.Solver).Solve,
		commits: make(chan struct{}, 2*opts.Concurrency)}
}

// InFlight returns the number of messages being handled now.
func (w *Worker) InFlight() int64 { return w.inFlight.Load() }

// Run pulls and handles messages until ctx is done, then shuts down: it
// stops pulling, hands back (Nak) messages fetched but not started, waits
// up to ShutdownTimeout for the batches in work and returns. It returns
// nil after a clean shutdown, or the error that stopped it.
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

	// Short-lived pull requests with frequent heartbeats: when a cluster
	// node dies with the consumer's leader, the pull requests it held die
	// too, and the client notices (and asks again) within seconds rather
	// than after the default 30 s expiry.
	pullOpts := []jetstream.PullMessagesOpt{jetstream.PullExpiry(5 * time.Second), jetstream.PullHeartbeat(time.Second)}
	bulk := puller{c: w.q.Bulk, subject: w.q.Opts.BulkSubject(),
		opts: append(pullOpts, jetstream.PullMaxMessages(w.opts.Fetch))}
	inter := puller{c: w.q.Interactive, subject: w.q.Opts.InteractiveSubject(),
		opts: append(pullOpts[:2:2], jetstream.PullMaxMessages(max(2, w.opts.Concurrency)))}
	for _, p := range []*puller{&bulk, &inter} {
		if p.it, err = p.c.Messages(p.opts...); err != nil {
			return fmt.Errorf("worker: pull from %s: %w", p.subject, err)
		}
	}

	bulkCh := make(chan jetstream.Msg)
	interCh := make(chan jetstream.Msg)
	var pullers, handlers sync.WaitGroup
	pullers.Add(2)
	go w.pull(ctx, &bulk, bulkCh, &pullers)
	go w.pull(ctx, &inter, interCh, &pullers)

	for i := 0; i < w.opts.Concurrency; i++ {
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			var sv solver.Solver
			interCh := interCh // set to nil here when closed
			for {
				// Interactive requests first, whenever one is waiting.
				select {
				case m, ok := <-interCh:
					if !ok {
						interCh = nil
						continue
					}
					w.handle(ctx, work, &sv, m, true)
					continue
				default:
				}
				select {
				case m, ok := <-interCh:
					if !ok {
						interCh = nil
						continue
					}
					w.handle(ctx, work, &sv, m, true)
				case m, ok := <-bulkCh:
					if !ok {
						return
					}
					w.handle(ctx, work, &sv, m, false)
				}
			}
		}()
	}
	// One more handler for interactive requests only, so a single puzzle
	// never waits behind the bulk batches in work.
	handlers.Add(1)
	go func() {
		defer handlers.Done()
		var sv solver.Solver
		for m := range interCh {
			w.handle(ctx, work, &sv, m, true)
		}
	}()

	w.log.Info("worker started", "concurrency", w.opts.Concurrency, "fetch", w.opts.Fetch,
		"stream", w.q.Opts.Stream, "bulk", w.q.Opts.BulkSubject(), "interactive", w.q.Opts.InteractiveSubject())

	<-ctx.Done()
	w.log.Info("worker stopping: no new messages; finishing batches in work", "in_flight", w.inFlight.Load(),
		"timeout", w.opts.ShutdownTimeout)
	pullers.Wait()

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

// puller is one consumer's message iterator, which pull opens again when
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

// event is the completion event published after each batch.
type event struct {
	Job      string          `json:"job"`
	Batch    uint64          `json:"batch"`
	N        int             `json:"n"`
	Finished bool            `json:"finished,omitempty"`
	Results  []result.Result `json:"results,omitempty"` // interactive requests only
}

// handle processes one message: it decodes it, answers every puzzle (from
// the cache or by solving) and hands the results to a committer goroutine
// that stores them, publishes the completion event and acks, so that this
// solver goroutine goes on with the next message during the round trips.
// It stops waiting for a store that is down when run is done, and
// abandons the batch when ctx is.
func (w *Worker) handle(run, ctx context.Context, sv *solver.Solver, m jetstream.Msg, interactive bool) {
	w.inFlight.Add(1)
	t := &task{w: w, m: m, start: time.Now(), st: BatchStats{Interactive: interactive}}
	t.delivered = 1
	if md, err := m.Metadata(); err == nil {
		t.delivered = md.NumDelivered
	}
	t.st.Redelivered = t.delivered > 1

	b, err := queue.Decode(m.Data())
	if err != nil {
		t.st.Outcome, t.st.Err = "dead_letter", err
		w.deadLetter(m, "undecodable", err, t.delivered)
		t.done()
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

	// While the store is down, hold the message (the heartbeat keeps it
	// ours) rather than cycle it through deliveries that all fail.
	if !w.waitStore(run) {
		t.st.Outcome, t.st.Err = "abandoned", run.Err()
		_ = m.Nak()
		t.done()
		return
	}
	results, err := w.answer(ctx, sv, &b, &t.st)
	if err != nil {
		t.fail(ctx, err)
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
		t.commit(ctx, results)
	}()
}

// task is one message in work, from its delivery to its ack (or nak).
type task struct {
	w         *Worker
	m         jetstream.Msg
	batch     *queue.Batch
	delivered uint64
	start     time.Time
	st        BatchStats
	stopBeat  chan struct{}
}

// done ends the task: the heartbeat stops and the observer hears of it.
func (t *task) done() {
	if t.stopBeat != nil {
		close(t.stopBeat)
	}
	t.st.Latency = time.Since(t.start)
	if o := t.w.opts.Observer; o != nil {
		o.Batch(&t.st)
	}
	t.w.inFlight.Add(-1)
}

// commit stores the results, publishes the completion event, then acks.
func (t *task) commit(ctx context.Context, results []result.Result) {
	w, b := t.w, t.batch
	finished, err := w.store.CompleteBatch(ctx, b.JobID, b.Index, results)
	if err != nil {
		t.fail(ctx, err)
		return
	}
	w.storeOK()
	ev := event{Job: b.JobID, Batch: b.Index, N: len(results), Finished: finished}
	if t.st.Interactive {
		ev.Results = results
	}
	if data, err := json.Marshal(ev); err == nil {
		_ = w.nc.Publish(w.q.Opts.EventSubject(b.JobID), data)
	}
	if err := t.m.Ack(); err != nil {
		// The results are stored; a redelivery will find them cached.
		w.log.Warn("worker: ack failed; the batch will be redelivered", "job", b.JobID, "batch", b.Index, "err", err)
	}
	t.st.Outcome = "acked"
	t.done()
}

// fail hands the message back after a failure: abandoned (Nak) when ctx
// is done, dead-lettered on its last delivery, else nak'ed with a delay
// that grows with its deliveries.
func (t *task) fail(ctx context.Context, err error) {
	w := t.w
	t.st.Err = err
	defer t.done()
	if ctx.Err() != nil {
		t.st.Outcome = "abandoned"
		_ = t.m.Nak()
		return
	}
	w.storeFailed(err)
	if t.delivered >= uint64(w.q.Opts.MaxDeliver) {
		t.st.Outcome = "dead_letter"
		w.deadLetter(t.m, "max_deliver", err, t.delivered)
		return
	}
	t.st.Outcome = "nak"
	delay := w.opts.NakDelays[min(int(t.delivered)-1, len(w.opts.NakDelays)-1)]
	_ = t.m.NakWithDelay(delay)
}

// answer returns the result of every puzzle of b: from the cache (unless
// the producer looked already) or by solving.
func (w *Worker) answer(ctx context.Context, sv *solver.Solver, b *queue.Batch, st *BatchStats) ([]result.Result, error) {
	results := make([]result.Result, len(b.Items))
	grids := make([]solver.Grid, len(b.Items))
	keys := make([]string, len(b.Items))
	valid := make([]bool, len(b.Items))
	packed := b.Flags&queue.FlagPacked != 0
	for i, it := range b.Items {
		var g solver.Grid
		var err error
		if packed {
			if g, err = queue.UnpackGrid(it.Puzzle); err == nil {
				err = g.Validate()
			}
		} else {
			g, err = solver.Parse(it.Puzzle)
		}
		if err != nil {
			text := it.Puzzle
			if packed {
				text = fmt.Sprintf("packed:%x", it.Puzzle)
			}
			results[i] = result.Invalid(0, text, err)
			results[i].Key = cache.InputKey(text)
			keys[i] = results[i].Key
			continue
		}
		grids[i], keys[i], valid[i] = g, g.Key(), true
	}
	var cached []*result.Result
	if b.Flags&queue.FlagCacheChecked == 0 {
		var err error
		if cached, err = w.store.Get(ctx, keys); err != nil {
			return nil, err
		}
	}
	opts := solver.Options{MaxNodes: w.opts.MaxNodes, FirstSolution: b.Flags&queue.FlagFirstSolution != 0}
	st.Statuses = make(map[result.Status]int, 2)
	for i := range results {
		switch {
		case cached != nil && cached[i] != nil && cached[i].Status != result.StatusGaveUp:
			// (A cached gave_up is only a search that ran out of its
			// budget: it is solved again below.)
			results[i] = *cached[i]
			st.CacheHits++
		case valid[i]:
			t0 := time.Now()
			results[i] = w.solveOne(ctx, sv, &grids[i], keys[i], opts)
			st.SolveTimes = append(st.SolveTimes, time.Since(t0))
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		st.Statuses[results[i].Status]++
	}
	return results, nil
}

// solveOne solves g; a panic in the solver becomes the puzzle's error
// instead of killing the worker.
func (w *Worker) solveOne(ctx context.Context, sv *solver.Solver, g *solver.Grid, key string, opts solver.Options) (res result.Result) {
	defer func() {
		if p := recover(); p != nil {
			*sv = solver.Solver{} // its state may be inconsistent
			res = result.Result{Puzzle: g.String(), Key: key, Status: result.StatusGaveUp,
				Error: fmt.Sprintf("solver: internal error: %v", p)}
		}
	}()
	r, err := w.solve(sv, ctx, g, opts)
	return result.FromSolveKey(g, key, r, err)
}

// deadLetter copies m to the dead-letter stream with why it failed, then
// terminates it so it is never delivered again. If the copy cannot be
// stored, m is left to be redelivered rather than lost.
func (w *Worker) deadLetter(m jetstream.Msg, reason string, cause error, delivered uint64) {
	dl := nats.NewMsg(w.q.Opts.DLQSubject(reason))
	dl.Data = m.Data()
	dl.Header.Set("Sudoku-Dlq-Reason", reason)
	dl.Header.Set("Sudoku-Dlq-Error", cause.Error())
	dl.Header.Set("Sudoku-Dlq-Subject", m.Subject())
	dl.Header.Set("Sudoku-Dlq-Deliveries", strconv.FormatUint(delivered, 10))
	dl.Header.Set("Sudoku-Dlq-Time", time.Now().UTC().Format(time.RFC3339Nano))
	if id := m.Headers().Get(nats.MsgIdHdr); id != "" {
		dl.Header.Set("Sudoku-Dlq-Msg-Id", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.q.JS.PublishMsg(ctx, dl); err != nil {
		w.log.Error("worker: cannot store a dead letter; leaving the message for redelivery",
			"reason", reason, "err", err)
		_ = m.NakWithDelay(w.opts.NakDelays[len(w.opts.NakDelays)-1])
		return
	}
	_ = m.Term()
	w.log.Warn("worker: message moved to the dead-letter stream", "reason", reason, "err", cause,
		"subject", m.Subject(), "deliveries", delivered, "dlq", w.q.Opts.DLQStream)
}

// waitStore returns at once while the store is up. After a failure it
// probes the store (one goroutine at a time, backing off up to 2s) until it
// answers, and returns true then, or false when ctx is done first.
func (w *Worker) waitStore(ctx context.Context) bool {
	backoff := 100 * time.Millisecond
	for w.storeDown.Load() {
		w.pingMu.Lock()
		if w.storeDown.Load() {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := w.store.Ping(pctx)
			cancel()
			if err == nil {
				w.storeOK()
			} else {
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				}
				backoff = min(2*backoff, 2*time.Second)
			}
		}
		w.pingMu.Unlock()
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// storeFailed logs the first failure of an outage; storeOK logs the
// recovery. Failures in between are not logged one by one.
func (w *Worker) storeFailed(err error) {
	if !w.storeDown.Swap(true) {
		w.log.Error("worker: result store unavailable; naking batches until it is back", "err", err)
	}
}

func (w *Worker) storeOK() {
	if w.storeDown.Swap(false) {
		w.log.Info("worker: result store is back")
	}
}
