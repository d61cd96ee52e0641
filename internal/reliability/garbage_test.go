package reliability

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// garbage is a body published straight onto a work subject, and the
// reason the workers must dead-letter it with.
type garbage struct {
	name    string
	subject string
	body    []byte
	reason  string
	job     string // the job id the body names, when it decodes
}

// garbageBodies returns bodies of every kind of wrongness for the work
// subjects of q, random ones from seed, on the subjects of jobs of owner
// in each of its priorities and slots (lanes that may hold real jobs of
// owner) and on subjects of the work filter that are no lane's. None
// names a job that exists: those that do not decode are dead-lettered as
// undecodable, those that do (full of nonsense puzzles) as unknown_job on
// their job's own subject and as mismatch on another job's.
func garbageBodies(t *testing.T, o queue.Options, owner string, seed uint64) []garbage {
	t.Helper()
	r := rngFrom(seed)
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	puzzle, err := solver.Parse(valid)
	if err != nil {
		t.Fatal(err)
	}
	var lanes []queue.Lane
	for _, p := range []job.Priority{job.PriorityNormal, job.PriorityHigh, job.PriorityLow} {
		for _, slot := range []string{queue.SlotSmall, queue.BigSlot(0), queue.BigSlot(queue.BigSlots - 1)} {
			lanes = append(lanes, queue.Lane{Owner: owner, Priority: p, Slot: slot})
		}
	}
	// subject returns the work subject of job id in the i-th lane.
	subject := func(id string, i int) string { return o.WorkSubject(id, lanes[i%len(lanes)]) }
	// noLane is a subject of the work filter that is no lane's.
	noLane := strings.TrimSuffix(o.WorkFilter(), ">") + "a.b.c"
	id := job.NewID(owner)
	one := job.Batch{Job: id, Items: []job.Item{{Line: 1, Kind: job.Solve, Grid: puzzle}}}
	enc := one.AppendWork(nil)
	// header returns a work batch's header for job id with n items.
	header := func(id string, n uint64) []byte {
		b := []byte{job.WorkVersion, 0, byte(len(id))}
		b = append(b, id...)
		return binary.AppendUvarint(append(b, 0, 0), n)
	}
	withKind := func(kind byte, rest ...byte) []byte {
		return append(append(header(id, 1), 1, kind), rest...)
	}
	spare := bytes.Repeat([]byte{0x11}, job.PackedLen) // 81 givens, packed
	spare[job.PackedLen-1] = 0x1f                      // the spare nibble set
	undecodable := [][2]any{
		{"empty", []byte(nil)},
		{"text", []byte("hello, workers")},
		{"JSON", []byte(`{"job":"` + id + `","puzzles":["` + valid + `"]}`)},
		{"a results batch", append([]byte{job.ResultsVersion}, enc[1:]...)},
		{"version 4", append([]byte{job.WorkVersion + 1}, enc[1:]...)},
		{"cut short", enc[:len(enc)-1]},
		{"trailing bytes", append(enc[:len(enc):len(enc)], 0, 0)},
		{"padded flags", append([]byte{job.WorkVersion, 0x80, 0}, enc[2:]...)},
		{"job id with a wildcard", header("a.>", 1)},
		{"job id in upper case", header(strings.ToUpper(id), 1)},
		{"job id of 65 bytes", header(strings.Repeat("a", 65), 1)},
		{"no items", header(id, 0)},
		{"claims MaxBatch+1 items", header(id, job.MaxBatch+1)},
		{"claims 100000 items in a few bytes", header(id, job.MaxBatch)},
		{"item of kind 9", withKind(9)},
		{"repeat of nothing", withKind(byte(job.Repeat), 1)},
		{"packed grid with the spare nibble set", withKind(byte(job.Solve), spare...)},
		{"900 kB of noise", random(900 << 10)},
	}
	for i := range 20 {
		undecodable = append(undecodable, [2]any{fmt.Sprintf("noise %d", i), random(1 + r.IntN(4096))})
	}
	var gs []garbage
	for i, u := range undecodable {
		g := garbage{name: u[0].(string), body: u[1].([]byte), reason: queue.ReasonUndecodable,
			subject: subject(job.NewID(owner), i)}
		if i%3 == 2 {
			g.subject = noLane // any subject of the work filter
		}
		if _, err := job.DecodeWork(g.body); err == nil {
			t.Fatalf("garbage %q decodes", g.name)
		}
		gs = append(gs, g)
	}

	// Bodies that decode, with nonsense puzzles, for jobs that do not
	// exist.
	nonsense := func(cell byte) solver.Grid {
		var g solver.Grid
		for i := range g {
			g[i] = cell
		}
		return g
	}
	decodes := []struct {
		name  string
		items []job.Item
	}{
		{"cells of 15", []job.Item{{Line: 1, Kind: job.Solve, Grid: nonsense(15)}}},
		{"81 nines", []job.Item{{Line: 1, Kind: job.Solve, Grid: nonsense(9)}}},
		{"an empty grid", []job.Item{{Line: 7, Kind: job.Solve, Grid: nonsense(0)}}},
		{"a result of HTML", []job.Item{{Line: 1, Kind: job.Known, Outcome: job.Outcome{Status: result.StatusInvalid,
			Text: "<script>alert(1)</script>", Error: "\x00\n\r"}}}},
		{"20000 grids of 10", make([]job.Item, 20000)}, // ~860 kB
	}
	for i := range decodes[4].items {
		decodes[4].items[i] = job.Item{Line: i + 1, Kind: job.Solve, Grid: nonsense(10)}
	}
	for i, d := range decodes {
		b := job.Batch{Job: job.NewID(owner), Index: uint64(i) << 40, First: 1 << 50, Items: d.items}
		g := garbage{name: "decodes: " + d.name, subject: subject(b.Job, i), body: b.AppendWork(nil),
			reason: queue.ReasonUnknownJob, job: b.Job}
		if i%2 == 1 { // on another (unknown) job's subject
			g.subject, g.reason = subject(job.NewID(owner), i), queue.ReasonMismatch
		}
		if _, err := job.DecodeWork(g.body); err != nil {
			t.Fatalf("garbage %q does not decode: %v", g.name, err)
		}
		gs = append(gs, g)
	}
	return gs
}

