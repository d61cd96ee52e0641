package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
)

// ErrJobFailed is matched by the error of Follow for a job whose
// submission failed: it will never finish.
var ErrJobFailed = errors.New("job failed")

// ErrResultsGone is matched by the error of Follow for a finished job
// whose results are no longer kept (expired or removed).
var ErrResultsGone = errors.New("results no longer kept")

// Progress is where a followed job stands.
type Progress struct {
	// Record is the job's record as last read.
	Record job.Record
	// Lines is the number of results passed on so far, in input order.
	Lines int64
	// Batches is the number of batches whose results were passed on.
	Batches int64
	// Waiting, when not empty, says what the reader is waiting for
	// besides the workers ("NATS unreachable since 12:03:04").
	Waiting string
	// NoWorkers says that results are due and no worker of the queue
	// answered the micro service's discovery (queue.Workers): the job
	// waits until one starts.
	NoWorkers bool
}

// FollowOptions tune Follow. The zero value works.
type FollowOptions struct {
	// Full fills each result's Puzzle and Key (a SHA-256 per puzzle):
	// leave it off when the output shows only solutions and errors.
	Full bool
	// Progress, if set, is called after each batch passed on, and when
	// the job's record or the waiting state changes.
	Progress func(Progress)
	// Window bounds the items of the batches kept in memory while an
	// earlier one is still missing (default 16384, at least 8 batches);
	// later ones are read again when their turn comes.
	Window int
	// Poll is how often the record is read again while no result comes
	// (default 1s).
	Poll time.Duration
	// Logger receives warnings about results refused (default
	// slog.Default()).
	Logger *slog.Logger
	// Trust is the worker keys whose proofs vouch for results (config
	// proof.trusted): the unique and gave_up answers of a batch with a
	// proof by one of them are taken at their word; those of any other
	// (nil trusts none) are confirmed by solving each again.
	Trust *proof.Trust
}

