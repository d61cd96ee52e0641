// Package metrics gives a worker process its Prometheus metrics and its
// health endpoints: Worker turns the statistics the worker reports per
// batch (worker.Observer) into counters and histograms on a registry of
// its own, and Handler and Server serve them on /metrics next to /healthz
// and /readyz. API are the metrics of sudoku serve's HTTP API.
//
// Nothing here touches prometheus's global registry, so a process (or a
// test) may have several Workers.
package metrics

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// Namespace starts the name of every metric of this package.
const Namespace = "sudoku"

// Batch outcomes, as in worker.BatchStats.Outcome.
var outcomes = []string{"acked", "nak", "dead_letter", "abandoned", "dropped"}

// Error kinds, the values of the "kind" label of sudoku_errors_total.
const (
	// KindDecode: a message that does not decode (dead-lettered).
	KindDecode = "decode"
	// KindRejected: a batch its job's producer did not publish: unknown
	// job, index out of range, or a digest that differs from the
	// manifest's (dead-lettered).
	KindRejected = "rejected"
	// KindJetStream: JetStream failed (the batch is nak'ed, or
	// dead-lettered on its last delivery).
	KindJetStream = "jetstream"
	// KindShutdown: the batch was handed back because the worker stopped.
	KindShutdown = "shutdown"
)

var kinds = []string{KindDecode, KindRejected, KindJetStream, KindShutdown}

// solveBuckets are the upper bounds of sudoku_solve_seconds.
var solveBuckets = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

var statuses = []result.Status{result.StatusUnique, result.StatusMultiple, result.StatusNone,
	result.StatusInvalid, result.StatusGaveUp, result.StatusSolved}

// Worker holds a worker's metrics on a registry of its own. It implements
// worker.Observer; pass it as worker.Options.Observer. Its methods are safe
// for concurrent use.
//
// The metrics (all prefixed sudoku_):
//
//	puzzles_total{status}          puzzles of acked batches, by result status
//	cache_hits_total               puzzles of acked batches answered from the cache
//	cache_misses_total             puzzles of acked batches not found in the cache
//	solve_seconds                  histogram of the time to solve one puzzle (1us..1s)
//	batch_duration_seconds{queue}  histogram of delivery-to-ack time, queue bulk or interactive
//	redeliveries_total             messages handled that had been delivered before
//	batches_total{outcome}         messages handled: acked, nak, dead_letter, abandoned, dropped
//	errors_total{kind}             messages not acked, by kind (decode, rejected, jetstream, shutdown)
//	in_flight                      messages being handled now
//	cache_errors_total{op}         failed calls to the cache (get, put): each a miss or a dropped write
//	cache_up                       1 while the cache answers lookups, 0 during an outage (or with none)
//
// Puzzles and cache counts only count acked batches, so after a job they
// add up to its size even when batches were nak'ed and redelivered; solve
// times count every solve, as they measure work done. The registry also
// has the Go runtime's and the process's collectors (go_*, process_*:
// CPU seconds, memory, open files).
type Worker struct {
	reg          *prometheus.Registry
	puzzles      *prometheus.CounterVec
	cacheHits    prometheus.Counter
	cacheMisses  prometheus.Counter
	solveSeconds prometheus.Histogram
	batchSeconds *prometheus.HistogramVec
	redeliveries prometheus.Counter
	batches      *prometheus.CounterVec
	errors       *prometheus.CounterVec
	cacheErrors  *prometheus.CounterVec
	inFlight     atomic.Pointer[func() int64]
	cacheUp      atomic.Pointer[func() bool]
}

var _ worker.Observer = (*Worker)(nil)

