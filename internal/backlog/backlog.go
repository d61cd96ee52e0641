// Package backlog watches the work left in JetStream for the whole
// deployment, whatever the number of workers (none included): the active
// jobs and their lines without a result, from a watch of the job records,
// and the batches waiting in the work stream, read when asked. `sudoku
// serve` runs one and exports it once (not once per worker) as the gauges
// KEDA scales the workers on:
//
//	sudoku_backlog_lines{priority}    lines of active jobs without a result yet
//	sudoku_backlog_jobs{priority}     active jobs (publishing or published)
//	sudoku_backlog_batches{priority}  work batches in the work stream: not yet
//	                                  delivered, or delivered and not yet acked
//	sudoku_backlog_up                 1 when the figures were read from JetStream
//	                                  at this scrape, 0 when they could not be
//
// The same watch answers the producer's quota question (Usage) without a
// read of the owner's records per submission.
package backlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Figures are the work left, by job priority.
type Figures struct {
	// Lines of active jobs without a result yet.
	Lines map[job.Priority]int64
	// Jobs active: publishing or published.
	Jobs map[job.Priority]int64
	// Batches in the work stream, not yet delivered or not yet acked
	// (batches of jobs that ended count until a worker drops them).
	Batches map[job.Priority]int64
	// Up reports whether the figures were read from JetStream: the
	// records' watch is current and the work stream answered.
	Up bool
}

// Options tune a Watch.
type Options struct {
	// StreamEvery is how long a reading of the work stream's batches is
	// reused (default 1s): scrapes closer together cost the server
	// nothing more.
	StreamEvery time.Duration
	// Logger receives the watch's warnings (default slog.Default()).
	Logger *slog.Logger
}

// active is an active job as the watch last saw its record.
type active struct {
	owner    string
	priority job.Priority
	left     int64 // lines without a result
	rec      job.Record
}

// Watch follows the job records of a queue and reads its work stream on
// demand. Create it with New, then Run it; it is safe for concurrent use.
type Watch struct {
	q    *queue.Queue
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	jobs    map[string]active
	current bool          // the watch has read the initial values and runs
	ready   chan struct{} // closed once the initial values are read
	once    sync.Once
	// failed is closed when a watch fails before the first is ready: a
	// user that may not read every owner's records (a producer's,
	// without the gateway role), whose Usage reads the owner's own.
	failed     chan struct{}
	failedOnce sync.Once

	streamMu  sync.Mutex
	batchesAt time.Time
	batches   map[job.Priority]int64
	batchErr  error

	lines, jobsDesc, batchesDesc, up *prometheus.Desc
}

// New returns a watch of q's records and work stream.
func New(q *queue.Queue, opts Options) *Watch {
	if opts.StreamEvery <= 0 {
		opts.StreamEvery = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("sudoku", "backlog", name), help, labels, nil)
	}
	return &Watch{q: q, opts: opts, log: opts.Logger, jobs: map[string]active{}, ready: make(chan struct{}),
		failed: make(chan struct{}),
		lines: desc("lines", "Lines of active jobs without a result yet, by job priority, for the whole deployment "+
			"(read from JetStream, with or without workers): the autoscaling signal.", "priority"),
		jobsDesc: desc("jobs", "Active jobs (publishing or published), by job priority.", "priority"),
		batchesDesc: desc("batches", "Work batches in the work stream (not yet delivered, or delivered and not yet acked), "+
			"by job priority.", "priority"),
		up: desc("up", "1 when the backlog figures were read from JetStream at this scrape, 0 when they could not be."),
	}
}

// Run follows the job records until ctx is done; a watch that fails is
// started again.
func (w *Watch) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := w.runOnce(ctx)
		w.mu.Lock()
		w.current = false
		w.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		w.failedOnce.Do(func() { close(w.failed) })
		w.log.Warn("backlog: the watch of job records stopped; starting it again", "err", err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}

func (w *Watch) runOnce(ctx context.Context) error {
	// Records only: a record's key is the job's id, two tokens; the
	// manifests' keys have four.
	kw, err := w.q.Jobs.Watch(ctx, "*.*")
	if err != nil {
		return fmt.Errorf("backlog: watch the job records: %w", err)
	}
	defer func() { _ = kw.Stop() }()
	fresh := map[string]active{} // the initial values, swapped in once all are read
	initial := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-kw.Updates():
			if !ok {
				return errors.New("backlog: the watch of job records closed")
			}
			if e == nil {
				w.mu.Lock()
				w.jobs, w.current = fresh, true
				w.mu.Unlock()
				initial = false
				w.once.Do(func() { close(w.ready) })
				continue
			}
			if initial {
				apply(fresh, e)
				continue
			}
			w.mu.Lock()
			apply(w.jobs, e)
			w.mu.Unlock()
		}
	}
}

