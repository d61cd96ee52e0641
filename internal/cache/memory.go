package cache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// Memory is the store in process memory, for the one-command start when no
// Redis is reachable. It keeps everything until the process ends. It is
// safe for concurrent use.
type Memory struct {
	mu   sync.Mutex
	sols map[string]result.Result
	jobs map[string]*memJob
}

type memJob struct {
	job     Job
	batches map[uint64]bool
	order   []byte
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{sols: map[string]result.Result{}, jobs: map[string]*memJob{}}
}

// Ping always succeeds.
func (m *Memory) Ping(context.Context) error { return nil }

// Close does nothing.
func (m *Memory) Close() error { return nil }

// Get is like Redis.Get.
func (m *Memory) Get(_ context.Context, keys []string) ([]*result.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*result.Result, len(keys))
	for i, k := range keys {
		if r, ok := m.sols[k]; ok {
			out[i] = &r
		}
	}
	return out, nil
}

// Put is like Redis.Put.
func (m *Memory) Put(_ context.Context, rs []result.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.put(rs)
	return nil
}

func (m *Memory) put(rs []result.Result) {
	for _, r := range rs {
		r.Line = 0
		m.sols[r.Key] = r
	}
}

// CompleteBatch is like Redis.CompleteBatch.
func (m *Memory) CompleteBatch(_ context.Context, jobID string, index uint64, rs []result.Result) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.put(rs)
	j := m.jobs[jobID]
	if j == nil || j.batches[index] {
		return false, nil
	}
	j.batches[index] = true
	j.job.Done += int64(len(rs))
	for st, n := range statusCounts(rs) {
		j.job.Counts[st] += n
	}
	return m.finish(j), nil
}

// finish marks j finished when it is sealed and done, and reports whether it
// is finished.
func (m *Memory) finish(j *memJob) bool {
	if j.job.Sealed && j.job.Done >= j.job.Queued && j.job.Finished.IsZero() {
		j.job.Finished = time.Now()
	}
	return !j.job.Finished.IsZero()
}

// CreateJob is like Redis.CreateJob.
func (m *Memory) CreateJob(_ context.Context, id string, created time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs[id] = &memJob{job: Job{ID: id, Created: created, Counts: map[result.Status]int64{}}, batches: map[uint64]bool{}}
	return nil
}

// AddToJob is like Redis.AddToJob.
func (m *Memory) AddToJob(_ context.Context, id string, d JobDelta) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[id]
	if j == nil {
		return fmt.Errorf("%w: %s", ErrJobNotFound, id)
	}
	order, err := appendOrder(j.order, d.Lines)
	if err != nil {
		return err
	}
	j.order = order
	j.job.Total += int64(len(d.Lines))
	j.job.Queued += d.Queued
	j.job.Batches += d.Batches
	for st, n := range d.Counts {
		j.job.Counts[st] += n
	}
	return nil
}

// SealJob is like Redis.SealJob.
func (m *Memory) SealJob(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[id]
	if j == nil {
		return false, fmt.Errorf("%w: %s", ErrJobNotFound, id)
	}
	j.job.Sealed = true
	return m.finish(j), nil
}

// Job is like Redis.Job.
func (m *Memory) Job(_ context.Context, id string) (Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[id]
	if j == nil {
		return Job{}, fmt.Errorf("%w: %s", ErrJobNotFound, id)
	}
	c := j.job
	c.Counts = maps.Clone(j.job.Counts)
	return c, nil
}

// Jobs is like Redis.Jobs.
func (m *Memory) Jobs(ctx context.Context, limit int) ([]Job, error) {
	m.mu.Lock()
	ids := slices.Collect(maps.Keys(m.jobs))
	m.mu.Unlock()
	var jobs []Job
	for _, id := range ids {
		if j, err := m.Job(ctx, id); err == nil {
			jobs = append(jobs, j)
		}
	}
	slices.SortFunc(jobs, func(a, b Job) int { return b.Created.Compare(a.Created) })
	if len(jobs) > limit {
		jobs = jobs[:limit]
	}
	return jobs, nil
}

// Order is like Redis.Order.
func (m *Memory) Order(_ context.Context, id string, from, n int64) ([]OrderEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[id]
	if j == nil {
		return nil, nil
	}
	lo, hi := min(from*orderEntrySize, int64(len(j.order))), min((from+n)*orderEntrySize, int64(len(j.order)))
	return parseOrder(j.order[lo:hi]), nil
}
