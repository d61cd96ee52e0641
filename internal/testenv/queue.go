package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/embedded"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// Servers are the NATS servers a JetStream test runs on: the embedded one
// (the nats-server module in go.mod) and the shared one (Debian's, older).
var Servers = []string{"embedded", "shared"}

// Queue is a set-up queue on a NATS server, with names of its own.
type Queue struct {
	*queue.Queue
	NC *nats.Conn
	// URL is where other processes connect ("" for an embedded server
	// that does not listen).
	URL string
}

// NewQueue sets up a queue with unique names on server ("embedded": a new
// embedded server, in-process; "shared": the shared NATS, skipping or
// failing as Unavailable says when it is down). o's names are filled in;
// its other settings are kept. Everything is removed when the test ends.
func NewQueue(t testing.TB, server string, o queue.Options) *Queue {
	t.Helper()
	var nc *nats.Conn
	url := ""
	switch server {
	case "embedded":
		srv, err := embedded.Start(embedded.Options{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		if nc, err = srv.Connect(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		o.Memory = true
	case "shared":
		nc, url = NATS(t), NATSURL()
	default:
		t.Fatalf("testenv: no server %q", server)
	}
	name := Name("T")
	o.Stream, o.DLQStream = name, name+"_DLQ"
	o.Prefix, o.Consumer = strings.ToLower(name), strings.ToLower(name)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := queue.Setup(ctx, js, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Delete(ctx)
	})
	return &Queue{Queue: q, NC: nc, URL: url}
}

// Env returns the environment variables that point a sudoku process at
// q's server and names.
func (q *Queue) Env() []string {
	o := q.Opts
	return []string{
		"SUDOKU_NATS_URL=" + q.URL,
		"SUDOKU_QUEUE_STREAM=" + o.Stream,
		"SUDOKU_QUEUE_DLQ_STREAM=" + o.DLQStream,
		"SUDOKU_QUEUE_SUBJECT_PREFIX=" + o.Prefix,
		"SUDOKU_QUEUE_CONSUMER=" + o.Consumer,
	}
}

// MemJob stores in q the record of a new job of owner with the given
// number of batches of 10 lines, in state st (Publishing, Published,
// Finished, Cancelled or Failed), its first done batches counted: the
// record tests on the in-memory seam (queue.InMemory) start from it.
func MemJob(t testing.TB, q *queue.Queue, owner string, batches, done int64, st job.State) job.Record {
	t.Helper()
	now := time.Now()
	rec := job.NewRecord(job.NewID(owner), job.Options{}, now)
	rec.Lines, rec.Queued, rec.Batches = 10*batches, 10*batches, batches
	rec.Heartbeat = now.UTC()
	for i := range done {
		rec.AddResults(uint64(i), job.Counts{result.StatusUnique: 10}, now)
	}
	switch st {
	case job.Published, job.Finished:
		rec.Publish(now)
	case job.Cancelled:
		rec.Cancel(now)
	case job.Failed:
		rec.Fail("the test failed it", now)
	}
	if rec.State != st {
		t.Fatalf("MemJob: made a %s job, want %s", rec.State, st)
	}
	if _, err := q.Store().Create(context.Background(), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}
