package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// TestWaitDisplayNoWorkers: while no worker listens, the bar says so and
// how to start one; without a terminal, that is logged once when it
// starts and once when a worker comes.
func TestWaitDisplayNoWorkers(t *testing.T) {
	published := job.Record{State: job.Published, Tally: job.Tally{Lines: 100}}
	steps := []producer.Progress{
		{Record: published, Lines: 0},
		{Record: published, Lines: 0, NoWorkers: true},
		{Record: published, Lines: 0, NoWorkers: true},
		{Record: published, Lines: 50},
	}
	for _, terminal := range []bool{true, false} {
		var screen syncBuffer
		var logs bytes.Buffer
		d := &waitDisplay{log: slog.New(slog.NewTextHandler(&logs, nil)), newBar: func() *progress {
			if !terminal {
				return nil
			}
			return newBar(&screen, "solving", -1)
		}}
		var shown []string
		for _, p := range steps {
			d.update(p)
			if terminal {
				shown = append(shown, d.bar.bar.State().Description)
			}
		}
		var msgs []string
		for _, m := range regexp.MustCompile(`msg="([^"]*)"`).FindAllStringSubmatch(logs.String(), -1) {
			msgs = append(msgs, m[1])
		}
		if terminal {
			d.bar.Close()
			want := []string{"solving", "waiting: no worker is listening (start one: sudoku worker)",
				"waiting: no worker is listening (start one: sudoku worker)", "solving"}
			if !slices.Equal(shown, want) || len(msgs) != 0 {
				t.Errorf("terminal: the bar says %q, want %q; logged %q", shown, want, msgs)
			}
			continue
		}
		want := []string{"waiting: no worker is listening; start one with 'sudoku worker'", "a worker is listening: solving"}
		if !slices.Equal(msgs, want) {
			t.Errorf("no terminal: logged %q, want %q", msgs, want)
		}
	}
}

// TestSubmitWaitNoWorker: submit --wait with no worker running says that
// none is listening, goes on waiting, and completes once one starts.
func TestSubmitWaitNoWorker(t *testing.T) {
	e := newQueueEnv(t, "SUDOKU_LOG_LEVEL=info")
	file := writeFile(t, manyPuzzles(t, 20))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, []string{"submit", "--wait", file}, strings.NewReader(""), &stdout, &stderr) }()
	waitFor(t, 30*time.Second, "no-worker line", &stderr, func() bool {
		return strings.Contains(stderr.String(), "waiting: no worker is listening")
	})
	e.startWorker()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("submit --wait did not end once a worker started; stderr:\n%s", stderr.String())
	}
	if stdout.String() != localOut(t, file) {
		t.Error("results differ from solve --local")
	}
}

// TestEmptyInputRefused: every command that takes puzzles refuses an input
// without one (empty, or only blank lines and comments) with the same
// message and exit status 2, and creates nothing: no output file, no job.
func TestEmptyInputRefused(t *testing.T) {
	e := newQueueEnv(t)
	for _, tc := range []struct{ name, text string }{
		{"empty", ""},
		{"blank and comments", "\n  \n# a comment\n\n"},
	} {
		for _, args := range [][]string{{"solve", "--local"}, {"solve"}, {"submit"}, {"submit", "--wait"}} {
			t.Run(tc.name+"/"+strings.Join(args, " "), func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "out.txt")
				code, stdout, stderr := run(t, context.Background(), tc.text, append(args, "--out", out, "-")...)
				if args[0] == "submit" && len(args) == 1 {
					code, stdout, stderr = run(t, context.Background(), tc.text, "submit", "-")
				}
				if code != ExitUsage || !strings.Contains(stderr, "standard input: no puzzle in the input") || stdout != "" {
					t.Errorf("exit %d, stdout %q, stderr %q; want %d and the input named as holding no puzzle",
						code, stdout, stderr, ExitUsage)
				}
				if _, err := os.Stat(out); err == nil {
					t.Error("the output file was created")
				}
			})
		}
	}
	_, stdout, _ := run(t, context.Background(), "", "job", "list")
	if n := strings.Count(strings.TrimSpace(stdout), "\n"); n > 0 { // the header alone

		t.Errorf("jobs after empty inputs only:\n%s", stdout)
	}
	_ = e // its environment names the queue
}

// TestGetCachedSaysSo: get of a cached puzzle, by puzzle or by key, in
// the JSONL format, carries "cached": true, as /v1/solutions does.
func TestGetCachedSaysSo(t *testing.T) {
	newQueueEnv(t)
	p := puzzles(t, 1)
	file := writeFile(t, p)
	// solve on the embedded server caches its answers in the env's Redis.
	if code, _, stderr := run(t, context.Background(), "", "solve", file); code != ExitOK {
		t.Fatalf("solve: exit %d, %s", code, stderr)
	}
	code, js, stderr := run(t, context.Background(), "", "get", "--format", "jsonl", p[0])
	if code != ExitOK || !strings.Contains(js, `"cached":true`) {
		t.Fatalf("get --format jsonl of a cached puzzle: exit %d, %q, %s", code, js, stderr)
	}
	key := js[strings.Index(js, `"key":"`)+7:][:64]
	if code, js, _ := run(t, context.Background(), "", "get", "--format", "jsonl", key); code != ExitOK || !strings.Contains(js, `"cached":true`) {
		t.Errorf("get --format jsonl KEY: exit %d, %q", code, js)
	}
}

