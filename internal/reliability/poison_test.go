package reliability

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
)

// deadLetter is a line of `sudoku dlq list --format jsonl`.
type deadLetter struct {
	Seq        uint64  `json:"seq"`
	Reason     string  `json:"reason"`
	Error      string  `json:"error"`
	Subject    string  `json:"subject"`
	Deliveries int     `json:"deliveries"`
	Job        string  `json:"job"`
	Batch      *uint64 `json:"batch"`
	Puzzles    int     `json:"puzzles"`
	Bytes      int     `json:"bytes"`
}

// dlq returns the dead letters, as `sudoku dlq list` shows them.
func (s *sys) dlq() []deadLetter {
	s.t.Helper()
	out, _ := s.mustRun(cli.ExitOK, "dlq", "list", "--format", "jsonl")
	var dls []deadLetter
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var dl deadLetter
		if err := dec.Decode(&dl); err != nil {
			s.t.Fatalf("dlq list: %v in %q", err, out)
		}
		dls = append(dls, dl)
	}
	return dls
}

// waitDLQ waits until the dead-letter stream holds n messages.
func (s *sys) waitDLQ(n int, d time.Duration) []deadLetter {
	s.t.Helper()
	var dls []deadLetter
	s.waitFor("dead letters", d, func() bool {
		dls = s.dlq()
		return len(dls) >= n
	})
	if len(dls) != n {
		s.t.Fatalf("%d dead letters, want %d: %+v", len(dls), n, dls)
	}
	return dls
}

// TestPoisonBatch sends a batch that fails on every delivery (its job's
// batch bitmap in Redis is not a bitmap, so its results can never be
// counted) next to a healthy job: the healthy job completes; the poison
// batch is delivered MaxDeliver times, lands in the dead-letter stream
// with its reason, and `dlq list` shows it; once the cause is fixed,
// `dlq replay` puts it back and its job completes too.
func TestPoisonBatch(t *testing.T) {
	s := newSys(t, options{env: []string{"SUDOKU_QUEUE_MAX_DELIVER=3", "SUDOKU_QUEUE_BACKOFF=100ms"}})
	ctx := context.Background()
	poisonFile, poisonPuzzles := genFile(t, clue17, 15, 7) // one batch
	poisonID := s.submit(poisonFile)
	bitmap := s.prefix + "job:{" + poisonID + "}:batches"
	if err := s.rdb.RPush(ctx, bitmap, "not a bitmap").Err(); err != nil {
		t.Fatal(err)
	}
	file, puzzles := genFile(t, clue17, 2000, 8)
	w := s.startWorker("worker-0")
	out, _ := s.mustRun(cli.ExitOK, "submit", "--wait", file)
	checkSolutions(t, puzzles, out)

	dls := s.waitDLQ(1, 30*time.Second)
	dl := dls[0]
	if dl.Reason != "max_deliver" || dl.Deliveries != 3 || dl.Job != poisonID || dl.Batch == nil || *dl.Batch != 0 ||
		dl.Puzzles != 15 || dl.Subject != s.name+".jobs.bulk" || !strings.Contains(dl.Error, "WRONGTYPE") {
		t.Fatalf("dead letter %+v", dl)
	}
	table, _ := s.mustRun(cli.ExitOK, "dlq", "list")
	t.Logf("sudoku dlq list:\n%s", table)
	if row := lines(table, strconv.FormatUint(dl.Seq, 10)+" ", "max_deliver", poisonID); len(row) != 1 {
		t.Fatalf("dlq list does not show it:\n%s", table)
	}
	if j := s.job(poisonID); j.Done != 0 || j.IsFinished() {
		t.Fatalf("the poison job: %+v", j)
	}

	if err := s.rdb.Del(ctx, bitmap).Err(); err != nil {
		t.Fatal(err)
	}
	out, _ = s.mustRun(cli.ExitOK, "dlq", "replay", strconv.FormatUint(dl.Seq, 10))
	if !strings.Contains(out, "replayed to "+s.name+".jobs.bulk (job "+poisonID) {
		t.Fatalf("dlq replay: %q", out)
	}
	out, _ = s.mustRun(cli.ExitOK, "job", "wait", poisonID)
	checkSolutions(t, poisonPuzzles, out)
	s.checkJob(poisonID, 15)
	s.checkDrained()
	// One line when it went to the dead-letter stream; the store failures
	// before (once per delivery: Redis answered, with an error) are logged
	// as outages of a line each, not more.
	if n := w.count("message moved to the dead-letter stream"); n != 1 {
		t.Errorf("the worker logged the dead letter %d times:\n%s", n, tail(w.stderr.String(), 30))
	}
}

// TestWorkerDiesOnEveryDelivery kills the worker holding a batch on each
// of its MaxDeliver deliveries. The server then gives up on the message
// without telling anyone but an advisory; the workers listen for it and
// move the message to the dead-letter stream, so that it is not lost:
// `dlq list` shows it and `dlq replay` gets its job done.
func TestWorkerDiesOnEveryDelivery(t *testing.T) {
	const n = 2000 // one batch of hard puzzles: long enough to kill its worker in the middle
	s := newSys(t, options{env: []string{"SUDOKU_QUEUE_MAX_DELIVER=2", "SUDOKU_QUEUE_ACK_WAIT=1s",
		"SUDOKU_QUEUE_BACKOFF=100ms", "SUDOKU_QUEUE_BATCH_SIZE=2000", "SUDOKU_WORKER_CONCURRENCY=1"}})
	ctx := context.Background()
	file, puzzles := genFile(t, hardest, n, 9)
	id := s.submit(file)
	for i := range 2 {
		w := s.startWorker("victim-" + strconv.Itoa(i))
		s.waitFor("the batch delivered to "+w.name, time.Minute, func() bool {
			c, err := s.js.Consumer(ctx, s.name, s.name+"-bulk")
			return err == nil && c.CachedInfo().Delivered.Consumer > uint64(i)
		})
		w.kill()
		if d := s.done(id); d != 0 {
			t.Fatalf("the batch was done (%d) before its worker was killed: make it longer", d)
		}
		t.Logf("SIGKILL %s holding the batch (delivery %d of 2)", w.name, i+1)
	}
	w := s.startWorker("survivor")
	dls := s.waitDLQ(1, 30*time.Second)
	dl := dls[0]
	if dl.Reason != "max_deliver" || dl.Deliveries != 2 || dl.Job != id || dl.Puzzles != n ||
		!strings.Contains(dl.Error, "delivered 2 times without an answer") {
		t.Fatalf("dead letter %+v", dl)
	}
	out, _ := s.mustRun(cli.ExitOK, "dlq", "replay", "--all")
	if !strings.Contains(out, "(job "+id+" batch 0, 2000 puzzles)") {
		t.Fatalf("dlq replay --all: %q", out)
	}
	out, _ = s.mustRun(cli.ExitOK, "job", "wait", id)
	checkSolutions(t, puzzles, out)
	s.checkJob(id, n)
	s.checkDrained()
	if c := w.count("message moved to the dead-letter stream"); c != 1 {
		t.Errorf("the survivor logged the dead letter %d times", c)
	}
}
