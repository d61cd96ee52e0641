package job

import (
	"math/bits"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// lifecycleCases are sequences of events on a job of 4 batches of 10
// lines: 'a'..'d' add the results of batch 0..3, 'p' marks it published,
// 'x' cancels it, 'f' fails it, 's' fails it if it is stale (a minute
// after its last heartbeat). want is the state at the end. Each event is
// the record's own transition (Publish, Cancel, Fail, FailStale): the
// ones the producer, the workers and the doors call.
var lifecycleCases = []struct {
	events string
	want   State
	done   int64
}{
	{"abcdp", Finished, 4},
	{"pabcd", Finished, 4},
	{"abpcd", Finished, 4},
	{"aabbpccdd", Finished, 4}, // redeliveries count once
	{"abc", Publishing, 3},
	{"pabc", Published, 3},
	{"abcpd", Finished, 4},
	{"abcad", Publishing, 4}, // not published: not finished
	{"abcd", Publishing, 4},
	{"abcapd", Finished, 4},
	{"abcpc", Published, 3},
	{"abccx", Cancelled, 3},
	{"abxcd", Cancelled, 4},  // batches in work when cancelled still count
	{"abxpcd", Cancelled, 4}, // a cancelled job is never finished
	{"pabcdx", Finished, 4},  // a finished job is not cancelled
	{"afcd", Failed, 1},      // a failed job counts nothing more
	{"abs", Failed, 2},       // a producer that stopped heartbeating
	{"abpcds", Finished, 4},  // a published job is never stale
	{"fp", Failed, 0},        // a failed job is never published
	{"xf", Cancelled, 0},     // nor a cancelled one failed
}

// play runs events on a new record and checks its invariants after each.
func play(t *testing.T, events string) Record {
	t.Helper()
	now := time.Now()
	r := NewRecord(NewID("alice"), Options{}, now)
	r.Lines, r.Batches = 40, 4
	for i, e := range []byte(events) {
		switch {
		case e >= 'a' && e <= 'd':
			r.AddResults(uint64(e-'a'), Counts{result.StatusUnique: 10}, now)
		case e == 'p':
			r.Publish(now)
		case e == 'x':
			r.Cancel(now)
		case e == 'f':
			r.Fail("the test failed it", now)
		case e == 's':
			if later := now.Add(StaleAfter + time.Second); r.Stale(later) {
				r.FailStale(later)
			}
		}
		var set int64
		for _, b := range r.Done {
			set += int64(bits.OnesCount8(b))
		}
		if set != r.DoneBatches || r.LinesDone() != 10*r.DoneBatches {
			t.Fatalf("after %q: %d batches marked, DoneBatches %d, %d lines done", events[:i+1], set, r.DoneBatches, r.LinesDone())
		}
		if (r.State == Finished) != (r.DoneBatches == r.Batches && r.Finished.After(time.Time{}) && r.State != Cancelled && r.State != Failed) {
			t.Fatalf("after %q: state %s with %d of %d batches done", events[:i+1], r.State, r.DoneBatches, r.Batches)
		}
	}
	return r
}

func TestLifecycle(t *testing.T) {
	for _, tc := range lifecycleCases {
		r := play(t, tc.events)
		if r.State != tc.want || r.DoneBatches != tc.done {
			t.Errorf("%q: state %s, %d batches done; want %s, %d", tc.events, r.State, r.DoneBatches, tc.want, tc.done)
		}
		if r.State.Ended() == r.State.Active() {
			t.Errorf("%q: state %s both active and ended, or neither", tc.events, r.State)
		}
	}
}

// FuzzLifecycle checks the record's invariants for any order of events:
// each batch is counted once, the counts sum to the lines of the batches
// done, and only a published job with every batch done is finished.
func FuzzLifecycle(f *testing.F) {
	for _, tc := range lifecycleCases {
		f.Add(tc.events)
	}
	f.Fuzz(func(t *testing.T, events string) {
		if len(events) > 64 {
			return
		}
		play(t, events)
	})
}
