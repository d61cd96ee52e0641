// Package producer is the submitting side of sudoku-queue: it reads a file
// of puzzles, validates each line, answers what it can from the cache,
// spots repeats, records the job and its manifests in JetStream and
// publishes its batches; then Follow reads the job's results back from
// JetStream in input order, whoever submitted it and however often.
package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Options tune Submit. The zero value works.
type Options struct {
	// BatchSize is the most puzzles a message holds (default
	// DefaultBatchSize).
	BatchSize int
	// FirstBatch is how many puzzles a job's first batch holds (default
	// DefaultFirstBatch; at most BatchSize): each next batch holds twice
	// as many as the last, up to BatchSize. The first results come back
	// at once, and a small job still makes several batches for several
	// workers, while a large one goes in batches of BatchSize, each of
	// which costs the queue less a puzzle. FirstBatch >= BatchSize makes
	// every batch BatchSize.
	FirstBatch int
	// MaxMessageBytes bounds a message's size (default
	// DefaultMaxMessageBytes); batches are cut short to fit.
	MaxMessageBytes int
	// MaxGrowth, when above 0, bounds what a submission may store: the
	// results (and work) of its lines, estimated as its batches are cut,
	// may take at most MaxGrowth times the bytes of its input, plus
	// GrowthSlack; beyond, the submission fails (ErrTooMuchGrowth). A
	// puzzle line's results take up to about 5 times its 82 bytes; lines
	// too short to be puzzles ("1") take far more than themselves. Set
	// for requests from the network (the micro service, the HTTP API).
	MaxGrowth int
	// Force sends every puzzle to the workers, even those already cached.
	Force bool
	// FirstSolution asks the workers to stop at the first solution.
	FirstSolution bool
	// JSONResults publishes the results in the JSON form
	// (job.JSONResults), without repeats, for clients in other languages.
	JSONResults bool
	// Priority is the job's share of its owner's turns (default normal).
	Priority job.Priority
	// Quota bounds what the owner may have queued (zero: no bound):
	// Start refuses a submission over it before anything is stored, with
	// a *job.QuotaError naming the quota; a large job found over
	// LinesPending while it is published fails the same way.
	Quota job.Quota
	// Usage returns the owner's open jobs and their lines without a
	// result yet, for the quota (nil: the producer reads the owner's
	// records itself, one watch). A door that watches the records
	// anyway (a worker's micro service, the HTTP API) gives its own.
	Usage UsageFunc
	// Owner owns the jobs submitted (default job.DefaultOwner): the
	// submitting NATS user, the HTTP caller's principal, or a tenant's
	// name (job.CheckOwner). Workers take turns between owners, then
	// between an owner's jobs; only the owner (or an admin) may cancel or
	// remove them.
	Owner string
	// Progress, if set, is called after each group of batches is
	// published, with the lines read so far, on the goroutine that
	// publishes.
	Progress func(lines int)
	// Logger receives the producer's warnings (default slog.Default()).
	Logger *slog.Logger
}

// UsageFunc returns owner's open jobs (publishing or published) and their
// lines without a result yet.
type UsageFunc func(ctx context.Context, owner string) (jobs int, lines int64, err error)

// Producer submits jobs. It is safe for concurrent use.
type Producer struct {
	q     *queue.Queue
	jobs  *job.Store
	cache *cache.Guard
	opts  Options
}

// New returns a producer publishing to q, looking puzzles up in the cache
// c (nil for none).
func New(q *queue.Queue, c *cache.Guard, opts Options) *Producer {
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	opts.BatchSize = min(opts.BatchSize, job.MaxBatch)
	if opts.FirstBatch <= 0 {
		opts.FirstBatch = DefaultFirstBatch
	}
	opts.FirstBatch = min(opts.FirstBatch, opts.BatchSize)
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Owner == "" {
		opts.Owner = job.DefaultOwner
	}
	if c == nil {
		c = cache.NewGuard(nil, cache.GuardOptions{})
	}
	return &Producer{q: q, jobs: q.Store(), cache: c, opts: opts}
}

// Options returns the options in effect: those given to New, with the
// defaults filled in.
func (p *Producer) Options() Options { return p.opts }

