// Package cache is the result cache: the outcome of every puzzle solved,
// by the puzzle's key (solver.Grid.Key), in Redis for a real deployment (a
// single server, Sentinel or Cluster, through go-redis's UniversalClient)
// or in process memory for the one-command start.
//
// It is a cache and nothing else: it may evict any entry, fill up, fail,
// restart empty or be flushed at any moment, and no job notices but by
// being slower. A job's state and results live in JetStream. Guard wraps a
// cache so that its callers never wait on an outage: lookups miss and
// writes are dropped while it is down, and each outage is logged once.
//
// # Keys and values
//
// With the default prefix "sudoku:", the outcome of the puzzle with key K
// is stored at "sudoku:s2:" and the first 32 hex digits of K, in the
// binary form of job.AppendCacheValue: 41 bytes for a solved puzzle. Only
// answers are stored (unique, multiple, none, and solved from
// first-solution mode), never gave_up or invalid.
package cache

import (
	"context"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// Entry is one puzzle's outcome to cache under its key.
type Entry struct {
	Key     job.Key
	Outcome *job.Outcome
	// Value is Outcome's cache form (job.AppendCacheValue) when the
	// caller has it already; nil makes Put encode it.
	Value []byte
}

// value returns e's cache form.
func (e *Entry) value() []byte {
	if e.Value != nil {
		return e.Value
	}
	return job.AppendCacheValue(nil, e.Outcome)
}

// Cache is what both caches offer. Consumers define narrower interfaces
// of their own where they need less.
type Cache interface {
	// Get looks keys up; the outcome of a key not cached is nil.
	Get(ctx context.Context, keys []job.Key) ([]*job.Outcome, error)
	// Put stores entries; outcomes that are not answers are skipped.
	Put(ctx context.Context, entries []Entry) error
	// Ping checks that the cache answers.
	Ping(ctx context.Context) error
	// Close releases the cache's connections.
	Close() error
}

// cacheable reports whether o is worth caching: an answer, not a search
// that ran out of its budget or an input that is not a puzzle.
func cacheable(o *job.Outcome) bool { return o.Answers(true) }
