package producer

import (
	"hash/maphash"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// repeatWindow finds a puzzle given again within the last
// job.RepeatWindow items: a direct-mapped table of the puzzles' hashes
// (hash/maphash, seeded per window), each slot holding the hash and the
// index of the last item that hashed there, and a ring of the packed
// puzzles by item index, on which a match is confirmed. A slot is taken
// over by the next puzzle that hashes to it, so a repeat may go unnoticed
// (it is then solved again, or answered from the cache); a repeat found
// is always one. Memory stays bounded: the table and at most
// job.RepeatWindow packed puzzles.
type repeatWindow struct {
	seed maphash.Seed
	// small maps the hashes of a job's first mapItems puzzles to their
	// item + 1, so that a small job allocates little; past them, the
	// entries move to slots, repeatSlots of them.
	small map[uint64]uint64
	slots []repeatSlot
	// ring holds the puzzle of item i at i % job.RepeatWindow, in pages
	// of ringPage puzzles allocated as the job reaches them: a short job
	// takes little, and a long one never copies the ring to grow it.
	ring []*[ringPage][job.PackedLen]byte
}

// ringPage is how many puzzles a page of the ring holds (41 kB).
const ringPage = 1 << 10

// at returns the ring's place for item.
func (w *repeatWindow) at(item uint64) *[job.PackedLen]byte {
	r := item % job.RepeatWindow
	return &w.ring[r/ringPage][r%ringPage]
}

type repeatSlot struct {
	hash uint64
	item uint64 // item index + 1; 0 for an empty slot
}

// repeatSlots is the table's size: as many slots as the window has items;
// mapItems the puzzles kept in a map before the table is made.
const (
	repeatSlots = job.RepeatWindow
	mapItems    = 1024
)

// hash returns g's hash in w, which find and add take: a puzzle not
// found is added with the hash it was looked for with.
func (w *repeatWindow) hash(g *solver.Grid) uint64 {
	if w.seed == (maphash.Seed{}) {
		w.seed = maphash.MakeSeed()
	}
	return maphash.Bytes(w.seed, g[:])
}

// find returns how far back the puzzle g, of hash h, was added, if within
// the window of item (the index of the item g is).
func (w *repeatWindow) find(g *solver.Grid, h, item uint64) (back uint64, ok bool) {
	var s repeatSlot
	switch {
	case w.slots != nil:
		s = w.slots[h&(repeatSlots-1)]
	case w.small != nil:
		s = repeatSlot{hash: h, item: w.small[h]}
	default:
		return 0, false
	}
	if s.item == 0 || s.hash != h {
		return 0, false
	}
	back = item - (s.item - 1)
	if back > job.RepeatWindow || *w.at(s.item - 1) != job.Pack(g) {
		return 0, false
	}
	return back, true
}

// add adds the puzzle g, of hash h, of item (items come in increasing
// order).
func (w *repeatWindow) add(g *solver.Grid, h, item uint64) {
	switch {
	case w.slots != nil:
		w.slots[h&(repeatSlots-1)] = repeatSlot{hash: h, item: item + 1}
	case len(w.small) < mapItems:
		if w.small == nil {
			w.small = make(map[uint64]uint64)
		}
		w.small[h] = item + 1
	default:
		w.slots = make([]repeatSlot, repeatSlots)
		for sh, si := range w.small {
			w.slots[sh&(repeatSlots-1)] = repeatSlot{hash: sh, item: si}
		}
		w.small = nil
		w.slots[h&(repeatSlots-1)] = repeatSlot{hash: h, item: item + 1}
	}
	for p := int(item%job.RepeatWindow) / ringPage; p >= len(w.ring); { // items may skip pages (repeats, invalid lines)
		w.ring = append(w.ring, new([ringPage][job.PackedLen]byte))
	}
	*w.at(item) = job.Pack(g)
}
