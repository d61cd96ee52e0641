package reliability

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// dlq returns the dead letters, as `sudoku dlq list --format jsonl` shows
// them.
func (s *sys) dlq() []queue.DeadLetter {
	s.t.Helper()
	out, _ := s.mustRun(cli.ExitOK, "dlq", "list", "--format", "jsonl")
	var dls []queue.DeadLetter
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var dl queue.DeadLetter
		if err := dec.Decode(&dl); err != nil {
			s.t.Fatalf("dlq list: %v in %q", err, out)
		}
		dls = append(dls, dl)
	}
	return dls
}

// waitDLQ waits until the dead-letter stream holds n messages, and returns
// them as `sudoku dlq list` shows them; after d it fails the test with
// what it holds.
func (s *sys) waitDLQ(n int, d time.Duration) []queue.DeadLetter {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		str, err := s.q.JS.Stream(ctx, s.q.Opts.DLQStream)
		cancel()
		if err == nil && str.CachedInfo().State.Msgs >= uint64(n) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	dls := s.dlq()
	if len(dls) != n {
		reasons := map[string]int{}
		for _, dl := range dls {
			reasons[dl.Reason]++
		}
		s.t.Fatalf("%d dead letters after %v, want %d; by reason: %v", len(dls), d, n, reasons)
	}
	return dls
}

// dlqRow returns the row of `sudoku dlq list`'s table for the dead
// letter seq, or "".
func dlqRow(table string, seq uint64) string {
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, strconv.FormatUint(seq, 10)+" ") {
			return l
		}
	}
	return ""
}

// TestPoisonBatch sends a batch that fails on every delivery (its job's
// manifest in the jobs bucket is not a manifest, so no worker can check
// the batch against it) next to a healthy job: the healthy job completes;
// the poison batch is delivered MaxDeliver times, lands in the
// dead-letter stream with its reason, and `dlq list` shows it; once the
// cause is fixed, `dlq replay` puts it back and its job completes too.
func TestPoisonBatch(t *testing.T) {
	t.Parallel()
	s := newSys(t, options{env: []string{"SUDOKU_QUEUE_MAX_DELIVER=3", "SUDOKU_QUEUE_BACKOFF=100ms"}})
	ctx := context.Background()
	poisonFile, poisonPuzzles := genFile(t, clue17, 15, 7) // one batch
	poisonID := s.submit(poisonFile)
	key := job.ManifestKey(poisonID, 0)
	manifest, err := s.q.Jobs.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	good := manifest.Value()
	if _, err := s.q.Jobs.Put(ctx, key, []byte("not a manifest")); err != nil {
		t.Fatal(err)
	}
	file, puzzles := genFile(t, clue17, 2000, 8)
	w := s.startWorker("worker-0")
	out, _ := s.mustRun(cli.ExitOK, "submit", "--wait", file)
	checkSolutions(t, puzzles, out)

	dl := s.waitDLQ(1, 30*time.Second)[0]
	if dl.Reason != queue.ReasonMaxDeliver || dl.Deliveries != 3 || dl.Job != poisonID || dl.Batch == nil || *dl.Batch != 0 ||
		dl.Puzzles != 15 || dl.Subject != s.q.Opts.WorkSubject(poisonID, s.lane(poisonID)) || !strings.Contains(dl.Error, "manifest") {
		t.Fatalf("dead letter %+v", dl)
	}
	table, _ := s.mustRun(cli.ExitOK, "dlq", "list")
	t.Logf("sudoku dlq list:\n%s", table)
	if row := dlqRow(table, dl.Seq); !strings.Contains(row, "max_deliver") || !strings.Contains(row, poisonID) {
		t.Fatalf("dlq list does not show it:\n%s", table)
	}
	if st := s.status(poisonID); st.Done != 0 || st.State != job.Published {
		t.Fatalf("the poison job: %+v", st)
	}

	if _, err := s.q.Jobs.Put(ctx, key, good); err != nil {
		t.Fatal(err)
	}
	out, _ = s.mustRun(cli.ExitOK, "dlq", "replay", strconv.FormatUint(dl.Seq, 10))
	if !strings.Contains(out, "replayed to "+s.q.Opts.WorkSubject(poisonID, s.lane(poisonID))+" (job "+poisonID+" batch 0, 15 puzzles)") {
		t.Fatalf("dlq replay: %q", out)
	}
	out, stderr := s.mustRun(cli.ExitOK, "job", "wait", poisonID)
	checkSolutions(t, poisonPuzzles, out)
	checkSummary(t, stderr, poisonID, "15 unique")
	s.checkJob(poisonID, want{lines: 15, queued: 15})
	s.checkDrained()
	// One line for each failed delivery but the last, one when it went to
	// the dead-letter stream.
	if n := w.count("message moved to the dead-letter stream"); n != 1 {
		t.Errorf("the worker logged the dead letter %d times:\n%s", n, tail(w.stderr.String(), 30))
	}
	if n := w.count("batch failed; it will be redelivered"); n != 2 {
		t.Errorf("the worker logged %d failed deliveries, want 2:\n%s", n, tail(w.stderr.String(), 30))
	}
}

