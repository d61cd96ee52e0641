package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// syncBuffer is a bytes.Buffer safe for a command writing to it while
// the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits up to d for cond, failing the test with what with the
// command's stderr otherwise.
func waitFor(t *testing.T, d time.Duration, what string, stderr fmt.Stringer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; stderr so far:\n%s", what, d, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSubmitWaitNATSOutage stops the NATS server while submit --wait
// waits: without a terminal, the wait is logged once, with what it waits
// for and since when, and its end once; after the restart the job
// completes, its results the same as solve --local's.
func TestSubmitWaitNATSOutage(t *testing.T) {
	srv := testenv.NATSServer(t)
	dead := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	e := newQueueEnv(t, "SUDOKU_NATS_URL="+srv.URL(), "SUDOKU_REDIS_ADDRS="+dead, "SUDOKU_REDIS_DIAL_TIMEOUT=200ms",
		"SUDOKU_LOG_LEVEL=info")
	file := writeFile(t, manyPuzzles(t, 300))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, []string{"submit", "--wait", file}, strings.NewReader(""), &stdout, &stderr) }()

	waitFor(t, 30*time.Second, "job submitted", &stderr, func() bool { return strings.Contains(stderr.String(), "300 lines: 300 queued") })
	stopped := time.Now()
	srv.Stop()
	waitFor(t, 30*time.Second, "waiting line", &stderr, func() bool { return strings.Contains(stderr.String(), "waiting: NATS unreachable since ") })
	m := regexp.MustCompile(`waiting: NATS unreachable since (\d\d:\d\d:\d\d)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("waiting line without the time:\n%s", stderr.String())
	}
	since, err := time.ParseInLocation("15:04:05", m[1], time.Local)
	if err != nil {
		t.Fatal(err)
	}
	// The clock time of the outage's start: between the stop and now.
	since = time.Date(stopped.Year(), stopped.Month(), stopped.Day(), since.Hour(), since.Minute(), since.Second(), 0, time.Local)
	if since.Before(stopped.Truncate(time.Second)) || since.After(time.Now()) {
		t.Errorf("waiting since %s; NATS stopped at %s", m[1], stopped.Format("15:04:05"))
	}
	time.Sleep(3 * time.Second) // waiting on: still one line
	srv.Start()
	e.startWorker()
	var code int
	select {
	case code = <-done:
	case <-ctx.Done():
		t.Fatalf("submit --wait did not end after NATS came back; stderr:\n%s", stderr.String())
	}
	log := stderr.String()
	if code != ExitOK {
		t.Fatalf("exit %d after the outage; stderr:\n%s", code, log)
	}
	// The worker starts after the restart: that no worker was listening
	// meanwhile is another line.
	if n := strings.Count(log, `msg="waiting: `) - strings.Count(log, `msg="waiting: no worker`); n != 1 {
		t.Errorf("%d waiting lines for one outage, want 1:\n%s", n, log)
	}
	if n := strings.Count(log, `msg="no longer waiting`); n != 1 {
		t.Errorf("%d lines saying the wait ended, want 1:\n%s", n, log)
	}
	if !strings.Contains(log, ": 300 puzzles in ") || !strings.Contains(log, "300 unique") {
		t.Errorf("no summary of 300 unique:\n%s", log)
	}
	if stdout.String() != localOut(t, file) {
		t.Error("results after the outage differ from solve --local")
	}
}

