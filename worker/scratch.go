package worker

import (
	"sync"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// scratch is the memory one batch needs from its decoding to its commit,
// reused batch after batch (scratches), so that a worker does not
// allocate a batch's worth of items, keys and buffers for each.
type scratch struct {
	items   []job.Item      // the batch's items (job.DecodeWorkInto)
	idx     []int           // the indexes of its Solve items
	keys    []job.Key       // their cache keys
	misses  []int           // the indexes into idx of those not in the cache
	todo    []int           // and their indexes into items, to solve
	times   []time.Duration // the solving time of each
	entries []cache.Entry   // what the batch adds to the cache
	arena   []byte          // the entries' compact forms
	body    []byte          // the results message's body
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// release hands s back for another batch; nothing may use it afterwards.
// A nil s has nothing to release.
func (s *scratch) release() {
	if s == nil {
		return
	}
	clear(s.entries) // pointers into items
	s.entries = s.entries[:0]
	scratches.Put(s)
}
