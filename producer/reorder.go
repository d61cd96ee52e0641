package producer

import (
	"fmt"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// reorder holds the checked results batches of a job that arrive before
// their turn, and releases them in input order: batch next, then
// next+1, and so on. It holds at most window batches (those from next to
// next+window-1): a later one is only noted, to be read again when its
// turn comes, so that memory stays bounded whatever the job's size and
// order of arrival. It needs no server: the reader feeds it.
type reorder struct {
	next     uint64                   // the next batch to release
	nextItem uint64                   // its first item
	window   uint64                   // how many batches from next it holds
	pending  map[uint64]*pendingBatch // batches held, by index
	left     map[uint64]bool          // batches seen beyond the window, left out
}

// newReorder returns a reorder buffer that holds up to window batches
// (at least 1), starting at batch 0, item 0.
func newReorder(window uint64) *reorder {
	return &reorder{window: max(window, 1), pending: map[uint64]*pendingBatch{}, left: map[uint64]bool{}}
}

// wants reports whether batch index is one to check and put: not
// released already, not held already (the first one put stays) and
// within the window. One beyond the window is noted as left out.
func (r *reorder) wants(index uint64) bool {
	if index < r.next || r.pending[index] != nil {
		return false
	}
	if index >= r.next+r.window {
		r.left[index] = true
		return false
	}
	return true
}

// put holds b, the checked batch index, for its turn. A batch released
// already or held already is ignored: the first one put stays.
func (r *reorder) put(index uint64, b *pendingBatch) {
	if index < r.next || r.pending[index] != nil {
		return
	}
	delete(r.left, index)
	r.pending[index] = b
}

// held reports whether batch index is held.
func (r *reorder) held(index uint64) bool { return r.pending[index] != nil }

// leftOut reports whether batch index was seen beyond the window and has
// not been put since: it is to be read again.
func (r *reorder) leftOut(index uint64) bool { return r.left[index] }

// forget drops the note that batch index was left out (it was read
// again, or is gone).
func (r *reorder) forget(index uint64) { delete(r.left, index) }

// pop releases the next batch, or returns nil when it is not held. The
// batch must start where the one before it ended: else pop returns an
// error and releases nothing more (the digest covers a batch's first
// item, so only a producer's error can cause it).
func (r *reorder) pop() (*pendingBatch, error) {
	b := r.pending[r.next]
	if b == nil {
		return nil, nil
	}
	delete(r.pending, r.next)
	if b.First != r.nextItem {
		return nil, fmt.Errorf("batch %d starts at item %d, want %d", b.Index, b.First, r.nextItem)
	}
	r.next++
	r.nextItem += uint64(len(b.Items))
	return b, nil
}

// skipTo moves the next batch to release on to index, a held batch, past
// the batches before it that will never come (a cancelled job's). It
// reports false, and moves nothing, when index is not held.
func (r *reorder) skipTo(index uint64) bool {
	b := r.pending[index]
	if b == nil {
		return false
	}
	for i := range r.pending {
		if i < index {
			delete(r.pending, i)
		}
	}
	r.next, r.nextItem = index, b.First
	return true
}

// len returns how many batches are held.
func (r *reorder) len() int { return len(r.pending) }

// pendingBatch is a checked results batch waiting for its turn, and the
// message it was decoded from.
type pendingBatch struct {
	*job.Batch
	data []byte
}

// recentBatches keeps the results messages that hold the last
// job.RepeatWindow items passed on, as received (one allocation each, no
// pointers inside), so that a Repeat item finds its first occurrence's
// outcome by decoding that message again. Repeats are rare; passing on a
// batch costs nothing more than keeping its message.
type recentBatches struct {
	bs []recentBatch // in order, consecutive
	// last is the batch decoded last for a repeat, kept for the next.
	last *job.Batch
}

type recentBatch struct {
	first uint64
	n     int
	data  []byte
}

// push adds b (the next batch) and forgets the batches that fall out of
// the window.
func (r *recentBatches) push(b *pendingBatch) {
	r.bs = append(r.bs, recentBatch{first: b.First, n: len(b.Items), data: b.data})
	drop := 0
	for drop < len(r.bs)-1 && r.bs[drop].first+uint64(r.bs[drop].n)+job.RepeatWindow <= b.First {
		drop++
	}
	if drop > 0 {
		n := copy(r.bs, r.bs[drop:])
		clear(r.bs[n:])
		r.bs = r.bs[:n]
	}
}

// outcome returns the outcome of item, or false when it is not held (a
// Repeat's target is never itself a Repeat).
func (r *recentBatches) outcome(item uint64) (job.Outcome, bool) {
	for i := len(r.bs) - 1; i >= 0; i-- {
		rb := r.bs[i]
		if item < rb.first {
			continue
		}
		if item-rb.first >= uint64(rb.n) {
			return job.Outcome{}, false
		}
		if r.last == nil || r.last.First != rb.first {
			b, err := job.DecodeAnyResults(rb.data)
			if err != nil {
				return job.Outcome{}, false
			}
			r.last = &b
		}
		it := &r.last.Items[item-rb.first]
		return it.Outcome, it.Kind == job.Known
	}
	return job.Outcome{}, false
}