// Follow passes every result of job id to out, in input order, as the
// results arrive in JetStream, and returns the job's record once all are
// passed on (marked finished, with its counts by status). It works the
// same for the producer that submitted the job, for a later 'job wait',
// and for a job finished long ago: it reads from the results stream's
// start.
//
// Each results batch is checked against the job's manifest: one that does
// not match (not published by a worker for this job's batch) is refused
// and logged, and the right one awaited. Memory stays bounded whatever the
// job's size.
//
// Errors: job.ErrNotFound for an unknown job; ErrJobFailed for a job whose
// submission failed; ErrResultsGone for a finished job whose results
// expired; out's error; ctx's error.
func Follow(ctx context.Context, q *queue.Queue, id string, out func(result.Result) error, opts FollowOptions) (rec job.Record, err error) {
	ctx, span := followSpan(ctx, q, id)
	defer func() { endFollowSpan(span, &rec, err) }()
	if opts.Window <= 0 {
		opts.Window = 16384
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &follower{q: q, jobs: q.Store(), id: id, out: out, opts: opts}
	if err := f.readRecord(ctx); err != nil {
		return f.rec, err
	}
	f.init()
	if err := f.run(ctx); err != nil {
		return f.rec, err
	}
	return f.finish(ctx)
}

// follower is one Follow in progress.
type follower struct {
	q    *queue.Queue
	jobs *job.Store
	id   string
	out  func(result.Result) error
	opts FollowOptions

	rec       job.Record
	rev       uint64
	order     *reorder       // the batches checked, passed on in input order
	verify    verifier       // checks each results batch
	recent    recentBatches  // the results messages of the last RepeatWindow items
	manifest  job.Manifest   // the manifest chunk last read
	counts    result.Summary // of the results passed on
	free      [][]job.Item   // the items of batches passed on (spare)
	waiting   string
	downSince time.Time
	noWorkers bool      // no worker answered the last time asked
	askedAt   time.Time // when the workers were last asked for
}

// init sets up the reordering and the checks of the job's results, once
// its record is read.
func (f *follower) init() {
	f.order = newReorder(uint64(max(8, f.opts.Window/max(1, f.rec.Options.BatchSize))))
	f.verify = verifier{job: f.id, trust: f.opts.Trust, first: f.rec.Options.FirstSolution, digest: f.digest,
		batches: func() (uint64, bool) { return uint64(f.rec.Batches), f.rec.State != job.Publishing }}
}

// readRecord reads the job's record, waiting while JetStream does not
// answer.
func (f *follower) readRecord(ctx context.Context) error {
	for {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		rec, rev, err := f.jobs.Get(actx, f.id)
		cancel()
		switch {
		case err == nil:
			f.rec, f.rev = rec, rev
			if len(rec.Manifest) > 0 && len(f.manifest.Digests) == 0 {
				// A small job's manifest, in its record.
				if m, err := job.DecodeManifest(0, rec.Manifest); err == nil {
					f.manifest = m
				}
			}
			f.setWaiting("")
			if rec.Stale(time.Now()) {
				// Its producer is gone: the job will never finish. The
				// workers mark it failed; a reader only reads.
				f.rec.FailStale(time.Now())
			}
			if f.rec.State == job.Failed {
				return fmt.Errorf("job %s: %w: %s", f.id, ErrJobFailed, f.rec.Error)
			}
			return nil
		case errors.Is(err, job.ErrNotFound):
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("waiting for job %s: %w", f.id, ctx.Err())
		}
		f.unreachable(ctx, err)
		select {
		case <-time.After(f.opts.Poll):
		case <-ctx.Done():
		}
	}
}

// unreachable notes that JetStream did not answer a request made under
// ctx. Only a connection that is down is NATS unreachable: a request that
// timed out on a connection that is up is JetStream not answering (a
// cluster electing a leader), and one cut short by ctx (the wait's own
// deadline, an interrupt) is no outage at all.
func (f *follower) unreachable(ctx context.Context, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return // we stopped asking
	}
	if f.downSince.IsZero() {
		f.downSince = time.Now()
	}
	what := "JetStream not answering"
	if !f.q.JS.Conn().IsConnected() || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionReconnecting) {
		what = "NATS unreachable"
	}
	f.setWaiting(what + " since " + f.downSince.Format("15:04:05"))
}

func (f *follower) setWaiting(w string) {
	if w == "" {
		f.downSince = time.Time{}
	}
	if w != f.waiting {
		f.waiting = w
		f.progress()
	}
}

func (f *follower) progress() {
	if f.opts.Progress != nil {
		f.opts.Progress(Progress{Record: f.rec, Lines: int64(f.counts.Total()), Batches: int64(f.order.next), Waiting: f.waiting,
			NoWorkers: f.noWorkers})
	}
}

// askWorkersEvery is how many polls without a result pass between two
// questions whether any worker is listening.
const askWorkersEvery = 3

// askWorkers asks, at most every askWorkersEvery polls, whether any
// worker of the queue is listening, and says so in the progress when
// none is. A reader calls it while no result comes: then some are due.
func (f *follower) askWorkers(ctx context.Context) {
	if time.Since(f.askedAt) < askWorkersEvery*f.opts.Poll || !f.q.JS.Conn().IsConnected() {
		return
	}
	n, err := queue.Workers(ctx, f.q.JS.Conn(), f.q.Opts, workersWait, 1)
	f.askedAt = time.Now()
	if err != nil || ctx.Err() != nil {
		return
	}
	f.setNoWorkers(n == 0)
}

// workersWait is how long askWorkers waits for the first worker's answer.
const workersWait = 250 * time.Millisecond

func (f *follower) setNoWorkers(none bool) {
	if none != f.noWorkers {
		f.noWorkers = none
		f.progress()
	}
}