// TestWaitTimeout: job.wait_timeout (flag or environment) bounds how
// long submit --wait and job wait wait: exit status 124, how many
// results were written, and the command that resumes, to the same output
// in the same format; the job goes on and completes.
func TestWaitTimeout(t *testing.T) {
	e := newQueueEnv(t)
	file := writeFile(t, manyPuzzles(t, 100))
	out := filepath.Join(t.TempDir(), "my results.jsonl")
	start := time.Now()
	code, _, stderr := run(t, context.Background(), "", "submit", "--wait", "--job-wait-timeout", "1s", "--format", "jsonl", "-o", out, file)
	if code != ExitTimeout {
		t.Fatalf("submit --wait with no worker: exit %d, want %d: %s", code, ExitTimeout, stderr)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("gave up after %v, want about 1s", el)
	}
	m := regexp.MustCompile(`gave up waiting after 1s \(job\.wait_timeout\); job (\S+) keeps running \(0 of 100 results written\)\. ` +
		`Resume with:\n  sudoku job wait --format jsonl --out '([^']+)' (\S+)\n`).FindStringSubmatch(stderr)
	if m == nil || m[1] != m[3] || m[2] != out {
		t.Fatalf("stderr does not say how to resume:\n%s", stderr)
	}
	id := m[1]

	// From the environment, for job wait.
	t.Setenv("SUDOKU_JOB_WAIT_TIMEOUT", "500ms")
	code, _, stderr = run(t, context.Background(), "", "job", "wait", id)
	if code != ExitTimeout || !strings.Contains(stderr, "gave up waiting after 500ms") || !strings.Contains(stderr, "sudoku job wait "+id+"\n") {
		t.Fatalf("job wait with $SUDOKU_JOB_WAIT_TIMEOUT: exit %d: %s", code, stderr)
	}

	// The job went on: resumed, it completes; 0 is no bound.
	e.startWorker()
	code, _, stderr = run(t, context.Background(), "", "job", "wait", "--job-wait-timeout", "0", "--format", "jsonl", "-o", out, id)
	if code != ExitOK {
		t.Fatalf("job wait: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "job "+id+": 100 puzzles: 100 unique") {
		t.Errorf("job wait's summary: %q", stderr)
	}
	if got := readLines(t, out); len(got) != 100 || !strings.Contains(got[99], `"line":100,`) {
		t.Errorf("resumed output: %d lines, the last %q", len(got), got[len(got)-1])
	}
}

// TestFullyCachedJob: a job whose every line is answered without a
// worker (cached, repeated, invalid) shows those lines in job status, job
// list and the summary of submit --wait, not an empty job.
func TestFullyCachedJob(t *testing.T) {
	e := newQueueEnv(t)
	e.startWorker()
	ps := puzzles(t, 5)
	file := writeFile(t, append(append(ps, ps[1], ps[3]), "not a puzzle"))
	code, _, stderr := run(t, context.Background(), "", "submit", "--wait", file)
	if code != ExitFailure || !strings.Contains(stderr, "8 puzzles in ") ||
		!strings.Contains(stderr, ": 7 unique, 1 invalid (5 from the workers, 2 repeats of earlier lines)\n") {
		t.Fatalf("first job: exit %d, want 1 and a summary of its sources:\n%s", code, stderr)
	}

	// The same file again: every line cached, repeated or invalid.
	code, out, stderr := run(t, context.Background(), "", "submit", file)
	if code != ExitOK || !strings.Contains(stderr, "8 lines: 0 queued in ") {
		t.Fatalf("second job: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	// Not read yet, and finished all the same: its results are all in,
	// counted by the producer that stored them.
	_, status, _ := run(t, context.Background(), "", "job", "status", id)
	for _, s := range []string{"state     finished\n", "lines     8: 0 to the workers, 5 cached, 2 repeated, 1 invalid\n",
		"done      8 of 8 lines (100.0%)", "results   7 unique, 1 invalid\n", "unsolved  1 "} {
		if !strings.Contains(status, s) {
			t.Errorf("job status of the cached job lacks %q:\n%s", s, status)
		}
	}
	if strings.Contains(status, "rate ") {
		t.Errorf("job status gives a rate for a job with every result in:\n%s", status)
	}
	code, _, stderr = run(t, context.Background(), "", "job", "wait", id)
	if code != ExitFailure || !strings.Contains(stderr, "job "+id+": 8 puzzles: 7 unique, 1 invalid (5 from the cache, 2 repeats of earlier lines)\n") {
		t.Errorf("job wait of the cached job: exit %d:\n%s", code, stderr)
	}
	_, status, _ = run(t, context.Background(), "", "job", "status", id)
	for _, s := range []string{"state     finished\n", "lines     8: 0 to the workers, 5 cached, 2 repeated, 1 invalid\n",
		"done      8 of 8 lines (100.0%), ", "results   7 unique, 1 invalid\n", "unsolved  1 "} {
		if !strings.Contains(status, s) {
			t.Errorf("job status of the finished cached job lacks %q:\n%s", s, status)
		}
	}
	_, list, _ := run(t, context.Background(), "", "job", "list")
	if !regexp.MustCompile(`(?m)^` + id + `\s+\S+ \S+\s+finished\s+normal\s+8\s+8\s+0\s+5\s+2\s+1\s+1$`).MatchString(list) {
		t.Errorf("job list: want %s finished, normal, 8 lines, 8 done: 0 queued, 5 cached, 2 repeated, 1 invalid, 1 unsolved:\n%s", id, list)
	}

	// submit --wait of a job answered at once.
	code, _, stderr = run(t, context.Background(), "", "submit", "--wait", file)
	if code != ExitFailure ||
		!regexp.MustCompile(`job \S+: 8 puzzles in \S+ \(\d+/s\): 7 unique, 1 invalid \(5 from the cache, 2 repeats of earlier lines\)\n$`).MatchString(stderr) {
		t.Errorf("submit --wait of a cached job: exit %d:\n%s", code, stderr)
	}
}

// TestSummary checks the last line of a job followed to its end.
func TestSummary(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var sum result.Summary
	for range 43 {
		sum.Add(result.Result{Status: result.StatusUnique})
	}
	for range 3 {
		sum.Add(result.Result{Status: result.StatusInvalid})
	}
	mixed := job.Record{Created: created, Finished: created.Add(2 * time.Second), Tally: job.Tally{Lines: 46, Queued: 30, Cached: 10, Repeated: 3, Invalid: 3}}
	// The workers found 4 more in the cache: results marked cached.
	var hits result.Summary
	for i := range 43 {
		hits.Add(result.Result{Status: result.StatusUnique, Cached: i < 14})
	}
	for range 3 {
		hits.Add(result.Result{Status: result.StatusInvalid})
	}
	workers := job.Record{Created: created, Tally: job.Tally{Lines: 46, Queued: 43, Invalid: 3}}
	tests := []struct {
		name  string
		rec   job.Record
		sum   *result.Summary
		timed bool
		want  string
	}{
		{"mixed", mixed, &sum, true, "job X: 46 puzzles in 2s (23/s): 43 unique, 3 invalid (30 from the workers, 10 from the cache, 3 repeats of earlier lines)"},
		{"mixed, not timed", mixed, &sum, false, "job X: 46 puzzles: 43 unique, 3 invalid (30 from the workers, 10 from the cache, 3 repeats of earlier lines)"},
		// Not marked finished: the time up to now.
		{"all by the workers", workers, &sum, true, "job X: 46 puzzles in 4s (12/s): 43 unique, 3 invalid"},
		{"the workers' cache hits", mixed, &hits, false, "job X: 46 puzzles: 43 unique, 3 invalid (26 from the workers, 14 from the cache, 3 repeats of earlier lines)"},
	}
	for _, tt := range tests {
		if got := summary("X", &tt.rec, tt.sum, tt.timed, created.Add(4*time.Second)); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// TestWaitDisplay: while NATS does not answer, a terminal's progress line
// says so, and nothing is logged; without a terminal one line is logged
// when the outage starts, whatever its cause is called meanwhile, and
// one when it ends.
func TestWaitDisplay(t *testing.T) {
	published := job.Record{State: job.Published, Tally: job.Tally{Lines: 100}}
	steps := []producer.Progress{
		{Record: published, Lines: 10},
		{Record: published, Lines: 10, Waiting: "NATS unreachable since 12:03:04"},
		{Record: published, Lines: 10, Waiting: "JetStream unreachable since 12:03:04"},
		{Record: published, Lines: 60},
		{Record: published, Lines: 60, Waiting: "NATS unreachable since 12:09:00"},
		{Record: published, Lines: 100},
	}
	for _, terminal := range []bool{true, false} {
		var screen syncBuffer
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		var bars []*progress
		d := &waitDisplay{log: log, newBar: func() *progress {
			if !terminal {
				return nil
			}
			b := newBar(&screen, "solving", -1)
			bars = append(bars, b)
			return b
		}}
		var shown []string
		for _, p := range steps {
			d.update(p)
			if !terminal {
				continue
			}
			shown = append(shown, bars[0].bar.State().Description)
			if p.Waiting != "" {
				// On the screen within the throttle, though nothing
				// else draws the bar while waiting.
				waitFor(t, time.Second, "wait on the screen", &screen, func() bool {
					return strings.Contains(screen.String(), "waiting: "+p.Waiting)
				})
			}
		}
		if !terminal {
			got := regexp.MustCompile(`msg="([^"]*)"`).FindAllStringSubmatch(logs.String(), -1)
			var msgs []string
			for _, m := range got {
				msgs = append(msgs, m[1])
			}
			want := []string{"waiting: NATS unreachable since 12:03:04", "no longer waiting: NATS answers again",
				"waiting: NATS unreachable since 12:09:00", "no longer waiting: NATS answers again"}
			if !slices.Equal(msgs, want) {
				t.Errorf("no terminal: logged %q, want %q", msgs, want)
			}
			continue
		}
		d.bar.Close()
		want := []string{"solving", "waiting: NATS unreachable since 12:03:04", "waiting: JetStream unreachable since 12:03:04",
			"solving", "waiting: NATS unreachable since 12:09:00", "solving"}
		if !slices.Equal(shown, want) || len(bars) != 1 {
			t.Errorf("terminal: the bar says %q, want %q", shown, want)
		}
		if max := bars[0].bar.GetMax(); max != 100 {
			t.Errorf("terminal: the bar's total is %d, want 100", max)
		}
		if logs.Len() != 0 {
			t.Errorf("terminal: logged %q", logs.String())
		}
	}
}