// TestGetKeyPrefix: get of hex digits that are not a whole key says it
// looks like a key and how long a key is, rather than reporting a bad
// puzzle cell by cell; a whole key in upper case is the key.
func TestGetKeyPrefix(t *testing.T) {
	key := strings.Repeat("b3", 32)
	for _, tc := range []struct {
		name, arg string
		code      int
		stderr    string
	}{
		{"prefix", key[:12], ExitUsage, "looks like a puzzle's key, but has 12 hex digits: a key has 64"},
		{"too long", key + "ab", ExitUsage, "has 66 hex digits"},
		{"upper case prefix", strings.ToUpper(key[:20]), ExitUsage, "has 20 hex digits"},
		{"whole key in upper case", strings.ToUpper(key), ExitFailure, "key " + key + " is not in the cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, context.Background(), "", "get", "--redis-addrs", testenv.RedisAddr(), tc.arg)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) || strings.Contains(stdout+stderr, "r1c1") {
				t.Errorf("get %s: exit %d, stdout %q, stderr %q; want %d and %q", tc.arg, code, stdout, stderr, tc.code, tc.stderr)
			}
		})
	}
	// A puzzle of digits only is still a puzzle, reported as one.
	code, stdout, _ := run(t, context.Background(), "", "get", "--redis-addrs", testenv.RedisAddr(), "12345")
	if code != ExitFailure || !strings.Contains(stdout, "error:") {
		t.Errorf("get 12345: exit %d, %q; want a bad puzzle's result", code, stdout)
	}
}

// TestWorkerStartLog: a worker's start-up log says it starts in a short
// line, and gives its configuration one section a line, none of them
// longer than a terminal's few lines.
func TestWorkerStartLog(t *testing.T) {
	newQueueEnv(t, "SUDOKU_LOG_LEVEL=info")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, []string{"worker"}, strings.NewReader(""), io.Discard, &stderr) }()
	waitFor(t, 30*time.Second, "worker started", &stderr, func() bool { return strings.Contains(stderr.String(), "worker started") })
	cancel()
	<-done
	log := stderr.String()
	for line := range strings.Lines(log) {
		if len(line) > 1000 { // was one line of 2,000
			t.Errorf("a start-up line of %d characters:\n%s", len(line), line)
		}
	}
	for _, want := range []string{`msg="sudoku worker starting"`, "config.nats.url=", "config.queue.batch_size=", "config.worker.max_nodes="} {
		if !strings.Contains(log, want) {
			t.Errorf("the start-up log has no %s:\n%s", want, log)
		}
	}
}

// TestSubmittedPlurals: what submit reports counts in words that agree
// with the numbers.
func TestSubmittedPlurals(t *testing.T) {
	for _, tc := range []struct {
		sub  producer.Submitted
		want string
	}{
		{producer.Submitted{ID: "j", Tally: job.Tally{Lines: 1, Queued: 1, Batches: 1}}, "job j: 1 line: 1 queued in 1 batch, 0 cached"},
		{producer.Submitted{ID: "j", Tally: job.Tally{Lines: 2, Queued: 2, Batches: 2}}, "job j: 2 lines: 2 queued in 2 batches, 0 cached"},
		{producer.Submitted{ID: "j", Tally: job.Tally{Lines: 0, Cached: 0}}, "job j: 0 lines: 0 queued in 0 batches"},
	} {
		var stderr bytes.Buffer
		cmd := newSubmitCmd()
		cmd.SetErr(&stderr)
		reportSubmitted(cmd, &tc.sub)
		if !strings.HasPrefix(stderr.String(), tc.want) {
			t.Errorf("reported %q, want %q...", stderr.String(), tc.want)
		}
	}
}

// TestNotAJobID: the job commands tell an argument that cannot be a job
// id from a job that is gone, before they ask NATS anything.
func TestNotAJobID(t *testing.T) {
	newQueueEnv(t)
	gone := job.NewID(job.DefaultOwner)
	_, serial, _ := job.SplitID(gone) // an id without its owner is none
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"job", "rm", "nonsense"}, ExitUsage, `"nonsense" is not a job id`},
		{[]string{"job", "status", "NONSENSE"}, ExitUsage, `"NONSENSE" is not a job id`},
		{[]string{"job", "wait", "x.y"}, ExitUsage, `"x.y" is not a job id`},
		{[]string{"job", "rm", gone, "nonsense"}, ExitUsage, `"nonsense" is not a job id`},
		{[]string{"job", "status", serial}, ExitUsage, `"` + serial + `" is not a job id`},
		{[]string{"job", "wait", "." + serial}, ExitUsage, `"` + "." + serial + `" is not a job id`},
		{[]string{"job", "rm", gone}, ExitFailure, "no job " + gone},
		{[]string{"job", "status", gone}, ExitFailure, "no job " + gone},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, context.Background(), "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}