// apply brings jobs up to date with one entry of the jobs bucket.
func apply(jobs map[string]active, e jetstream.KeyValueEntry) {
	id := e.Key()
	if !job.ValidID(id) {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(jobs, id)
		return
	}
	r, err := job.DecodeRecord(e.Value())
	if err != nil || r.ID != id || !r.State.Active() {
		delete(jobs, id)
		return
	}
	jobs[id] = active{owner: job.OwnerOf(id), priority: r.Options.Priority.Or(),
		left: max(0, r.Lines-r.LinesDone()), rec: r}
}

// Usage returns owner's open jobs (active, not stale) and their lines
// without a result yet, as the watch last saw them: a producer.UsageFunc.
// Before the watch has read the existing records it waits for them; while
// it is not current (it failed: a user that may not read every owner's
// records, a lost connection) the owner's records are read instead.
func (w *Watch) Usage(ctx context.Context, owner string) (jobs int, lines int64, err error) {
	select {
	case <-w.ready:
	case <-w.failed:
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("backlog: the job records are not read yet: %w", ctx.Err())
	}
	now := time.Now()
	w.mu.Lock()
	if w.current {
		for _, a := range w.jobs {
			if a.owner == owner && !a.rec.Stale(now) {
				jobs++
				lines += a.left
			}
		}
		w.mu.Unlock()
		return jobs, lines, nil
	}
	w.mu.Unlock()
	recs, err := w.q.Store().List(ctx, owner, math.MaxInt, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("backlog: %w", err)
	}
	for _, r := range recs {
		if r.State.Active() && !r.Stale(now) {
			jobs++
			lines += max(0, r.Lines-r.LinesDone())
		}
	}
	return jobs, lines, nil
}

// Figures returns the work left: the records as the watch last saw them,
// and the work stream's batches as read at most Options.StreamEvery ago.
func (w *Watch) Figures(ctx context.Context) Figures {
	f := Figures{Lines: map[job.Priority]int64{}, Jobs: map[job.Priority]int64{}}
	w.mu.Lock()
	for _, a := range w.jobs {
		f.Lines[a.priority] += a.left
		f.Jobs[a.priority]++
	}
	current := w.current
	w.mu.Unlock()
	var err error
	f.Batches, err = w.readBatches(ctx)
	f.Up = current && err == nil
	return f
}

// readBatches returns the messages of the work stream by priority, read
// at most Options.StreamEvery ago.
func (w *Watch) readBatches(ctx context.Context) (map[job.Priority]int64, error) {
	w.streamMu.Lock()
	defer w.streamMu.Unlock()
	if !w.batchesAt.IsZero() && time.Since(w.batchesAt) < w.opts.StreamEvery {
		return w.batches, w.batchErr
	}
	out := map[job.Priority]int64{}
	subjects, err := w.q.WorkSubjects(ctx)
	for subject, n := range subjects {
		// Messages on subjects of no lane (stray) count as normal work:
		// a worker takes them too, to drop them.
		p := job.PriorityNormal
		if _, l, ok := w.q.Opts.WorkJob(subject); ok {
			p = l.Priority
		}
		out[p] += int64(n)
	}
	w.batchesAt, w.batches, w.batchErr = time.Now(), out, err
	return out, err
}

// Describe implements prometheus.Collector.
func (w *Watch) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.lines
	ch <- w.jobsDesc
	ch <- w.batchesDesc
	ch <- w.up
}

// collectTimeout bounds the read of the work stream at a scrape.
const collectTimeout = 5 * time.Second

// Collect implements prometheus.Collector: every priority, 0 included.
func (w *Watch) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	f := w.Figures(ctx)
	for _, p := range job.Priorities {
		ch <- prometheus.MustNewConstMetric(w.lines, prometheus.GaugeValue, float64(f.Lines[p]), string(p))
		ch <- prometheus.MustNewConstMetric(w.jobsDesc, prometheus.GaugeValue, float64(f.Jobs[p]), string(p))
		ch <- prometheus.MustNewConstMetric(w.batchesDesc, prometheus.GaugeValue, float64(f.Batches[p]), string(p))
	}
	up := 0.0
	if f.Up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(w.up, prometheus.GaugeValue, up)
}