// complete reports whether every batch has been passed on.
func (f *follower) complete() bool {
	return f.rec.State != job.Publishing && f.rec.State != job.Cancelled && f.order.next >= uint64(f.rec.Batches)
}

// startSlack is how long before its job's creation (by the producer's
// clock) a reader starts reading the results stream, when the record has
// no ResultsFrom.
const startSlack = 5 * time.Minute

// resultsReader returns the configuration of an ordered consumer of the
// results of rec's job. It starts at rec.ResultsFrom, else at the job's
// creation less startSlack (for clocks that differ): the server finds
// either place at once, where from the stream's start it would look
// through every older job's results for this one's, and from a time
// through every result of the minutes before (tens of ms of its CPU per
// reader on a busy stream). A result missed all the same is read by its
// subject when its turn comes.
func resultsReader(q *queue.Queue, rec *job.Record) jetstream.OrderedConsumerConfig {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{q.Opts.ResultsFilter(rec.ID)}}
	switch {
	case rec.ResultsFrom > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, rec.ResultsFrom
	case !rec.Created.IsZero():
		start := rec.Created.Add(-startSlack)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	return cfg
}

// caughtUpPoll is how often a reader that has passed on every batch
// published so far reads the job's record while its producer publishes.
const caughtUpPoll = 20 * time.Millisecond

