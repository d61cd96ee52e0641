package producer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// reorderOp is one thing the reader does with a reorder buffer.
type reorderOp struct {
	do    string // "offer" (wants, then put), "fetch" (read by subject: forget, then put) or "skip" (skipTo)
	index uint64
	first uint64 // the batch's first item
	n     int    // its item count (default 3)
}

func offer(index, first uint64) reorderOp { return reorderOp{do: "offer", index: index, first: first} }
func fetch(index, first uint64) reorderOp { return reorderOp{do: "fetch", index: index, first: first} }
func skip(index uint64) reorderOp         { return reorderOp{do: "skip", index: index} }

// testBatch returns batch index of n items from item first.
func testBatch(index, first uint64, n int) *pendingBatch {
	b := &job.Batch{Job: "a.j", Index: index, First: first, Items: make([]job.Item, n)}
	return &pendingBatch{b, nil}
}

// TestReorder checks the reorder buffer: batches in any order are
// released in input order, each once; a duplicate is not checked again
// and does not replace the first; a gap holds back the batches after it;
// a batch beyond the window is left out, to read again, so that at most
// window batches are held; a batch that does not start where the one
// before ended stops it; a cancelled job's reader skips the batches that
// will never come.
func TestReorder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window uint64
		ops    []reorderOp
		// What must come of them: the batches wants let through to be
		// checked, the batches released, in order, the next one, the
		// batches held and left out at the end, and the error of pop.
		checked  []uint64
		released []uint64
		next     uint64
		held     int
		left     []uint64
		err      string
	}{
		{name: "in order", window: 4, ops: []reorderOp{offer(0, 0), offer(1, 3), offer(2, 6)},
			checked: []uint64{0, 1, 2}, released: []uint64{0, 1, 2}, next: 3},
		{name: "reversed", window: 4, ops: []reorderOp{offer(2, 6), offer(1, 3), offer(0, 0)},
			checked: []uint64{2, 1, 0}, released: []uint64{0, 1, 2}, next: 3},
		{name: "out of order", window: 4, ops: []reorderOp{offer(1, 3), offer(3, 9), offer(0, 0), offer(2, 6)},
			checked: []uint64{1, 3, 0, 2}, released: []uint64{0, 1, 2, 3}, next: 4},
		{name: "a duplicate of a batch held is not checked, the first stays", window: 4,
			ops:     []reorderOp{offer(1, 3), offer(1, 99), offer(0, 0)},
			checked: []uint64{1, 0}, released: []uint64{0, 1}, next: 2},
		{name: "a duplicate of a batch released is not checked", window: 4, ops: []reorderOp{offer(0, 0), offer(0, 99)},
			checked: []uint64{0}, released: []uint64{0}, next: 1},
		{name: "read again by subject, held or released: ignored", window: 4,
			ops:     []reorderOp{offer(0, 0), offer(2, 6), fetch(0, 99), fetch(2, 99), offer(1, 3)},
			checked: []uint64{0, 2, 1}, released: []uint64{0, 1, 2}, next: 3},
		{name: "a gap holds back the batches after it", window: 4, ops: []reorderOp{offer(0, 0), offer(2, 6), offer(3, 9)},
			checked: []uint64{0, 2, 3}, released: []uint64{0}, next: 1, held: 2},
		{name: "beyond the window: left out, not held", window: 2,
			ops:     []reorderOp{offer(3, 9), offer(2, 6), offer(1, 3), offer(0, 0)},
			checked: []uint64{1, 0}, released: []uint64{0, 1}, next: 2, left: []uint64{2, 3}},
		{name: "left out, then read again when its turn comes", window: 2,
			ops:     []reorderOp{offer(3, 9), offer(2, 6), offer(1, 3), offer(0, 0), fetch(2, 6), fetch(3, 9)},
			checked: []uint64{1, 0}, released: []uint64{0, 1, 2, 3}, next: 4},
		{name: "left out, then offered again within the window", window: 1,
			ops:     []reorderOp{offer(1, 3), offer(0, 0), offer(1, 3)},
			checked: []uint64{0, 1}, released: []uint64{0, 1}, next: 2},
		{name: "the window moves on with the batches released", window: 2,
			ops:     []reorderOp{offer(0, 0), offer(1, 3), offer(2, 6), offer(3, 9)},
			checked: []uint64{0, 1, 2, 3}, released: []uint64{0, 1, 2, 3}, next: 4},
		{name: "a batch that does not start where the one before ended", window: 4,
			ops:     []reorderOp{offer(0, 0), offer(1, 4), offer(2, 7)},
			checked: []uint64{0, 1, 2}, released: []uint64{0}, next: 1, held: 1, err: "batch 1 starts at item 4, want 3"},
		{name: "a first batch that does not start at item 0", window: 4, ops: []reorderOp{offer(0, 1)},
			checked: []uint64{0}, err: "batch 0 starts at item 1, want 0"},
		{name: "cancelled: skip past the batches that never come", window: 8,
			ops:     []reorderOp{offer(3, 9), offer(2, 6), skip(2)},
			checked: []uint64{3, 2}, released: []uint64{2, 3}, next: 4},
		{name: "cancelled: a skip to a batch not held moves nothing", window: 8, ops: []reorderOp{offer(2, 6), skip(1)},
			checked: []uint64{2}, held: 1},
		{name: "cancelled: the batches skipped are dropped, and not wanted after", window: 8,
			ops:     []reorderOp{offer(1, 3), offer(3, 9), skip(3), offer(1, 3)},
			checked: []uint64{1, 3}, released: []uint64{3}, next: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReorder(tc.window)
			var checked, released []uint64
			var popErr error
			for _, op := range tc.ops {
				n := op.n
				if n == 0 {
					n = 3
				}
				switch op.do {
				case "offer":
					if r.wants(op.index) {
						checked = append(checked, op.index)
						r.put(op.index, testBatch(op.index, op.first, n))
					}
				case "fetch":
					r.forget(op.index)
					r.put(op.index, testBatch(op.index, op.first, n))
				case "skip":
					if moved := r.skipTo(op.index); moved && r.next != op.index {
						t.Fatalf("skipTo(%d) = true, next %d", op.index, r.next)
					}
				}
				for popErr == nil {
					b, err := r.pop()
					if popErr = err; b == nil {
						break
					}
					released = append(released, b.Index)
				}
				if op.do == "offer" {
					checkBounds(t, r)
				}
			}
			var left []uint64
			for i := range r.left {
				left = append(left, i)
			}
			slices.Sort(left)
			switch {
			case !slices.Equal(checked, tc.checked):
				t.Errorf("checked %v, want %v", checked, tc.checked)
			case !slices.Equal(released, tc.released):
				t.Errorf("released %v, want %v", released, tc.released)
			case r.next != tc.next || r.len() != tc.held || !slices.Equal(left, tc.left):
				t.Errorf("next %d, %d held, left out %v; want %d, %d, %v", r.next, r.len(), left, tc.next, tc.held, tc.left)
			case tc.err == "" && popErr != nil, tc.err != "" && (popErr == nil || !strings.Contains(popErr.Error(), tc.err)):
				t.Errorf("pop: %v, want %q", popErr, tc.err)
			}
		})
	}
}