// TestWorkerDiesOnEveryDelivery kills the worker holding a batch on each
// of its MaxDeliver deliveries. The server then gives up on the message
// without telling anyone but an advisory; the workers listen for it and
// move the message to the dead-letter stream, so that it is not lost:
// `dlq list` shows it and `dlq replay` gets its job done.
func TestWorkerDiesOnEveryDelivery(t *testing.T) {
	t.Parallel()
	const n = 2000 // one batch of hard puzzles: long enough to kill its worker in the middle
	s := newSys(t, options{env: []string{"SUDOKU_QUEUE_MAX_DELIVER=2", "SUDOKU_QUEUE_ACK_WAIT=1s",
		"SUDOKU_QUEUE_BACKOFF=100ms", "SUDOKU_QUEUE_BATCH_SIZE=2000", "SUDOKU_QUEUE_FIRST_BATCH_SIZE=2000", "SUDOKU_WORKER_CONCURRENCY=1"}})
	ctx := context.Background()
	file, puzzles := genFile(t, hardest, n, 9)
	id := s.submit(file)
	// The job is its lane's only one: what its consumer delivered is the
	// job's batch.
	lane := s.lane(id)
	for i := range 2 {
		w := s.startWorker("victim-" + strconv.Itoa(i))
		s.waitFor("the batch delivered to "+w.name, time.Minute, func() bool {
			c, err := s.q.JS.Consumer(ctx, s.q.Opts.Stream, s.q.Opts.LaneConsumer(lane))
			return err == nil && c.CachedInfo().Delivered.Consumer > uint64(i)
		})
		w.kill()
		if d := s.batchesDone(id); d != 0 {
			t.Fatalf("the batch was done (%d) before its worker was killed: make it longer", d)
		}
		t.Logf("SIGKILL %s holding the batch (delivery %d of 2)", w.name, i+1)
	}
	w := s.startWorker("survivor")
	dl := s.waitDLQ(1, 30*time.Second)[0]
	if dl.Reason != queue.ReasonMaxDeliver || dl.Deliveries != 2 || dl.Job != id || dl.Puzzles != n ||
		dl.Subject != s.q.Opts.WorkSubject(id, lane) || !strings.Contains(dl.Error, "delivered 2 times without an answer") {
		t.Fatalf("dead letter %+v", dl)
	}
	out, _ := s.mustRun(cli.ExitOK, "dlq", "replay", "--all")
	if !strings.Contains(out, "(job "+id+" batch 0, 2000 puzzles)") {
		t.Fatalf("dlq replay --all: %q", out)
	}
	out, stderr := s.mustRun(cli.ExitOK, "job", "wait", id)
	checkSolutions(t, puzzles, out)
	checkSummary(t, stderr, id, "2000 unique")
	s.checkJob(id, want{lines: n, queued: n})
	s.checkDrained()
	if c := w.count("message moved to the dead-letter stream"); c != 1 {
		t.Errorf("the survivor logged the dead letter %d times", c)
	}
}