// run reads the results stream until every batch is passed on: results
// as they come from an ordered consumer (the reader), the next batch by
// its subject when the reader left it out or brings nothing, and the
// record now and then for the job's state.
func (f *follower) run(ctx context.Context) error {
	if f.complete() {
		return nil
	}
	it, err := f.reopen(ctx)
	if err != nil {
		return err
	}
	r := &reading{it: it, lastRead: time.Now(), lastMsg: time.Now()}
	defer func() {
		if r.it != nil {
			r.it.Stop()
		}
	}()
	for !f.complete() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for job %s: %w", f.id, err)
		}
		if f.rec.State == job.Cancelled {
			return f.cancelled(ctx)
		}
		taken, err := f.readNext(ctx, r)
		if err != nil {
			return err
		}
		if taken {
			continue
		}
		if err := f.fetchNext(ctx, r); err != nil {
			return err
		}
		if err := f.keepUp(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// reading is the state of run's loop.
type reading struct {
	it                *pump
	lastRead, lastMsg time.Time // when the record was last read; the last message came
	idle              int       // reads in a row that brought nothing
	missing           int       // reads by subject in a row that found no next batch
	missingSince      time.Time
	hurry             bool // the last read by subject brought the next batch
}

// readNext waits for the reader's next message and takes it. taken says
// the loop may go round at once: a message was taken, or the record read
// while caught up. Otherwise r.idle counts a wait that brought nothing,
// or the reader was opened again after it failed.
func (f *follower) readNext(ctx context.Context, r *reading) (taken bool, err error) {
	// Every batch published so far passed on: the job ends when its
	// record says publishing is over, so read it often meanwhile.
	caughtUp := f.rec.State == job.Publishing && f.order.next >= uint64(f.rec.Batches)
	wait := f.opts.Poll
	if caughtUp {
		wait = min(wait, caughtUpPoll)
	}
	if r.hurry {
		wait = 0 // catching up by subject: the next one at once
	}
	r.hurry = false
	m, err := r.it.next(ctx, wait)
	timeout := errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
	switch {
	case err == nil:
		r.idle, r.lastMsg = 0, time.Now()
		f.setWaiting("")
		f.setNoWorkers(false)
		if err := f.take(ctx, m.Subject(), m.Headers().Get(proof.Header), m.Data()); err != nil {
			return false, err
		}
		if f.rec.State == job.Publishing && f.order.next >= uint64(f.rec.Batches) {
			r.lastRead = time.Now()
			return true, f.readRecord(ctx)
		}
		return true, nil
	case caughtUp && timeout:
		r.lastRead = time.Now()
		return true, f.readRecord(ctx)
	case timeout:
		r.idle++
		if !f.q.JS.Conn().IsConnected() {
			f.unreachable(ctx, nats.ErrDisconnected)
		}
		f.askWorkers(ctx)
		return false, nil
	}
	// The reader failed (its consumer lost for good, the connection
	// closed): open another.
	r.idle++
	f.unreachable(ctx, err)
	r.it.Stop()
	if r.it, err = f.reopen(ctx); err != nil {
		return false, fmt.Errorf("job %s: the results reader stopped: %w", f.id, err)
	}
	r.lastMsg = time.Now()
	return false, nil
}

// fetchNext reads the next batch by its subject: one the reader's window
// left out, or, while nothing comes, one the consumer may have lost (a
// cluster that lost its stream leader can leave an ordered consumer
// waiting for ever).
func (f *follower) fetchNext(ctx context.Context, r *reading) error {
	next := f.order.next
	if next >= uint64(f.rec.Batches) || (!f.order.leftOut(next) && r.idle == 0) {
		return nil
	}
	found, err := f.fetch(ctx, next)
	if err != nil {
		return err
	}
	// While the consumer brings nothing, go on by subject as long as
	// that brings batches: a reader whose consumer is being recreated (a
	// cluster node lost) catches up meanwhile.
	r.hurry = r.idle > 0 && f.order.next > next
	if found {
		r.missing = 0
		return nil
	}
	if r.missing == 0 {
		r.missingSince = time.Now()
	}
	r.missing++
	return nil
}

// keepUp opens the reader again when it has brought nothing for long,
// and reads the record when nothing came or a while has passed: the job
// may have moved on (published, failed, removed), or, finished once,
// lost a batch's results for good.
func (f *follower) keepUp(ctx context.Context, r *reading) error {
	if r.idle > 0 && time.Since(r.lastMsg) > 10*f.opts.Poll {
		r.it.Stop()
		var err error
		if r.it, err = f.reopen(ctx); err != nil {
			return err
		}
		r.lastMsg = time.Now()
	}
	if r.idle == 0 && time.Since(r.lastRead) <= 5*f.opts.Poll {
		return nil
	}
	r.lastRead = time.Now()
	if err := f.readRecord(ctx); err != nil {
		return err
	}
	if f.rec.State == job.Finished && r.missing > 2 && time.Since(r.missingSince) > resultsGoneAfter*f.opts.Poll && !f.complete() {
		// Finished once, yet a batch is missing now, and stays so longer
		// than a replica takes to catch up.
		return fmt.Errorf("job %s: %w: batch %d of %d is not in %s", f.id, ErrResultsGone, f.order.next,
			f.rec.Batches, f.q.Opts.ResultsStream())
	}
	return nil
}

// openReader opens an ordered consumer of the job's results
// (resultsReader) and its message pump.
func (f *follower) openReader(ctx context.Context) (*pump, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	cfg := resultsReader(f.q, &f.rec)
	// Left alone, the client recreates a lost consumer for ever inside
	// Next (a cluster node down that held it: minutes), deaf to
	// NextMaxWait: after two attempts it returns, and run opens a new one
	// and reads by subject meanwhile.
	cfg.MaxResetAttempts = 2
	// The client does not delete its consumer when it stops (pump.Stop
	// does); one left by a reader that died goes after a minute, not the
	// client's default 5: every consumer of the results stream costs the
	// server something for each results message.
	cfg.InactiveThreshold = readerInactive
	c, err := f.q.Results.OrderedConsumer(actx, cfg)
	if err != nil {
		return nil, fmt.Errorf("job %s: read results: %w", f.id, err)
	}
	// A window of readerWindow messages, asked for at most readerBytes at
	// a time, so that memory grows with neither the batch size nor the
	// job: a window in bytes alone (PullMaxBytes) makes the client buffer
	// a million messages' room, 8 MB for every reader, which the GC scans.
	it, err := c.Messages(jetstream.PullMaxMessagesWithBytesLimit(readerWindow, readerBytes(f.q.JS.Conn())))
	if err != nil {
		return nil, fmt.Errorf("job %s: read results: %w", f.id, err)
	}
	return newPump(f.q, c, it), nil
}

// reopen opens the reader (openReader), waiting while JetStream does not
// answer (a cluster electing a leader, NATS reconnecting).
func (f *follower) reopen(ctx context.Context) (*pump, error) {
	for {
		it, err := f.openReader(ctx)
		switch {
		case err == nil:
			return it, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("waiting for job %s: %w", f.id, ctx.Err())
		case errors.Is(err, jetstream.ErrStreamNotFound) || f.q.JS.Conn().IsClosed():
			return nil, err
		}
		f.unreachable(ctx, err)
		select {
		case <-time.After(f.opts.Poll):
		case <-ctx.Done():
		}
	}
}

// take handles one results message.
func (f *follower) take(ctx context.Context, subject, sig string, data []byte) error {
	index, ok := subjectIndex(subject)
	if !ok || !f.order.wants(index) {
		return nil // not a batch subject, one passed on or held already, or one beyond the window
	}
	b, err := f.check(ctx, index, sig, data)
	if err != nil {
		return err
	}
	if b == nil {
		return nil
	}
	f.order.put(index, &pendingBatch{b, data})
	return f.drain()
}

// fetch reads batch index's results again, by subject. found is false
// only when the results stream has no message for that batch.
func (f *follower) fetch(ctx context.Context, index uint64) (found bool, err error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	rm, err := f.q.ResultStore().Last(actx, f.q.Opts.ResultSubject(f.id, index))
	cancel()
	if err != nil {
		if errors.Is(err, queue.ErrNoResults) {
			f.order.forget(index) // replaced meanwhile: the consumer brings it again
			return false, nil
		}
		f.unreachable(ctx, err)
		return true, nil // not known to be missing
	}
	f.setWaiting("")
	f.order.forget(index)
	b, err := f.check(ctx, index, rm.Header.Get(proof.Header), rm.Data)
	if err != nil || b == nil {
		return true, err
	}
	f.order.put(index, &pendingBatch{b, rm.Data})
	return true, f.drain()
}

// check decodes a results batch and checks it against the job
// (verifier.check: its job and index, its digest against the manifest,
// and every solution). It returns nil for a batch it refuses (logged).
func (f *follower) check(ctx context.Context, index uint64, sig string, data []byte) (*job.Batch, error) {
	b, err := f.verify.check(ctx, index, sig, data, f.spare())
	var r *refusal
	if errors.As(err, &r) {
		f.opts.Logger.Warn("producer: results refused", "job", f.id, "batch", index, "check", r.Check, "why", r.Why)
		return nil, nil
	}
	return b, err
}

// digest returns the manifest's digest of batch index, or false when no
// manifest lists it (the producer stores each manifest before it
// publishes the batches it lists, so a batch without one is not the
// job's; a chunk's manifest grows as its batches are published).
func (f *follower) digest(ctx context.Context, index uint64) (job.Digest, bool, error) {
	if d, ok := f.manifest.Lookup(index); ok {
		return d, true, nil
	}
	notFound := 0
	for {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		m, err := f.jobs.ManifestOf(actx, f.id, index)
		cancel()
		if err == nil {
			f.manifest = m
			d, _ := m.Lookup(index)
			return d, true, nil
		}
		if errors.Is(err, job.ErrNotFound) {
			// As the leader has it (job.Store.ManifestOf); asked again a
			// few times in case of a leader just elected.
			if notFound++; notFound > 3 {
				return job.Digest{}, false, nil
			}
			time.Sleep(time.Duration(notFound) * 100 * time.Millisecond)
			continue
		}
		if ctx.Err() != nil {
			return job.Digest{}, false, fmt.Errorf("waiting for job %s: %w", f.id, ctx.Err())
		}
		f.unreachable(ctx, err)
		time.Sleep(f.opts.Poll)
	}
}

// drain passes on the batches the reorder buffer releases, in order.
func (f *follower) drain() error {
	for {
		b, err := f.order.pop()
		if err != nil {
			return fmt.Errorf("job %s: %w", f.id, err)
		}
		if b == nil {
			return nil
		}
		f.recent.push(b)
		for i := range b.Items {
			it := &b.Items[i]
			o := &it.Outcome
			if it.Kind == job.Repeat {
				var ok bool
				if *o, ok = f.recent.outcome(b.First + uint64(i) - it.Back); !ok {
					if f.rec.State == job.Cancelled {
						continue // its line's batch was never done
					}
					return fmt.Errorf("job %s: line %d repeats an item the reader does not have", f.id, it.Line)
				}
			}
			var r result.Result
			if f.opts.Full {
				key := ""
				if o.Status != result.StatusInvalid {
					key = job.KeyOf(&o.Puzzle).String()
				}
				r = o.Result(it.Line, key)
			} else {
				r = o.Brief(it.Line)
			}
			if it.Kind == job.Repeat {
				r.Cached = false
			}
			f.counts.Add(r)
			if err := f.out(r); err != nil {
				return err
			}
		}
		if len(f.free) < maxFree {
			f.free = append(f.free, b.Items)
		}
		f.progress()
	}
}

// finish returns the job's record once every result is passed on. The
// job is marked finished by whoever stores and counts its last results
// (job.Record.AddResults), just after storing them: finish waits a little
// for that, and returns the record as it is if it does not come (a worker
// lost between the two: the batch's redelivery counts them).
func (f *follower) finish(ctx context.Context) (job.Record, error) {
	deadline := time.Now().Add(finishWait)
	for wait := time.Millisecond; f.rec.State == job.Published && time.Now().Before(deadline); wait = min(2*wait, 100*time.Millisecond) {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return f.rec, nil
		}
		if err := f.readRecord(ctx); err != nil {
			return f.rec, err
		}
	}
	return f.rec, nil
}