// checkBounds fails unless r holds at most its window of batches, all
// from next on.
func checkBounds(t *testing.T, r *reorder) {
	t.Helper()
	if uint64(r.len()) > r.window {
		t.Fatalf("%d batches held, window %d", r.len(), r.window)
	}
	for i := range r.pending {
		if i < r.next || i >= r.next+r.window {
			t.Fatalf("batch %d held, next %d, window %d", i, r.next, r.window)
		}
	}
}

// TestReorderShuffled feeds a reorder buffer, as the reader does, the
// batches of jobs in random orders with duplicates, reading the next
// batch again by subject when it is left out: every batch is released
// once, in order, and the window is never exceeded.
func TestReorderShuffled(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	for round := range 200 {
		batches := 1 + rng.IntN(60)
		window := uint64(1 + rng.IntN(10))
		sizes := make([]int, batches)
		firsts := make([]uint64, batches)
		for i, f := 0, uint64(0); i < batches; i++ {
			sizes[i], firsts[i] = 1+rng.IntN(5), f
			f += uint64(sizes[i])
		}
		// Each batch arrives once or twice, in random order.
		var arrivals []int
		for i := range batches {
			arrivals = append(arrivals, i)
			if rng.IntN(4) == 0 {
				arrivals = append(arrivals, i)
			}
		}
		rng.Shuffle(len(arrivals), func(i, j int) { arrivals[i], arrivals[j] = arrivals[j], arrivals[i] })
		r := newReorder(window)
		var released []uint64
		drain := func() {
			for {
				b, err := r.pop()
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if b == nil {
					return
				}
				released = append(released, b.Index)
			}
		}
		for _, i := range arrivals {
			if r.wants(uint64(i)) {
				r.put(uint64(i), testBatch(uint64(i), firsts[i], sizes[i]))
			}
			drain()
			checkBounds(t, r)
		}
		// Then the reader reads by subject what was left out.
		for steps := 0; r.next < uint64(batches) && steps < batches; steps++ {
			if !r.leftOut(r.next) {
				t.Fatalf("round %d: batch %d is neither released nor left out", round, r.next)
			}
			r.forget(r.next)
			r.put(r.next, testBatch(r.next, firsts[r.next], sizes[r.next]))
			drain()
		}
		want := make([]uint64, batches)
		for i := range want {
			want[i] = uint64(i)
		}
		if !slices.Equal(released, want) || r.len() != 0 || len(r.left) != 0 {
			t.Fatalf("round %d (window %d): released %v, %d held, %d left out", round, window, released, r.len(), len(r.left))
		}
	}
}

