package cache

import (
	"context"
	"sync"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// DefaultMemoryEntries bounds a Memory cache made with NewMemory(0): about
// 15 MB of outcomes.
const DefaultMemoryEntries = 100_000

// Memory is the cache in process memory, for the one-command start when
// no Redis is reachable. It holds at most its bound of entries, dropping
// arbitrary ones to make room. It is safe for concurrent use.
type Memory struct {
	mu  sync.Mutex
	max int
	m   map[job.Key][]byte
}

// NewMemory returns an empty cache of at most max entries
// (DefaultMemoryEntries when max <= 0).
func NewMemory(max int) *Memory {
	if max <= 0 {
		max = DefaultMemoryEntries
	}
	return &Memory{max: max, m: map[job.Key][]byte{}}
}

// Ping always succeeds.
func (c *Memory) Ping(context.Context) error { return nil }

// Close does nothing.
func (c *Memory) Close() error { return nil }

// Len returns the number of entries.
func (c *Memory) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Get is like Redis.Get.
func (c *Memory) Get(_ context.Context, keys []job.Key) ([]*job.Outcome, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*job.Outcome, len(keys))
	for i, k := range keys {
		if v, ok := c.m[k]; ok {
			if o, err := job.DecodeCacheValue(v); err == nil {
				out[i] = &o
			}
		}
	}
	return out, nil
}

// Put is like Redis.Put.
func (c *Memory) Put(_ context.Context, entries []Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		if !cacheable(e.Outcome) {
			continue
		}
		if _, ok := c.m[e.Key]; !ok && len(c.m) >= c.max {
			n := 0
			for k := range c.m { // random order: drop an eighth
				delete(c.m, k)
				if n++; n >= max(1, c.max/8) {
					break
				}
			}
		}
		c.m[e.Key] = append([]byte(nil), e.value()...)
	}
	return nil
}
