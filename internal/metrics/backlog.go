package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// backlog is the sudoku_pending_lines gauge: the lines of the active jobs
// without a result yet, by priority, read at each scrape from the
// worker's view of the job records. It is the autoscaling signal: with
// work divided into a consumer per job, no single consumer's pending
// count is the backlog, so KEDA's prometheus scaler reads this instead of
// its nats-jetstream scaler (docs/deployment.md has a ScaledObject).
type backlog struct {
	desc *prometheus.Desc
	f    atomic.Pointer[func() map[job.Priority]int64]
}

func newBacklog() *backlog {
	return &backlog{desc: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "pending_lines"),
		"Lines of active jobs without a result yet (queued, in work, or still being published), by job priority.",
		[]string{"priority"}, nil)}
}

// Describe implements prometheus.Collector.
func (b *backlog) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

// Collect implements prometheus.Collector: every priority, 0 included.
func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	var pending map[job.Priority]int64
	if f := b.f.Load(); f != nil {
		pending = (*f)()
	}
	for _, p := range job.Priorities {
		ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, float64(pending[p]), string(p))
	}
}

// SetPending sets the function the sudoku_pending_lines gauge reads at
// each scrape (worker.Worker.Pending).
func (m *Worker) SetPending(f func() map[job.Priority]int64) { m.backlog.f.Store(&f) }