// resultsGoneAfter is how long, in Polls (30 s by default), a finished
// job's next batch must stay missing before a reader says its results are
// no longer kept: a read may be answered by a replica of the results
// stream that is catching up after a cluster lost a node (direct gets),
// and miss what is there.
const resultsGoneAfter = 30

// finishWait bounds how long finish waits for the record to say finished.
const finishWait = 15 * time.Second

// cancelled passes on the results of a cancelled job that were stored,
// in order, and returns an error matching job.ErrCancelled.
func (f *follower) cancelled(ctx context.Context) error {
	// After a drain, on from the first batch not released: those it
	// released are not read again (nor passed on twice).
	for index := f.order.next; index < uint64(f.rec.Batches); index = max(index+1, f.order.next) {
		if !f.order.held(index) {
			if !f.rec.HasDone(index) {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, apiTimeout)
			rm, err := f.q.ResultStore().Last(actx, f.q.Opts.ResultSubject(f.id, index))
			cancel()
			if err != nil {
				return fmt.Errorf("job %s: read the results of batch %d: %w", f.id, index, err)
			}
			b, err := f.check(ctx, index, rm.Header.Get(proof.Header), rm.Data)
			if err != nil {
				return err
			}
			if b == nil {
				continue
			}
			f.order.put(index, &pendingBatch{b, rm.Data})
		}
		f.order.skipTo(index)
		if err := f.drain(); err != nil {
			return err
		}
	}
	return fmt.Errorf("job %s: %w after %d of %d lines", f.id, job.ErrCancelled, f.rec.LinesDone(), f.rec.Lines)
}

