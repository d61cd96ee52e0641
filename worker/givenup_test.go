package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestLostMaxDeliveriesAdvisory checks the sweep's backstop for a
// max-deliveries advisory published while no worker listened, on a
// private nats-server (the Debian one, 2.9, where it is lost): a job's
// only batch is delivered MaxDeliver times and never answered before any
// worker runs, and the server gives it up, leaving it in its lane. A
// worker started then finishes another job of the same lane, and its
// sweep moves the given-up batch to the dead-letter stream, reason
// max_deliver, saying that its advisory was lost; nothing of the job is
// left in the work stream, and 'dlq replay' of it gets the job done.
func TestLostMaxDeliveriesAdvisory(t *testing.T) {
	const ackWait = time.Second
	srv := testenv.NATSServer(t)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := testenv.Name("T")
	q, err := queue.Setup(ctx, js, queue.Options{Stream: name, DLQStream: name + "_DLQ", Prefix: strings.ToLower(name),
		Consumer: strings.ToLower(name), MaxDeliver: 2, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, q: &testenv.Queue{Queue: q, NC: nc, URL: srv.URL()},
		cache: cache.NewGuard(cache.NewMemory(0), cache.GuardOptions{Logger: quiet})}
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)

	// The advisory, which the test hears and no worker does.
	advisories := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+q.Opts.Stream+".*", advisories)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	lost := e.submit(puzzles[:5], 5) // one batch, in the default owner's small lane
	lane := e.lane(lost)
	c, err := q.LaneWork(ctx, lane)
	if err != nil {
		t.Fatal(err)
	}
	for delivered := uint64(0); delivered < 2; {
		b, err := c.Fetch(1, jetstream.FetchMaxWait(3*ackWait))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range b.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			delivered, got = md.NumDelivered, got+1 // never answered
		}
		if got == 0 {
			t.Fatalf("the batch was delivered %d times, then not again", delivered)
		}
	}
	// The server gives it up at a pull once its ack wait is over, and
	// says so to nobody but the test.
	heard := false
	for i := 0; i < 10 && !heard; i++ {
		time.Sleep(ackWait)
		b, err := c.FetchNoWait(1)
		if err != nil {
			t.Fatal(err)
		}
		for range b.Messages() {
			t.Fatal("the batch was delivered a third time")
		}
		select {
		case <-advisories:
			heard = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !heard {
		t.Fatal("no max-deliveries advisory after 10 ack waits")
	}
	if n, err := q.WorkLeft(ctx, lost, lane); err != nil || n != 1 {
		t.Fatalf("the given-up batch in the work stream: %d, %v; want it there", n, err)
	}

	// Another job of the lane, and a worker, which never heard the advisory.
	other := e.submit(puzzles[5:10], 5)
	var o observer
	e.run(e.worker(Options{Concurrency: 1, Observer: &o, NoService: true, NakDelays: []time.Duration{50 * time.Millisecond}}))
	rs, rec := e.follow(other, 30*time.Second)
	check(t, puzzles[5:10], rs)
	if rec.State != job.Finished {
		t.Fatalf("the other job: %+v", rec)
	}
	dls := e.waitDeadLetters(1)
	dl := dls[0]
	if len(dls) != 1 || dl.Reason != queue.ReasonMaxDeliver || dl.Job != lost || dl.Batch == nil || *dl.Batch != 0 ||
		dl.Subject != q.Opts.WorkSubject(lost, lane) || !strings.Contains(dl.Error, "advisory was lost") {
		t.Fatalf("dead letters %+v; want the given-up batch, saying its advisory was lost", dls)
	}
	if n, err := q.WorkLeft(ctx, lost, lane); err != nil || n != 0 {
		t.Errorf("the given-up batch still in the work stream: %d, %v", n, err)
	}

	// Replayed, it is done.
	if _, err := q.Replay(ctx, dl.Seq); err != nil {
		t.Fatal(err)
	}
	rs, rec = e.follow(lost, 30*time.Second)
	check(t, puzzles[:5], rs)
	if rec.State != job.Finished {
		t.Errorf("the replayed job: %+v", rec)
	}
}