// Submitted is what a submission did with each line: the one submit
// reply, which `sudoku submit` prints, POST /v1/jobs and the micro
// service's submit endpoint encode. Invalid + Cached + Repeated + Queued
// is Lines.
type Submitted struct {
	ID string `json:"id"`
	// Tally's Lines is the number of puzzle lines read (JSON:
	// elements), one result each; Accepted of them are puzzles and
	// Invalid are not. Of the accepted ones, Cached were answered from
	// the cache, Repeated repeat an earlier line, and Queued went to the
	// workers in Batches messages (counting those the producer answered
	// itself).
	job.Tally
	Accepted int64 `json:"accepted"`
	// InvalidLines are the first (up to 100) invalid lines: number, text
	// and why.
	InvalidLines []InvalidLine `json:"invalid_lines"`
	// Results says where the job's results appear: in Results.Stream,
	// from its sequence Results.StartSeq on (0: unknown).
	Results queue.ResultsInfo `json:"results"`
}

// InvalidLine is a line of a job that is not a puzzle: its number, its
// text and why.
type InvalidLine struct {
	Line   int    `json:"line"`
	Puzzle string `json:"puzzle"`
	Error  string `json:"error"`
}

// The defaults of Options, and so of the configuration's queue.batch_size,
// queue.first_batch_size and queue.max_message_bytes (internal/config
// takes them from here).
const (
	DefaultBatchSize       = 4096
	DefaultFirstBatch      = 256
	DefaultMaxMessageBytes = 1 << 20
)

// apiTimeout bounds each JetStream request: a stream that is gone or a
// cluster without a leader fails the call instead of holding it for ever.
const apiTimeout = 10 * time.Second

// maxReported bounds Submitted.InvalidLines.
const maxReported = 100

// ErrSubmit is matched by the errors of a submission that stopped before
// every batch was published; its job is marked failed.
var ErrSubmit = errors.New("submission stopped")

// ErrTooMuchGrowth is matched by the error of a submission whose results
// would take more than Options.MaxGrowth times its input.
var ErrTooMuchGrowth = errors.New("the request's results would take too much room for its size")

// GrowthSlack is the room a submission may take beyond Options.MaxGrowth
// times its input: small requests are never refused.
const GrowthSlack = 64 << 10

// DefaultMaxGrowth is the MaxGrowth of requests from the network.
const DefaultMaxGrowth = 8

// Submit reads every puzzle of in, records a job and publishes its
// batches. Memory stays bounded whatever the input's size: one group of
// batches, the publish window, and the repeat window. When it fails or ctx
// ends mid-way, the job is marked failed (it will never finish) and the
// error matches ErrSubmit.
func (p *Producer) Submit(ctx context.Context, in *input.Reader) (Submitted, error) {
	st, err := p.Start(ctx, in)
	if err != nil {
		return Submitted{}, err
	}
	return st.Wait()
}

// Started is a job whose record is created and whose batches are being
// published by Start's goroutine.
type Started struct {
	// ID is the job's id: Follow may read its results while it is being
	// published.
	ID   string
	done chan struct{}
	sub  Submitted
	err  error
}

// Wait waits for the submission to end and returns what Submit returns.
func (st *Started) Wait() (Submitted, error) {
	<-st.done
	return st.sub, st.err
}