// maxFree bounds the items of passed-on batches a reader keeps for the
// next ones.
const maxFree = 4

// spare returns the items of a batch passed on, for the next to decode
// into, or nil.
func (f *follower) spare() []job.Item {
	if len(f.free) == 0 {
		return nil
	}
	items := f.free[len(f.free)-1]
	f.free = f.free[:len(f.free)-1]
	return items
}

// subjectIndex returns the batch index that ends a results subject.
func subjectIndex(subject string) (uint64, bool) {
	i := strings.LastIndexByte(subject, '.')
	n, err := strconv.ParseUint(subject[i+1:], 10, 64)
	return n, err == nil
}

// readerInactive is how long the results stream keeps the consumer of a
// reader that stopped without deleting it.
const readerInactive = time.Minute

// readerWindow is how many results messages (batches) a reader has asked
// for ahead of what it has read.
const readerWindow = 64

// readerBytes is the most a reader asks for in one pull: 4 MiB, or more
// when the server takes larger messages, since a pull smaller than a
// message would never deliver it. A reader so buffers at most about two
// pulls.
func readerBytes(nc *nats.Conn) int {
	return max(4<<20, int(nc.MaxPayload())+64<<10)
}

// pump reads a results iterator on a goroutine of its own, so that a
// reader never waits in Next while the client recreates a lost ordered
// consumer (up to 10 s an attempt, deaf to NextMaxWait, when a cluster node
// that held it is gone): the reader goes on by subject meanwhile.
type pump struct {
	q    *queue.Queue
	c    jetstream.Consumer // the ordered consumer it reads
	it   jetstream.MessagesContext
	ch   chan pumped
	done chan struct{}
}