// NewWorker returns a Worker with every metric registered on a new
// registry, and every label value known in advance set to 0, so that
// dashboards and alerts see the series before the first event.
func NewWorker() *Worker {
	m := &Worker{reg: prometheus.NewRegistry()}
	m.puzzles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "puzzles_total",
		Help: "Puzzles of acknowledged batches, by result status.",
	}, []string{"status"})
	m.cacheHits = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "cache_hits_total",
		Help: "Puzzles of acknowledged batches answered from the result cache.",
	})
	m.cacheMisses = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "cache_misses_total",
		Help: "Puzzles of acknowledged batches not found in the result cache (solved, or invalid).",
	})
	m.solveSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "solve_seconds",
		Help: "Time to solve one puzzle, in seconds.",
		// 1-2.5-5 steps from 1us to 1s: a 17-clue puzzle takes ~10us,
		// the hardest known a few ms, and a puzzle that hits the node
		// budget up to a second. Round bounds make readable "le" labels.
		Buckets: solveBuckets,
	})
	m.batchSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "batch_duration_seconds",
		Help: "Time from the delivery of a message to its ack (or nak), in seconds.",
		// 1ms to ~65s, doubling: a batch of 256 easy puzzles takes a few
		// ms; the ack wait is 30s by default.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 17),
	}, []string{"queue"})
	m.redeliveries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "redeliveries_total",
		Help: "Messages handled that had been delivered before (to this or another worker).",
	})
	m.batches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "batches_total",
		Help: "Messages handled, by outcome: acked, nak, dead_letter, abandoned, or dropped (its job cancelled or removed).",
	}, []string{"outcome"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "errors_total",
		Help: "Messages that were not acknowledged, by kind of failure.",
	}, []string{"kind"})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "in_flight",
		Help: "Messages being handled now.",
	}, func() float64 {
		if f := m.inFlight.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	})

	m.cacheErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "cache_errors_total",
		Help: "Failed calls to the result cache, by operation: a lookup that missed, or a write dropped.",
	}, []string{"op"})
	cacheUp := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "cache_up",
		Help: "1 while the result cache answers lookups, 0 during an outage or without a cache.",
	}, func() float64 {
		if f := m.cacheUp.Load(); f != nil && (*f)() {
			return 1
		}
		return 0
	})

	m.reg.MustRegister(m.puzzles, m.cacheHits, m.cacheMisses, m.solveSeconds, m.batchSeconds,
		m.redeliveries, m.batches, m.errors, inFlight, m.cacheErrors, cacheUp,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	for _, s := range statuses {
		m.puzzles.WithLabelValues(string(s))
	}
	for _, o := range outcomes {
		m.batches.WithLabelValues(o)
	}
	for _, k := range kinds {
		m.errors.WithLabelValues(k)
	}
	m.cacheErrors.WithLabelValues("get")
	m.cacheErrors.WithLabelValues("put")
	m.batchSeconds.WithLabelValues("bulk")
	m.batchSeconds.WithLabelValues("interactive")
	return m
}

// Registry returns the registry holding the metrics, for Handler.
func (m *Worker) Registry() *prometheus.Registry { return m.reg }

// SetInFlight sets the function the sudoku_in_flight gauge reads at each
// scrape, such as (*worker.Worker).InFlight. Until it is set the gauge is
// 0. It exists apart from NewWorker because the worker is built with its
// observer, that is after the metrics.
func (m *Worker) SetInFlight(f func() int64) { m.inFlight.Store(&f) }

// Batch records one handled message; it implements worker.Observer.
func (m *Worker) Batch(s *worker.BatchStats) {
	q := "bulk"
	if s.Interactive {
		q = "interactive"
	}
	m.batchSeconds.WithLabelValues(q).Observe(s.Latency.Seconds())
	m.batches.WithLabelValues(s.Outcome).Inc()
	if s.Redelivered {
		m.redeliveries.Inc()
	}
	for _, d := range s.SolveTimes {
		m.solveSeconds.Observe(d.Seconds())
	}
	if s.Outcome != worker.OutcomeAcked {
		m.errors.WithLabelValues(errorKind(s)).Inc()
		return
	}
	for st, n := range s.Statuses {
		m.puzzles.WithLabelValues(string(st)).Add(float64(n))
	}
	m.cacheHits.Add(float64(s.CacheHits))
	m.cacheMisses.Add(float64(s.Puzzles - s.CacheHits))
}

// errorKind classifies why a message was not acked.
func errorKind(s *worker.BatchStats) string {
	var re *worker.RejectError
	switch {
	case errors.Is(s.Err, job.ErrDecode):
		return KindDecode
	case errors.As(s.Err, &re):
		return KindRejected
	case s.Outcome == worker.OutcomeAbandoned || errors.Is(s.Err, context.Canceled):
		return KindShutdown
	default:
		return KindJetStream
	}
}

// CacheError counts a failed call to the cache; pass it as
// cache.GuardOptions.OnError.
func (m *Worker) CacheError(op string, _ error) { m.cacheErrors.WithLabelValues(op).Inc() }

// SetCacheUp sets the function the sudoku_cache_up gauge reads at each
// scrape.
func (m *Worker) SetCacheUp(f func() bool) { m.cacheUp.Store(&f) }