// Start records a job, then reads in and publishes its batches on a
// goroutine of its own, as Submit does, so that the caller may follow the
// job meanwhile. It fails only when in holds no puzzle (input.ErrEmpty:
// no job is created), the owner is not one (job.CheckOwner), or the
// record cannot be created; what fails afterwards, Wait returns.
//
// A small job, whose whole input fits in its first batch, is done before
// Start returns: its batch is published first, then its record is
// created, complete (published, its manifest in it), in one write; it
// goes to its owner's small lane. A larger one gets its record first
// (publishing, with a heartbeat), then its batches as they are read, in
// the least busy of its owner's big lanes.
func (p *Producer) Start(ctx context.Context, in *input.Reader) (*Started, error) {
	if err := job.CheckOwner(p.opts.Owner); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOwner, err)
	}
	if err := in.RequirePuzzle(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	id := job.NewID(p.opts.Owner)
	form := queue.FormBinary
	if p.opts.JSONResults {
		form = queue.FormJSON
	}
	s := &submission{p: p, sub: Submitted{ID: id, InvalidLines: []InvalidLine{}, Results: p.q.Opts.ResultsOf(id, form, 0)},
		pub: newPublisher(p)}
	s.rec = job.NewRecord(s.sub.ID, job.Options{FirstSolution: p.opts.FirstSolution, Force: p.opts.Force,
		BatchSize: p.opts.BatchSize, JSONResults: p.opts.JSONResults, Priority: p.opts.Priority.Or()}, time.Now())
	s.lane = queue.Lane{Owner: p.opts.Owner, Priority: p.opts.Priority.Or(), Slot: queue.SlotSmall}
	// Results come after what the stream holds now. Without the answer
	// the readers start by time, as they did before the field.
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	if from, err := p.q.ResultsFrom(cctx); err == nil {
		s.rec.ResultsFrom = from
		s.sub.Results.StartSeq = from
	}
	cancel()
	src, err := lookAhead(in, p.opts.FirstBatch)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if s.pending, err = p.admit(ctx, int64(len(src.items))); err != nil {
		return nil, err
	}
	// The submit's span: the parent of every batch's span in the workers,
	// through the traceparent header of the work messages.
	ctx, span := telemetry.Tracer().Start(ctx, "send "+p.q.Opts.WorkSubjectTemplate(),
		trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(telemetry.NATS, telemetry.MessagingOperationType.String("send"),
			telemetry.MessagingOperationName.String("submit"),
			telemetry.MessagingDestTemplate.String(p.q.Opts.WorkSubjectTemplate()),
			telemetry.JobID.String(id), telemetry.JobOwner.String(p.opts.Owner))
	}
	st := &Started{ID: s.sub.ID, done: make(chan struct{})}
	if src.all {
		s.small = true
		if err := s.run(ctx, src); err != nil {
			s.pub.abandon()
			s.endSpan(span, err)
			return nil, err
		}
		s.sub.Accepted = s.sub.Lines - s.sub.Invalid
		st.sub = s.sub
		s.endSpan(span, nil)
		close(st.done)
		return st, nil
	}
	cctx, cancel = context.WithTimeout(ctx, apiTimeout)
	s.lane.Slot = p.q.BigSlotFor(cctx, s.lane.Owner, s.lane.Priority)
	s.rec.Slot = s.lane.Slot
	_, err = p.jobs.Create(cctx, &s.rec)
	cancel()
	if err != nil {
		err = fmt.Errorf("create the job record: %w", err)
		s.endSpan(span, err)
		return nil, err
	}
	go func() {
		defer close(st.done)
		stop := s.heartbeat(ctx)
		err := s.run(ctx, src)
		stop()
		if err != nil {
			s.fail(err)
			err = fmt.Errorf("job %s: %w: %w", s.sub.ID, ErrSubmit, err)
		}
		s.sub.Accepted = s.sub.Lines - s.sub.Invalid
		st.sub, st.err = s.sub, err
		s.endSpan(span, err)
	}()
	return st, nil
}

