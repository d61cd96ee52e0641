package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestMessageSizeLimit checks queue.max_message_bytes on both sides: the
// producer cuts batches to fit it (a job still completes, in more
// messages), and the stream, which has it as its maximum message size,
// refuses a bigger message from any other publisher with a clear error.
func TestMessageSizeLimit(t *testing.T) {
	ns, rs := testenv.NATSServer(t), testenv.RedisServer(t)
	nc, err := nats.Connect(ns.URL(), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	name := testenv.Name("e2elim")
	const limit = 2048
	e := baseEnv(queueEnv(name)...).with(
		"SUDOKU_NATS_URL="+ns.URL(),
		"SUDOKU_REDIS_ADDRS="+rs.Addr,
		"SUDOKU_QUEUE_BATCH_SIZE=256",
		fmt.Sprintf("SUDOKU_QUEUE_MAX_MESSAGE_BYTES=%d", limit),
	)

	start(t, "worker", e, "worker")
	const n = 300
	file := writeFile(t, manyPuzzles(t, n, "17_clue_200.txt"))
	code, out, stderr := run(t, time.Minute, e, "submit", "--wait", file)
	if code != 0 {
		t.Fatalf("submit --wait: exit %d: %s", code, stderr)
	}
	if out != localOut(t, file) {
		t.Error("results differ from solve --local")
	}
	// Under queue.batch_size alone the job is 2 messages; the limit cuts
	// it into messages of at most 2 kB, each puzzle taking at least its
	// 41-byte packed form.
	var batches int
	if i := strings.Index(stderr, "queued in "); i >= 0 {
		fmt.Sscanf(stderr[i:], "queued in %d batches", &batches)
	}
	if min := n * 41 / limit; batches < min || batches <= 2 {
		t.Errorf("%d batches for %d puzzles under a %d-byte limit, want at least %d; stderr:\n%s", batches, n, limit, min, stderr)
	}

	// Another publisher's bigger message is refused by the stream.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := e.config(t)
	q, err := queue.Setup(ctx, js, app.QueueOptions(cfg.Queue, cfg.Job.ResultTTL))
	if err != nil {
		t.Fatal(err)
	}
	_, err = js.Publish(ctx, q.Opts.WorkSubject(job.NewID("alice"), queue.Lane{Owner: "alice", Priority: job.PriorityNormal, Slot: queue.SlotSmall}), bytes.Repeat([]byte{'x'}, limit+1))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamMessageExceedsMaximum {
		t.Fatalf("publish of %d bytes to a stream with a %d-byte maximum: %v, want error code %d",
			limit+1, limit, err, jetstream.JSErrCodeStreamMessageExceedsMaximum)
	}
	t.Logf("refused: %v", err)
	if _, err := js.Publish(ctx, q.Opts.WorkSubject(job.NewID("alice"), queue.Lane{Owner: "alice", Priority: job.PriorityNormal, Slot: queue.SlotSmall}), bytes.Repeat([]byte{'x'}, limit)); err != nil &&
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		t.Errorf("a message of exactly the maximum was refused: %v", err)
	}
}