// solveGarbage are requests to the solve endpoint that are not puzzles,
// and the error code each must get.
var solveGarbage = []struct {
	body []byte
	code string
}{
	{nil, queue.CodeInvalidPuzzle},
	{[]byte("hello"), queue.CodeInvalidPuzzle},
	{[]byte(`{"puzzle": 5}`), queue.CodeBadRequest},
	{[]byte(`{"puzzle": "` + valid + `", "extra": 1}`), queue.CodeBadRequest},
	{[]byte(`{"puzzle": "` + valid + `"`), queue.CodeBadRequest},
	{[]byte(strings.Repeat("9", 81)), queue.CodeInvalidPuzzle},
	{[]byte(strings.Repeat("1", 900<<10)), queue.CodeInvalidPuzzle},
}

// nonsenseLines are input lines that are not puzzles.
var nonsenseLines = []string{"x", "<script>alert(1)</script>", strings.Repeat("9", 81), "\x00\x00", strings.Repeat(".", 82),
	`{"puzzle":"` + valid + `"}`}

// TestGarbageMessages publishes garbage straight onto the work subjects,
// and sends it to the solve endpoint, next to a real job whose input has
// nonsense lines among its puzzles. The workers dead-letter every body
// with its reason (undecodable; unknown_job for a batch of a job that does
// not exist; mismatch for one on another job's subject), refuse every bad
// request with its error code, never crash, and create no job record or
// results for the jobs the garbage names; the real job completes, its
// nonsense lines with invalid results and its puzzles solved. A body over
// the server's payload limit does not even get in.
func TestGarbageMessages(t *testing.T) {
	t.Parallel()
	// No redelivery expected (see TestForgedBatches).
	s := newSys(t, options{env: []string{"SUDOKU_QUEUE_ACK_WAIT=30s"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w0, w1 := s.startWorker("worker-0"), s.startWorker("worker-1")
	const n, every = 3000, 100
	_, puzzles := genFile(t, clue17, n, 10)
	var input []string
	for i, p := range puzzles {
		if i%every == every-1 {
			input = append(input, nonsenseLines[i/every%len(nonsenseLines)])
		}
		input = append(input, p)
	}
	invalid := len(input) - n
	id := s.submit(writeLines(t, input))

	// The garbage names jobs of the real job's owner, some in its lane.
	gs := garbageBodies(t, s.q.Opts, job.OwnerOf(id), 11)
	wantReasons := map[string]int{}
	for _, g := range gs {
		if _, err := s.q.JS.Publish(ctx, g.subject, g.body); err != nil {
			t.Fatalf("publish %s to %s: %v", g.name, g.subject, err)
		}
		wantReasons[g.reason]++
	}
	// Over the server's payload limit (1 MB): refused at the door.
	_, err := s.q.JS.Publish(ctx, s.q.Opts.WorkSubject(id, s.lane(id)), make([]byte, 2<<20))
	if !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("publishing 2 MB: %v, want %v", err, nats.ErrMaxPayload)
	}
	for _, g := range solveGarbage {
		m, err := s.nc.Request(s.q.Opts.SolveSubject(), g.body, 10*time.Second)
		if err != nil {
			t.Fatalf("solve request %.40q: %v", g.body, err)
		}
		if se := queue.ServiceErrorOf(m); se == nil || se.Code != g.code {
			t.Errorf("solve request %.40q: answer %v %.100q, want error code %s", g.body, se, m.Data, g.code)
		}
	}

	// The real job: every puzzle solved, every nonsense line invalid.
	code, out, stderr := s.run(2*time.Minute, "", "job", "wait", id)
	if code != cli.ExitFailure {
		t.Fatalf("job wait: exit %d, want 1 (some lines are not puzzles): %s", code, tail(stderr, 20))
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != len(input) {
		t.Fatalf("%d result lines for %d input lines", len(got), len(input))
	}
	k := 0
	for i, l := range got {
		if i%(every+1) == every-1 {
			if !strings.HasPrefix(l, "error: line "+strconv.Itoa(i+1)+": ") {
				t.Errorf("line %d (%.40q): %.200q, want an error naming the line", i+1, input[i], l)
			}
			continue
		}
		if err := isSolution(puzzles[k], l); err != nil {
			t.Errorf("line %d: %v", i+1, err)
		}
		k++
	}
	checkSummary(t, stderr, id, fmt.Sprintf("%d unique, %d invalid", n, invalid))
	s.checkJob(id, want{lines: int64(len(input)), queued: n,
		counts: job.Counts{result.StatusUnique: n, result.StatusInvalid: int64(invalid)}})

	// Every body dead-lettered once, with its reason.
	dls := s.waitDLQ(len(gs), time.Minute)
	gotReasons := map[string]int{}
	for _, dl := range dls {
		gotReasons[dl.Reason]++
		if dl.Deliveries != 1 || dl.Error == "" || dl.Reason == queue.ReasonUndecodable && (dl.Job != "" || dl.BodyError == "") {
			t.Errorf("dead letter %+v", dl)
		}
		if dl.Job != "" && dl.Reason != queue.ReasonUnknownJob && dl.Reason != queue.ReasonMismatch {
			t.Errorf("dead letter of job %s: reason %s", dl.Job, dl.Reason)
		}
	}
	if fmt.Sprint(gotReasons) != fmt.Sprint(wantReasons) {
		t.Errorf("dead letters by reason: %v, want %v", gotReasons, wantReasons)
	}
	// No job record, manifest or results for any job the garbage names;
	// the jobs bucket holds the real job's keys only.
	keys, err := s.q.Jobs.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		if k != id && !strings.HasPrefix(k, id+".m.") {
			t.Errorf("the jobs bucket has a key %q", k)
		}
	}
	for _, g := range gs {
		if g.job == "" {
			continue
		}
		if _, err := s.q.Jobs.Get(ctx, g.job); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("job %s (%s): a record (%v)", g.job, g.name, err)
		}
		if d := s.batchesDone(g.job); d != 0 {
			t.Errorf("job %s (%s): %d results messages", g.job, g.name, d)
		}
		_, stderr := s.mustRun(cli.ExitFailure, "job", "status", g.job)
		if !strings.Contains(stderr, "no job "+g.job) {
			t.Errorf("job status %s: %s", g.job, stderr)
		}
	}
	for _, w := range []*proc{w0, w1} {
		if w.exited() {
			t.Fatalf("%s died (exit %d)", w.name, w.code)
		}
		if strings.Contains(w.stderr.String(), "panic") {
			t.Errorf("%s logged a panic:\n%s", w.name, logTail(w.stderr.String()))
		}
	}
	if n := w0.count("message moved to the dead-letter stream") + w1.count("message moved to the dead-letter stream"); n != len(gs) {
		t.Errorf("the workers logged %d dead letters, want one line for each of %d", n, len(gs))
	}
	// Everything was dead-lettered: drop the dead letters and the queue is
	// empty.
	dlq, err := s.q.JS.Stream(ctx, s.q.Opts.DLQStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := dlq.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	s.checkDrained()
	// The workers still work.
	file2, puzzles2 := genFile(t, clue17, 500, 12)
	out, _ = s.mustRun(cli.ExitOK, "submit", "--wait", file2)
	checkSolutions(t, puzzles2, out)
	t.Logf("dead-lettered: %v; %d solve requests refused with their codes; 1 oversized body refused; job %s: %d puzzles solved, %d nonsense lines invalid",
		wantReasons, len(solveGarbage), id, n, invalid)
}