// TestDrainRepeats checks what the reader passes on of the batches
// released in order, without a server: a Repeat item takes the outcome
// of the item it repeats, from an earlier batch or its own, not counted
// as cached; a Repeat of an item the reader does not hold stops it.
func TestDrainRepeats(t *testing.T) {
	invalid := job.Outcome{Status: result.StatusInvalid, Text: "x", Error: "not a puzzle", Cached: true}
	known := func(line int) job.Item { return job.Item{Line: line, Kind: job.Known, Outcome: invalid} }
	repeat := func(line int, back uint64) job.Item { return job.Item{Line: line, Kind: job.Repeat, Back: back} }
	batch := func(index, first uint64, items ...job.Item) *pendingBatch {
		b := &job.Batch{Job: "a.j", Index: index, First: first, Items: items}
		return &pendingBatch{b, b.AppendResults(nil)}
	}
	for _, tc := range []struct {
		name    string
		batches []*pendingBatch
		lines   []int
		err     string
	}{
		{name: "repeats within a batch and across batches", batches: []*pendingBatch{
			batch(0, 0, known(1), repeat(2, 1)),
			batch(1, 2, repeat(3, 2), known(4)),
		}, lines: []int{1, 2, 3, 4}},
		{name: "a repeat of an item not held", batches: []*pendingBatch{
			batch(0, 0, known(1)),
			batch(1, 1, repeat(2, 1)),
		}, lines: []int{1}, err: "line 2 repeats an item the reader does not have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []result.Result
			f := &follower{id: "j", order: newReorder(8),
				out: func(r result.Result) error { got = append(got, r); return nil }}
			var err error
			for i, b := range tc.batches {
				f.order.put(b.Index, b)
				if tc.err != "" && i == 1 {
					f.recent = recentBatches{} // the reader lost the item repeated
				}
				if err = f.drain(); err != nil {
					break
				}
			}
			var lines []int
			for _, r := range got {
				lines = append(lines, r.Line)
				if r.Cached && r.Line != 1 && r.Line != 4 {
					t.Errorf("line %d: a repeat passed on as cached", r.Line)
				}
				if r.Status != invalid.Status {
					t.Errorf("line %d: status %s", r.Line, r.Status)
				}
			}
			if !slices.Equal(lines, tc.lines) {
				t.Errorf("lines %v, want %v", lines, tc.lines)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("drain: %v, want %q", err, tc.err)
			}
		})
	}
}