// endSpan ends the submit's span with what was published, and err.
func (s *submission) endSpan(span trace.Span, err error) {
	if span.IsRecording() {
		span.SetAttributes(telemetry.MessagingBatchCount.Int64(s.sub.Batches),
			telemetry.JobLines.Int64(s.sub.Lines))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// admit checks Options.Quota before a job of the owner, with lines read
// so far, is created: its open jobs and their lines without a result,
// this one's with them. It returns the lines of the owner's other open
// jobs, for the check of the lines still to be read.
func (p *Producer) admit(ctx context.Context, lines int64) (pending int64, err error) {
	q := p.opts.Quota
	if q.JobsOpen <= 0 && q.LinesPending <= 0 {
		return 0, nil
	}
	usage := p.opts.Usage
	if usage == nil {
		usage = p.usage
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	jobs, pending, err := usage(ctx, p.opts.Owner)
	if err != nil {
		return 0, fmt.Errorf("the owner's open jobs, for its quotas: %w", err)
	}
	return pending, q.Admit(p.opts.Owner, jobs+1, pending+lines)
}

// usage is the UsageFunc of a producer without one: it reads the records
// of the owner's jobs that have work in the work stream, not every record
// the owner has (kept for the results' retention, thousands for a busy
// owner): one look at the stream, and a read per job with work queued.
// A job with no batch in the stream at that moment (a large one whose
// first batch is not yet published, or whose published batches are all
// acked) is not counted: the workers' own check of the quotas, which
// watches every record, fails what the doors let through.
func (p *Producer) usage(ctx context.Context, owner string) (jobs int, lines int64, err error) {
	ids, err := p.q.OwnerJobsWithWork(ctx, owner)
	if err != nil {
		return 0, 0, err
	}
	now := time.Now()
	for _, id := range ids {
		r, _, err := p.jobs.Get(ctx, id)
		if errors.Is(err, job.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		if r.State.Active() && !r.Stale(now) {
			jobs++
			lines += max(0, r.Lines-r.LinesDone())
		}
	}
	return jobs, lines, nil
}

// ErrBadOwner is matched by the error of a submission whose owner is not
// a valid name.
var ErrBadOwner = errors.New("bad owner")

// heartbeat refreshes the record every job.HeartbeatEvery until stop, so
// that readers can tell a slow input from a dead producer.
func (s *submission) heartbeat(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(job.HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				s.mu.Lock()
				if time.Since(s.rec.Heartbeat) >= job.HeartbeatEvery/2 {
					if err := s.updateLocked(ctx); err != nil {
						s.p.opts.Logger.Warn("producer: cannot refresh the job's heartbeat", "job", s.sub.ID, "err", err)
					}
				}
				s.mu.Unlock()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// answeredBatch is a batch whose results the producer stored itself.
type answeredBatch struct {
	index  uint64
	counts job.Counts
}

// submission is one Submit in progress.
type submission struct {
	p   *Producer
	pub *publisher
	// lane is where the job's batches go; small is set for a job whose
	// whole input was read before its first batch closed: its record is
	// created once every batch is published, complete.
	lane  queue.Lane
	small bool
	// pending are the owner's lines without a result in its other open
	// jobs, as Start found them (for Options.Quota's LinesPending).
	pending int64

	mu  sync.Mutex // the record's fields below: heartbeat runs apart
	sub Submitted
	rec job.Record
	// published: every batch is published and stored (the record moves
	// to Published at the next update).
	published bool
	// answered are the batches the producer stored the results of itself
	// (every line answered by the cache, or invalid), with their counts,
	// to add to the record at the next update.
	answered []answeredBatch

	batch job.Batch  // the batch being filled
	out   []inflight // the messages of the batches closed, not yet published
	// digests are those of the current manifest chunk's batches closed
	// so far, published or not: its manifest as it is stored next.
	digests []job.Digest
	// batchSize is how many items the current batch takes:
	// Options.FirstBatch at first, doubling to Options.BatchSize.
	batchSize int
	// flushAt is how many batches wait to be published before they are:
	// 1 at first, so that the workers start at once, doubling to
	// job.ManifestSpan, so that a large job stores few manifests.
	flushAt         int
	size            int    // the current batch's encoded size, about
	inBytes, stored int64  // the input's bytes read, and what its items will store
	next            uint64 // the next batch's index
	item            uint64 // the next item's index
	repeats         repeatWindow
	// looking: the producer looks the puzzles of its batches up in the
	// cache. It does from the first batch while each lookup finds some,
	// so that a job submitted again is answered without a worker; after
	// one finds none, the workers look the rest up (they need the keys
	// to store what they solve, the producer does not).
	looking bool
	keys    []job.Key // the keys of the batch's Solve items, in order
	// solveItems are the batch's Solve items (for lookup).
	solveItems []*job.Item
}

func (s *submission) run(ctx context.Context, in source) error {
	s.looking = !s.p.opts.Force && s.p.cache.Enabled()
	s.flushAt = 1
	if s.small {
		s.flushAt = job.ManifestSpan
	}
	s.batchSize = s.p.opts.FirstBatch
	// Room for the first batch: the items grow with the batches (a small
	// job allocates little).
	s.batch = s.newBatch(make([]job.Item, 0, s.p.opts.FirstBatch))
	for {
		it, raw, err := in.NextRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted after %d lines: %w", s.sub.Lines, err)
		}
		if err := s.add(ctx, it, raw); err != nil {
			return err
		}
	}
	if err := s.closeBatch(ctx); err != nil {
		return err
	}
	if s.small {
		return s.finishSmall(ctx)
	}
	if err := s.flush(ctx); err != nil {
		return err
	}
	if err := s.pub.wait(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.published = true
	s.mu.Unlock()
	return s.update(ctx)
}

// finishSmall publishes a small job's batches and waits for their acks,
// then creates its record: published, or finished when the producer
// answered every line itself, with its manifest in it. A worker that
// takes a batch before the record is there waits for it a moment
// (Worker.check); a producer that stops between the two leaves batches
// of no job, which the workers dead-letter, and no record that anyone
// would wait on.
func (s *submission) finishSmall(ctx context.Context) error {
	if len(s.digests) > job.ManifestSpan {
		return fmt.Errorf("a small job of %d batches", len(s.digests)) // lookAhead reads too few lines for that
	}
	for _, f := range s.out {
		if err := s.pub.publish(ctx, f); err != nil {
			return err
		}
		s.sub.Batches++
	}
	s.out = s.out[:0]
	if err := s.pub.wait(ctx); err != nil {
		return err
	}
	now := time.Now()
	r := &s.rec
	r.Tally = s.sub.Tally
	m := job.Manifest{Chunk: 0, Digests: s.digests}
	r.Manifest = m.Encode()
	for _, a := range s.answered {
		r.AddResults(a.index, a.counts, now)
	}
	r.Publish(now)
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := s.p.jobs.Create(cctx, r); err != nil {
		return fmt.Errorf("create the job record: %w", err)
	}
	if s.p.opts.Progress != nil {
		s.p.opts.Progress(int(s.sub.Lines))
	}
	return nil
}

// newBatch returns the next batch, its items in items' memory.
func (s *submission) newBatch(items []job.Item) job.Batch {
	b := job.Batch{Job: s.sub.ID, Index: s.next, First: s.item, Items: items[:0]}
	if s.p.opts.FirstSolution {
		b.Flags |= job.FlagFirstSolution
	}
	if s.p.opts.JSONResults {
		b.Flags |= job.FlagJSONResults
	}
	return b
}

// itemOverhead bounds an item's encoding beyond its text: line delta,
// kind, status, guesses, two lengths.
const itemOverhead = 32

// jsonItemSize bounds the JSON form of a result of a valid puzzle: the
// puzzle, key and solution, and the field names.
const jsonItemSize = 400

// add classifies one input item and adds it to the current batch. raw,
// when not nil, is its text (input.Reader.NextRaw), valid during the call.
func (s *submission) add(ctx context.Context, in input.Item, raw []byte) error {
	s.sub.Lines++
	it := job.Item{Line: in.Line}
	size := itemOverhead + job.PackedLen
	if s.p.opts.JSONResults {
		size = jsonItemSize // its results take more room than its puzzle
	}
	perr := in.Err // a line too long to read
	var g solver.Grid
	switch {
	case perr != nil:
	case raw != nil:
		if g, perr = solver.ParseBytes(raw); perr != nil {
			in.Text = string(raw)
		}
	default:
		g, perr = solver.Parse(in.Text)
	}
	if perr != nil {
		r := result.Invalid(in.Line, in.Text, perr)
		it.Kind, it.Outcome = job.Known, job.Outcome{Status: result.StatusInvalid, Text: r.Puzzle, Error: r.Error}
		size = itemOverhead + len(it.Outcome.Text) + len(it.Outcome.Error)
		if s.p.opts.JSONResults {
			size = jsonItemSize + 2*(len(it.Outcome.Text)+len(it.Outcome.Error)) // JSON escapes
		}
		s.sub.Invalid++
		if len(s.sub.InvalidLines) < maxReported {
			s.sub.InvalidLines = append(s.sub.InvalidLines, InvalidLine{Line: r.Line, Puzzle: r.Puzzle, Error: r.Error})
		}
	} else {
		h := s.repeats.hash(&g)
		if back, ok := s.repeats.find(&g, h, s.item); ok && !s.p.opts.JSONResults {
			it.Kind, it.Back = job.Repeat, back
			s.sub.Repeated++
		} else {
			s.repeats.add(&g, h, s.item)
			it.Kind, it.Grid = job.Solve, g
			if s.looking {
				s.keys = append(s.keys, job.KeyOf(&g))
			}
		}
	}
	if len(s.batch.Items) > 0 && s.size+size > s.p.opts.MaxMessageBytes-256 {
		if err := s.closeBatch(ctx); err != nil {
			return err
		}
	}
	s.batch.Items = append(s.batch.Items, it)
	s.size += size
	s.item++
	s.inBytes += int64(max(len(in.Text), len(raw)) + 1)
	s.stored += int64(size)
	q := s.p.opts.Quota
	if q.RequestBytes > 0 && s.stored > q.RequestBytes {
		return &job.QuotaError{Owner: s.lane.Owner, Quota: job.QuotaRequestBytes, Limit: q.RequestBytes, Have: s.stored}
	}
	if q.LinesPending > 0 && s.pending+s.sub.Lines > q.LinesPending {
		return &job.QuotaError{Owner: s.lane.Owner, Quota: job.QuotaLinesPending, Limit: q.LinesPending, Have: s.pending + s.sub.Lines}
	}
	if g := int64(s.p.opts.MaxGrowth); g > 0 && s.stored > g*s.inBytes+GrowthSlack {
		return fmt.Errorf("%w: %d lines of %d bytes in all would store about %d bytes, more than %d times that: "+
			"lines too short to be puzzles?", ErrTooMuchGrowth, s.sub.Lines, s.inBytes, s.stored, g)
	}
	if len(s.batch.Items) >= s.batchSize {
		return s.closeBatch(ctx)
	}
	return nil
}

// closeBatch ends the current batch, if it has items: it answers what the
// cache knows of its puzzles, computes its digest and encodes its message
// (a work batch, or straight away its results when nothing is left for a
// worker), to publish once its manifest is stored; every ManifestSpan
// batches it flushes. Its items are then done with: their memory holds
// the next batch's.
func (s *submission) closeBatch(ctx context.Context) error {
	b := &s.batch
	if len(b.Items) == 0 {
		return nil
	}
	checked := s.lookup(ctx) || s.p.opts.Force
	d := b.ComputeDigest()
	solve := 0
	for j := range b.Items {
		if b.Items[j].Kind == job.Solve {
			solve++
		}
	}
	if solve == 0 {
		// Nothing for a worker: the producer stores the results itself.
		b.Digest = d
		s.out = append(s.out, inflight{msg: s.p.q.Opts.ResultsMsg(b), results: true})
		s.mu.Lock()
		s.answered = append(s.answered, answeredBatch{index: b.Index, counts: job.CountItems(b.Items)})
		s.mu.Unlock()
	} else {
		if checked {
			b.Flags |= job.FlagNoLookup
		}
		m := s.p.q.Opts.WorkMsg(b, s.lane)
		telemetry.Inject(ctx, m.Header)
		s.out = append(s.out, inflight{msg: m})
	}
	s.digests = append(s.digests, d)
	s.sub.Queued += int64(solve)
	s.next++
	s.batchSize = min(2*s.batchSize, s.p.opts.BatchSize)
	clear(b.Items)
	*b, s.size = s.newBatch(b.Items), 0
	if !s.small && (len(s.out) >= s.flushAt || len(s.digests) == job.ManifestSpan) {
		s.flushAt = min(2*s.flushAt, job.ManifestSpan)
		return s.flush(ctx)
	}
	return nil
}

// flush stores the manifest of the current chunk with the batches closed
// since the last flush, publishes them and updates the job record. The
// manifest is stored before any of its batches is published: a worker
// that finds none for a batch knows it is not the producer's. A chunk's
// manifest is stored again, longer, at each flush within it.
func (s *submission) flush(ctx context.Context) error {
	if len(s.out) == 0 {
		return nil
	}
	m := job.Manifest{Chunk: job.ManifestChunk(uint64(s.sub.Batches)), Digests: s.digests}
	mctx, cancel := context.WithTimeout(ctx, apiTimeout)
	err := s.p.jobs.PutManifest(mctx, s.sub.ID, &m)
	cancel()
	if err != nil {
		return err
	}
	for _, f := range s.out {
		if err := s.pub.publish(ctx, f); err != nil {
			return err
		}
		s.sub.Batches++
	}
	clear(s.out)
	s.out = s.out[:0]
	if len(s.digests) == job.ManifestSpan {
		s.digests = s.digests[:0] // the chunk is complete
	}
	if err := s.update(ctx); err != nil {
		return err
	}
	if s.p.opts.Progress != nil {
		s.p.opts.Progress(int(s.sub.Lines))
	}
	return nil
}

// lookup replaces the Solve items of the current batch found in the
// cache with their outcomes, and reports whether the cache was looked up.
// A lookup that finds none ends the producer's lookups (s.looking).
func (s *submission) lookup(ctx context.Context) bool {
	if !s.looking {
		return false
	}
	keys := s.keys
	s.keys = s.keys[:0]
	items := s.solveItems[:0]
	for j := range s.batch.Items {
		if it := &s.batch.Items[j]; it.Kind == job.Solve {
			items = append(items, it)
		}
	}
	s.solveItems = items
	if len(keys) == 0 {
		return true
	}
	hits, ok := s.p.cache.LookupBatch(ctx, keys)
	found := 0
	for i, h := range hits {
		if h != nil && h.Answers(s.p.opts.FirstSolution) && h.Puzzle == items[i].Grid {
			items[i].Kind, items[i].Outcome = job.Known, *h
			items[i].Outcome.Cached = true
			found++
		}
	}
	s.sub.Cached += int64(found)
	s.looking = ok && found > 0
	return ok
}

// update stores the job record with the counts so far. Only the
// submitting goroutine calls it (it alone writes s.sub).
func (s *submission) update(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.rec
	r.Tally = s.sub.Tally
	return s.updateLocked(ctx)
}

// updateLocked brings the job record up to date with the submission, with
// a fresh heartbeat; s.mu is held. The record is shared: workers add the
// results of its batches to it meanwhile, and it may have been
// cancelled (job.ErrCancelled) or marked failed by another client.
func (s *submission) updateLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	now := time.Now()
	mine := s.rec // the counts as update copied them
	update := func(r *job.Record) error {
		switch r.State {
		case job.Publishing:
		case job.Cancelled:
			return job.ErrCancelled
		default:
			return fmt.Errorf("the job is %s: %s", r.State, r.Error)
		}
		r.Tally = mine.Tally
		r.Heartbeat = now.UTC()
		for _, a := range s.answered {
			r.AddResults(a.index, a.counts, now)
		}
		if s.published {
			r.Publish(now)
		}
		return nil
	}
	apply := s.p.jobs.Apply
	if s.published {
		// The end of publishing must stay (job.Store.ApplyConfirmed).
		apply = func(ctx context.Context, id string, fn func(*job.Record) error) (job.Record, error) {
			return s.p.jobs.ApplyConfirmed(ctx, id, fn, func(r *job.Record) bool { return r.State != job.Publishing })
		}
	}
	rec, err := apply(ctx, s.rec.ID, update)
	if err != nil {
		return err
	}
	s.answered = s.answered[:0]
	s.rec = rec
	return nil
}

// fail marks the job failed, so that nobody waits for it for ever.
func (s *submission) fail(cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.pub.abandon()
	if errors.Is(cause, job.ErrCancelled) {
		return // its end is the cancel's
	}
	sub := s.sub // the submitting goroutine has stopped
	_, err := s.p.jobs.ApplyConfirmed(ctx, sub.ID, func(r *job.Record) error {
		if !r.Fail(cause.Error(), time.Now()) {
			return job.ErrUnchanged
		}
		r.Tally = sub.Tally
		return nil
	}, func(r *job.Record) bool { return !r.State.Active() })
	if err != nil {
		s.p.opts.Logger.Error("producer: cannot mark the job failed", "job", s.sub.ID, "err", err)
	}
	// Its batches left in its lane are dropped as the workers take them.
}
