package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// workSubjects are subjects of the work stream and what WorkJob makes of
// them: the job and the lane, or nothing for a subject of no lane.
var workSubjects = []struct {
	subject string
	id      string
	lane    queue.Lane
}{
	{"sudoku.jobs.alice.normal.s.06h3abc", "alice.06h3abc", queue.Lane{Owner: "alice", Priority: "normal", Slot: "s"}},
	{"sudoku.jobs.producer-bob.high.b2.0v", "producer-bob.0v", queue.Lane{Owner: "producer-bob", Priority: "high", Slot: "b2"}},
	{"sudoku.jobs.A_b-9.low.b0.1", "A_b-9.1", queue.Lane{Owner: "A_b-9", Priority: "low", Slot: "b0"}},
	{"sudoku.jobs.bulk.06h3abc", "", queue.Lane{}},                                     // the old layout
	{"sudoku.jobs.alice.urgent.s.06h3abc", "", queue.Lane{}},                           // no such priority
	{"sudoku.jobs.alice.normal.b3.06h3abc", "", queue.Lane{}},                          // no such slot
	{"sudoku.jobs.alice.normal.b01.06h3abc", "", queue.Lane{}},                         // not a slot's name
	{"sudoku.jobs.alice.normal.s.06h3ABC", "", queue.Lane{}},                           // not a serial
	{"sudoku.jobs.alice.normal.s.06h3abc.x", "", queue.Lane{}},                         // a token too many
	{"sudoku.jobs.al$ce.normal.s.06h3abc", "", queue.Lane{}},                           // not an owner
	{"other.jobs.alice.normal.s.06h3abc", "", queue.Lane{}},                            // another prefix
	{"sudoku.results.alice.normal.s.06h3abc", "", queue.Lane{}},                        // not work
	{"sudoku.jobs..normal.s.06h3abc", "", queue.Lane{}},                                // no owner
	{"sudoku.jobs.alice.normal.s.", "", queue.Lane{}},                                  // no serial
	{"sudoku.jobs.alice.normal.s.0123456789abcdefghijklmnopqrstuv0", "", queue.Lane{}}, // serial too long
}

func TestWorkJob(t *testing.T) {
	o := queue.Options{}
	for _, tc := range workSubjects {
		id, lane, ok := o.WorkJob(tc.subject)
		if ok != (tc.id != "") || id != tc.id || lane != tc.lane {
			t.Errorf("WorkJob(%q) = %q, %v, %v; want %q, %v", tc.subject, id, lane, ok, tc.id, tc.lane)
			continue
		}
		if ok {
			if back := o.WorkSubject(id, lane); back != tc.subject {
				t.Errorf("WorkSubject(%q, %v) = %q, want %q", id, lane, back, tc.subject)
			}
			if f := o.LaneFilter(lane); f != tc.subject[:len(tc.subject)-len(tc.id)+len(lane.Owner)+1]+"*" {
				t.Errorf("LaneFilter(%v) = %q does not match %q", lane, f, tc.subject)
			}
		}
	}
}

// FuzzWorkJob checks that whatever WorkJob takes for a job's work is
// what WorkSubject makes of it, and names a valid job and lane.
func FuzzWorkJob(f *testing.F) {
	for _, tc := range workSubjects {
		f.Add(tc.subject)
	}
	o := queue.Options{}
	f.Fuzz(func(t *testing.T, subject string) {
		id, lane, ok := o.WorkJob(subject)
		if !ok {
			return
		}
		if !job.ValidID(id) || !lane.Valid() || job.OwnerOf(id) != lane.Owner {
			t.Fatalf("WorkJob(%q) = %q, %v: not a valid job of the lane's owner", subject, id, lane)
		}
		if back := o.WorkSubject(id, lane); back != subject {
			t.Fatalf("WorkSubject(WorkJob(%q)) = %q", subject, back)
		}
	})
}

// TestDropIdleLane checks that a lane's consumer stays while a message
// of the lane is in the work stream, and goes once none is.
func TestDropIdleLane(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			q := testenv.NewQueue(t, server, queue.Options{})
			lane := queue.Lane{Owner: "alice", Priority: job.PriorityLow, Slot: queue.SlotSmall}
			if _, err := q.JS.Publish(ctx, q.Opts.WorkSubject("alice.0a", lane), []byte("w")); err != nil {
				t.Fatal(err)
			}
			c, err := q.LaneWork(ctx, lane)
			if err != nil {
				t.Fatal(err)
			}
			if dropped, err := q.DropIdleLane(ctx, lane); err != nil || dropped {
				t.Fatalf("DropIdleLane with a message waiting = %v, %v; want it kept", dropped, err)
			}
			b, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range b.Messages() {
				if dropped, err := q.DropIdleLane(ctx, lane); err != nil || dropped {
					t.Fatalf("DropIdleLane with a message in work = %v, %v; want it kept", dropped, err)
				}
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if dropped, err := q.DropIdleLane(ctx, lane); err != nil || !dropped {
				t.Fatalf("DropIdleLane of an empty lane = %v, %v; want it dropped", dropped, err)
			}
			if _, err := q.JS.Consumer(ctx, q.Opts.Stream, q.Opts.LaneConsumer(lane)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Errorf("the lane's consumer after DropIdleLane: %v, want none", err)
			}
		})
	}
}

// TestBigSlotFor checks that a large job goes to the big slot of its
// owner and priority with the fewest messages waiting, whatever the other
// owners' and priorities' lanes hold.
func TestBigSlotFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q := testenv.NewQueue(t, "embedded", queue.Options{})
	put := func(owner string, p job.Priority, slot string, n int) {
		t.Helper()
		lane := queue.Lane{Owner: owner, Priority: p, Slot: slot}
		for i := range n {
			id := owner + ".0" + string(rune('a'+i))
			if _, err := q.JS.Publish(ctx, q.Opts.WorkSubject(id, lane), []byte("w")); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("alice", job.PriorityNormal, queue.BigSlot(0), 3)
	put("alice", job.PriorityNormal, queue.BigSlot(1), 1)
	put("alice", job.PriorityNormal, queue.BigSlot(2), 2)
	put("alice", job.PriorityNormal, queue.SlotSmall, 9) // small jobs do not count
	put("alice", job.PriorityHigh, queue.BigSlot(1), 9)  // nor other priorities
	put("bob", job.PriorityNormal, queue.BigSlot(1), 9)  // nor other owners
	if got := q.BigSlotFor(ctx, "alice", job.PriorityNormal); got != queue.BigSlot(1) {
		t.Errorf("BigSlotFor(alice, normal) = %s, want b1", got)
	}
	if got := q.BigSlotFor(ctx, "carol", job.PriorityNormal); got != queue.BigSlot(0) {
		t.Errorf("BigSlotFor(carol, normal) = %s, want b0 (all empty)", got)
	}
}