// pumped is what one Next returned.
type pumped struct {
	m   jetstream.Msg
	err error
}

func newPump(q *queue.Queue, c jetstream.Consumer, it jetstream.MessagesContext) *pump {
	p := &pump{q: q, c: c, it: it, ch: make(chan pumped), done: make(chan struct{})}
	go func() {
		for {
			m, err := it.Next()
			select {
			case p.ch <- pumped{m, err}:
			case <-p.done:
				return
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
		}
	}()
	return p
}

// next returns the next message, or nats.ErrTimeout when none came within
// wait (none ready, for a wait of 0), or ctx's error.
func (p *pump) next(ctx context.Context, wait time.Duration) (jetstream.Msg, error) {
	select {
	case r := <-p.ch:
		return r.m, r.err
	default:
	}
	if wait <= 0 {
		return nil, nats.ErrTimeout
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-p.ch:
		return r.m, r.err
	case <-t.C:
		return nil, nats.ErrTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stop stops the iterator and its goroutine, and deletes the consumer on
// the server when NATS is there to ask (best-effort: one left behind goes
// after readerInactive).
func (p *pump) Stop() {
	close(p.done)
	p.it.Stop()
	if info := p.c.CachedInfo(); info != nil && p.q.JS.Conn().IsConnected() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = p.q.Results.DeleteConsumer(ctx, info.Name)
		cancel()
	}
}

// followSpan starts the span of a Follow of job id: a CONSUMER span of
// the results stream.
func followSpan(ctx context.Context, q *queue.Queue, id string) (context.Context, trace.Span) {
	tmpl := q.Opts.ResultSubjectTemplate()
	ctx, span := telemetry.Tracer().Start(ctx, "receive "+tmpl, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(telemetry.NATS, telemetry.MessagingOperationType.String("receive"),
			telemetry.MessagingOperationName.String("follow"), telemetry.MessagingDestTemplate.String(tmpl),
			telemetry.JobID.String(id))
	}
	return ctx, span
}

// endFollowSpan ends the span of a Follow that read rec, with err.
func endFollowSpan(span trace.Span, rec *job.Record, err error) {
	if span.IsRecording() {
		span.SetAttributes(telemetry.MessagingBatchCount.Int64(rec.Batches), telemetry.JobState.String(string(rec.State)))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
