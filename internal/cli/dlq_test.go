package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

type deadLetter = queue.DeadLetter

// dlqList returns the dead letters as dlq list --format jsonl gives them.
func dlqList(t *testing.T) []*deadLetter {
	t.Helper()
	code, out, stderr := run(t, context.Background(), "", "dlq", "list", "--format", "jsonl")
	if code != ExitOK {
		t.Fatalf("dlq list: exit %d: %s", code, stderr)
	}
	var dls []*deadLetter
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var dl deadLetter
		if err := dec.Decode(&dl); err != nil {
			t.Fatalf("dlq list: %v in %q", err, out)
		}
		dls = append(dls, &dl)
	}
	return dls
}

// waitDLQ waits until the dead-letter stream holds n messages.
func waitDLQ(t *testing.T, n int) []*deadLetter {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		dls := dlqList(t)
		if len(dls) == n {
			return dls
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters after 30s, want %d: %+v", len(dls), n, dls)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestDLQListAndReplay(t *testing.T) {
	e := newQueueEnv(t, "SUDOKU_QUEUE_MAX_DELIVER=3", "SUDOKU_QUEUE_BACKOFF=100ms", "SUDOKU_WORKER_CONCURRENCY=1")
	ctx := context.Background()

	if dls := dlqList(t); len(dls) != 0 {
		t.Fatalf("a new dead-letter stream holds %+v", dls)
	}
	code, _, stderr := run(t, ctx, "", "dlq", "list")
	if code != ExitOK || !strings.Contains(stderr, "0 dead letters in ") {
		t.Fatalf("dlq list of nothing: exit %d, %q", code, stderr)
	}

	// A job whose results cannot be stored: the results stream is sealed
	// (by hand, after the worker set it up), so every delivery of its
	// batch fails until that is fixed.
	e.startWorker()
	q := e.queue()
	rs, err := q.JS.Stream(ctx, q.Opts.ResultsStream())
	if err != nil {
		t.Fatal(err)
	}
	sealed := rs.CachedInfo().Config
	sealed.Sealed = true
	if _, err := q.JS.UpdateStream(ctx, sealed); err != nil {
		t.Fatal(err)
	}
	lines := puzzles(t, 10)
	file := writeFile(t, lines)
	p := producer.New(q, nil, producer.Options{Logger: slog.New(slog.DiscardHandler)})
	sub, err := p.Submit(ctx, input.NewReader(strings.NewReader(strings.Join(lines, "\n"))))
	if err != nil {
		t.Fatal(err)
	}
	id := sub.ID
	// And a body that is not a batch at all.
	nc := testenv.NATS(t)
	rec, _, err := job.NewStore(q.JS, q.Jobs).Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	bulk := q.Opts.WorkSubject(id, queue.LaneOf(&rec))
	garbageSubject := q.Opts.WorkSubject("stray.0", queue.Lane{Owner: "stray", Priority: job.PriorityNormal, Slot: queue.SlotSmall})
	if err := nc.Publish(garbageSubject, []byte("not a batch")); err != nil {
		t.Fatal(err)
	}

	// Wait for both to be dead-lettered, then fix the cause: a stream
	// cannot be unsealed, so remove it; every command sets it up again.
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; n < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters after 30s, want 2", n)
		}
		time.Sleep(50 * time.Millisecond)
		n = 0
		if err := q.EachDeadLetter(ctx, func(*queue.DeadLetter) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.JS.DeleteStream(ctx, q.Opts.ResultsStream()); err != nil {
		t.Fatal(err)
	}
	dls := waitDLQ(t, 2)
	var poison, garbage deadLetter
	for _, dl := range dls {
		switch dl.Reason {
		case "max_deliver":
			poison = *dl
		case "undecodable":
			garbage = *dl
		}
	}
	if poison.Seq == 0 || garbage.Seq == 0 {
		t.Fatalf("want one max_deliver and one undecodable dead letter: %+v", dls)
	}
	if poison.Subject != bulk || poison.Deliveries != 3 || poison.Job != id || poison.Batch == nil || *poison.Batch != 0 ||
		poison.Puzzles != 10 || !strings.Contains(poison.Error, "sealed") || poison.MsgID != id+".0" || poison.BodyError != "" {
		t.Errorf("poison batch: %+v", poison)
	}
	if garbage.Subject != garbageSubject || garbage.Deliveries != 1 || garbage.Job != "" || garbage.Bytes != 11 ||
		!strings.Contains(garbage.Error, "undecodable message") || garbage.BodyError == "" {
		t.Errorf("garbage: %+v", garbage)
	}
	if time.Since(poison.Time) > time.Minute || time.Since(poison.Time) < 0 {
		t.Errorf("dead-lettered at %s", poison.Time)
	}

	// The table shows the same.
	code, out, stderr := run(t, ctx, "", "dlq", "list")
	if code != ExitOK || !strings.Contains(stderr, "2 dead letters in ") {
		t.Fatalf("dlq list: exit %d: %s", code, stderr)
	}
	t.Logf("dlq list:\n%s", out)
	rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "SEQ ") {
		t.Fatalf("dlq list:\n%s", out)
	}
	for _, want := range [][]string{
		{strconv.FormatUint(poison.Seq, 10), "max_deliver", " 3 ", bulk, id, " 0 ", " 10 ", "sealed"},
		{strconv.FormatUint(garbage.Seq, 10), "undecodable", " 1 ", garbageSubject, " - ", "undecodable message"},
	} {
		found := false
		for _, row := range rows[1:] {
			if strings.HasPrefix(row, want[0]+" ") {
				found = true
				for _, s := range want[1:] {
					if !strings.Contains(row, s) {
						t.Errorf("row %q lacks %q", row, s)
					}
				}
			}
		}
		if !found {
			t.Errorf("no row for seq %s:\n%s", want[0], out)
		}
	}

	// The job waits for its batch.
	jctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	code, _, _ = run(t, jctx, "", "job", "wait", id)
	cancel()
	if code != ExitInterrupted {
		t.Fatalf("job wait with its batch dead-lettered: exit %d, want 130", code)
	}

	// Replay: the job completes.
	code, out, stderr = run(t, ctx, "", "dlq", "replay", strconv.FormatUint(poison.Seq, 10))
	if code != ExitOK || !strings.Contains(out, "replayed to "+bulk+" (job "+id+" batch 0, 10 puzzles)") {
		t.Fatalf("dlq replay: exit %d, out %q, stderr %q", code, out, stderr)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	code, out, stderr = run(t, wctx, "", "job", "wait", id)
	if code != ExitOK {
		t.Fatalf("job wait after the replay: exit %d: %s", code, stderr)
	}
	if out != localOut(t, file) {
		t.Fatal("results after the replay differ from solve --local")
	}
	if dls := dlqList(t); len(dls) != 1 || dls[0].Seq != garbage.Seq {
		t.Fatalf("after the replay: %+v, want the garbage only", dls)
	}

	// Replaying it again: no such dead letter any more.
	code, _, stderr = run(t, ctx, "", "dlq", "replay", strconv.FormatUint(poison.Seq, 10))
	if code != ExitFailure || !strings.Contains(stderr, "no such dead letter") {
		t.Fatalf("second replay: exit %d, %q", code, stderr)
	}
	// --all refuses the garbage, which would come straight back: it stays.
	code, out, stderr = run(t, ctx, "", "dlq", "replay", "--all")
	if code != ExitFailure || out != "" || !strings.Contains(stderr, "the body is not a work batch: job: undecodable message at byte 0: the body is text") ||
		!strings.Contains(stderr, "not replayed") || !strings.Contains(stderr, "0 replayed, 1 failed") {
		t.Fatalf("replay --all: exit %d, out %q, stderr %q", code, out, stderr)
	}
	if dls := dlqList(t); len(dls) != 1 || dls[0].Seq != garbage.Seq {
		t.Fatalf("after replay --all: %+v, want the garbage as it was", dls)
	}
}

func TestDLQReplayUsage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"nothing", []string{"dlq", "replay"}, "or --all"},
		{"both", []string{"dlq", "replay", "--all", "3"}, "or --all"},
		{"not a number", []string{"dlq", "replay", "x"}, `"x" is not a sequence number`},
		{"zero", []string{"dlq", "replay", "0"}, `"0" is not a sequence number`},
		{"bad format", []string{"dlq", "list", "--format", "xml"}, `--format "xml"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, context.Background(), "", tc.args...)
			if code != ExitUsage || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.stderr)
			}
		})
	}
}
