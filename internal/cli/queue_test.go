package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestMain lets the test binary act as the sudoku command, so tests can
// start real worker processes without building anything.
func TestMain(m *testing.M) {
	if os.Getenv("SUDOKU_TEST_AS_CLI") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Execute(ctx)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// queueEnv gives a test its own stream, subjects, consumers and key
// prefix on the shared servers, through the environment (for in-process
// runs and for the worker processes it starts).
type queueEnv struct {
	t       *testing.T
	env     []string
	workers []*exec.Cmd // started
	natsURL string      // where the env's processes connect
	prefix  string      // the queue's subject prefix
}

func newQueueEnv(t *testing.T, extra ...string) *queueEnv {
	t.Helper()
	testenv.NATS(t) // skip (or fail on CI) when the services are not there
	rdb := testenv.Redis(t)
	name := testenv.Name("cli")
	prefix := name + ":"
	testenv.CleanupPrefix(t, rdb, prefix)
	e := &queueEnv{t: t, prefix: name, env: append([]string{
		"SUDOKU_NATS_URL=" + testenv.NATSURL(),
		"SUDOKU_REDIS_ADDRS=" + testenv.RedisAddr(),
		"SUDOKU_QUEUE_STREAM=" + name,
		"SUDOKU_QUEUE_DLQ_STREAM=" + name + "_DLQ",
		"SUDOKU_QUEUE_SUBJECT_PREFIX=" + name,
		"SUDOKU_QUEUE_CONSUMER=" + name,
		"SUDOKU_QUEUE_BATCH_SIZE=50",
		"SUDOKU_REDIS_KEY_PREFIX=" + prefix,
		"SUDOKU_LOG_LEVEL=warn",
	}, extra...)}
	for _, kv := range e.env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
		if k == "SUDOKU_NATS_URL" {
			e.natsURL = v
		}
	}
	t.Cleanup(func() {
		nc := testenv.NATS(t)
		for _, s := range []string{name, name + "_DLQ", name + "_RESULTS", "KV_" + name + "_JOBS"} {
			_, _ = nc.Request("$JS.API.STREAM.DELETE."+s, nil, 2*time.Second)
		}
	})
	return e
}

// queue sets up the env's queue in this process, for what the CLI does
// not do (publishing by hand, breaking a stream).
func (e *queueEnv) queue() *queue.Queue {
	e.t.Helper()
	js, err := jetstream.New(testenv.NATS(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	// The configuration the env gives, so that Setup changes nothing.
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	q, err := queue.Setup(context.Background(), js, app.QueueOptions(cfg.Queue, cfg.Job.ResultTTL))
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

// jobDone returns how many lines of job id have their results, from job
// status.
func jobDone(t *testing.T, id string) int {
	t.Helper()
	code, out, stderr := run(t, context.Background(), "", "job", "status", id)
	if code != ExitOK {
		t.Fatalf("job status: exit %d: %s", code, stderr)
	}
	i := strings.Index(out, "done ")
	if i < 0 {
		t.Fatalf("job status without a done line:\n%s", out)
	}
	n, err := strconv.Atoi(strings.Fields(out[i:])[1])
	if err != nil {
		t.Fatalf("job status: %v in\n%s", err, out)
	}
	return n
}

// startWorker starts a worker process (this test binary as the CLI).
func (e *queueEnv) startWorker() *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "worker")
	cmd.Env = append(append(os.Environ(), "SUDOKU_TEST_AS_CLI=1"), e.env...)
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.workers = append(e.workers, cmd)
	alive := 0
	for _, w := range e.workers {
		if w.ProcessState == nil {
			alive++
		}
	}
	e.waitWorkers(alive, &logs)
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				e.t.Errorf("worker did not stop within 20s of SIGTERM")
			}
		}
		if e.t.Failed() {
			e.t.Logf("worker log:\n%s", logs.String())
		}
	})
	return cmd
}

// waitWorkers waits until n instances of the micro service on the env's
// queue (its solve subject) answer: the workers are pulling and serving.
// Workers of other queues on the same server do not count.
func (e *queueEnv) waitWorkers(n int, logs fmt.Stringer) {
	e.t.Helper()
	nc := testenv.NATS(e.t)
	if e.natsURL != testenv.NATSURL() {
		// A private server.
		var err error
		if nc, err = nats.Connect(e.natsURL); err != nil {
			e.t.Fatal(err)
		}
		defer nc.Close()
	}
	subject, _ := micro.ControlSubject(micro.InfoVerb, queue.ServiceName, "")
	solve := queue.Options{Prefix: e.prefix}.SolveSubject()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			e.t.Fatal(err)
		}
		_ = nc.PublishRequest(subject, inbox, nil)
		got := 0
		for {
			m, err := sub.NextMsg(200 * time.Millisecond)
			if err != nil {
				break
			}
			var info micro.Info
			if json.Unmarshal(m.Data, &info) != nil {
				continue
			}
			for _, ep := range info.Endpoints {
				if ep.Subject == solve {
					got++
					break
				}
			}
		}
		_ = sub.Unsubscribe()
		if got >= n {
			return
		}
	}
	e.t.Fatalf("%d workers did not all answer a ping within 20s:\n%s", n, logs)
}

// puzzles returns the first n lines of the 17-clue fixture.
func puzzles(t *testing.T, n int) []string {
	t.Helper()
	ls := readLines(t, clue17)
	if n > len(ls) {
		t.Fatalf("fixture has %d lines, want %d", len(ls), n)
	}
	return ls[:n]
}

// writeFile writes lines to a file in a temporary folder.
func writeFile(t *testing.T, lines []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// localOut returns what solve --local prints for file.
func localOut(t *testing.T, file string, args ...string) string {
	t.Helper()
	_, out, _ := run(t, context.Background(), "", append([]string{"solve", "--local", file}, args...)...)
	return out
}

// manyPuzzles makes n distinct valid puzzles from a fixture (default the
// 17-clue one).
func manyPuzzles(t *testing.T, n int, fixture ...string) []string {
	name := clue17
	if len(fixture) > 0 {
		name = fixture[0]
	}
	return testenv.Puzzles(t, name, n)
}

func TestSubmitWaitTwoWorkersMatchesLocal(t *testing.T) {
	e := newQueueEnv(t)
	e.startWorker()
	e.startWorker()
	file := writeFile(t, manyPuzzles(t, 3000))
	code, out, stderr := run(t, context.Background(), "", "submit", "--wait", file)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := localOut(t, file); out != want {
		t.Fatalf("submit --wait output differs from solve --local (%d vs %d bytes)", len(out), len(want))
	}
	if !strings.Contains(stderr, "3000 unique") {
		t.Errorf("summary: %q", stderr)
	}
}

func TestSubmitRepeatedInvalidCached(t *testing.T) {
	e := newQueueEnv(t)
	e.startWorker()
	ps := puzzles(t, 40)
	// Cache the first 10 with a first job.
	code, _, stderr := run(t, context.Background(), "", "submit", "--wait", writeFile(t, ps[:10]))
	if code != ExitOK {
		t.Fatalf("first job: exit %d: %s", code, stderr)
	}
	lines := append([]string{"# a comment", ""}, ps[:20]...) // 10 cached, 10 new
	lines = append(lines, ps[5], ps[15], ps[15])             // repeated
	lines = append(lines, "12345", strings.Repeat("1", 81), "abc")
	lines = append(lines, ps[20:]...)
	file := writeFile(t, lines)
	for _, format := range []string{"text", "jsonl"} {
		code, out, stderr := run(t, context.Background(), "", "submit", "--wait", "--format", format, file)
		if code != ExitFailure {
			t.Errorf("%s: exit %d, want 1 (invalid lines): %s", format, code, stderr)
		}
		if format == "jsonl" {
			// solve --local knows no cache: the queue says which came
			// from it.
			// Its run comes after the text one: every puzzle is cached.
			if n := strings.Count(out, `,"cached":true`); n != 40 {
				t.Errorf("%d results marked cached, want 40", n)
			}
			out = strings.ReplaceAll(out, `,"cached":true`, "")
		}
		if want := localOut(t, file, "--format", format); out != want {
			ol, wl := strings.Split(out, "\n"), strings.Split(want, "\n")
			for i := range min(len(ol), len(wl)) {
				if ol[i] != wl[i] {
					t.Errorf("%s: output line %d differs from solve --local:\n%s\nwant:\n%s", format, i+1, ol[i], wl[i])
					break
				}
			}
			if len(ol) != len(wl) {
				t.Errorf("%s: %d lines, solve --local gives %d", format, len(ol), len(wl))
			}
		}
		if format == "text" {
			for _, s := range []string{"line 26: solver: 5 cells, want 81", "line 27: solver: digit 1 repeats in row 1",
				"46 lines: 30 queued", "10 cached", "3 repeated", "3 invalid",
				": 43 unique, 3 invalid (30 from the workers, 10 from the cache, 3 repeats of earlier lines)\n"} {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		}
	}
}

func TestWorkerKilledMidJob(t *testing.T) {
	e := newQueueEnv(t, "SUDOKU_QUEUE_ACK_WAIT=2s", "SUDOKU_QUEUE_BATCH_SIZE=20", "SUDOKU_WORKER_CONCURRENCY=1")
	victim := e.startWorker()
	// Hard puzzles (~0.1 ms each): the job lasts long enough to kill the
	// worker in the middle of it.
	file := writeFile(t, manyPuzzles(t, 4000, hardest))
	code, out, stderr := run(t, context.Background(), "", "submit", file)
	if code != ExitOK {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	deadline := time.Now().Add(20 * time.Second)
	for jobDone(t, id) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker did nothing in 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	done := jobDone(t, id)
	if done >= 4000 {
		t.Fatalf("the job finished before the worker was killed")
	}
	t.Logf("killed the worker with %d of 4000 puzzles done", done)
	e.startWorker()
	code, out, stderr = run(t, context.Background(), "", "job", "wait", id)
	if code != ExitOK {
		t.Fatalf("job wait: exit %d: %s", code, stderr)
	}
	if want := localOut(t, file); out != want {
		t.Fatal("results after a killed worker differ from solve --local")
	}
	_, status, _ := run(t, context.Background(), "", "job", "status", id)
	for _, s := range []string{"state     finished", "done      4000 of 4000 lines (100.0%)", "results   4000 unique", "unsolved  0 "} {
		if !strings.Contains(status, s) {
			t.Errorf("job status lacks %q:\n%s", s, status)
		}
	}
}

func TestSubmitInterruptedThenJobWait(t *testing.T) {
	e := newQueueEnv(t)
	file := writeFile(t, manyPuzzles(t, 500))
	// No worker yet: --wait waits until interrupted.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	code, _, stderr := run(t, ctx, "", "submit", "--wait", file)
	if code != ExitInterrupted || !strings.Contains(stderr, "sudoku job wait ") {
		t.Fatalf("exit %d, stderr %q; want 130 and how to resume", code, stderr)
	}
	id := strings.Fields(stderr[strings.Index(stderr, "sudoku job wait "):])[3]
	e.startWorker()
	code, out, stderr := run(t, context.Background(), "", "job", "wait", id)
	if code != ExitOK {
		t.Fatalf("job wait %s: exit %d: %s", id, code, stderr)
	}
	if want := localOut(t, file); out != want {
		t.Fatal("job wait output differs from solve --local")
	}
	_, list, _ := run(t, context.Background(), "", "job", "list")
	if !strings.Contains(list, id) || !strings.Contains(list, "finished") {
		t.Errorf("job list:\n%s", list)
	}
}

func TestGet(t *testing.T) {
	e := newQueueEnv(t)
	p := puzzles(t, 3)
	code, _, stderr := run(t, context.Background(), "", "get", p[0])
	if code != ExitFailure || !strings.Contains(stderr, "not in the cache") {
		t.Fatalf("get of an uncached puzzle: exit %d, stderr %q", code, stderr)
	}
	e.startWorker()
	code, out, stderr := run(t, context.Background(), "", "get", "--solve", p[0])
	if code != ExitOK || out != localOut(t, writeFile(t, p[:1])) {
		t.Fatalf("get --solve: exit %d, out %q, stderr %q", code, out, stderr)
	}
	// Now cached, by puzzle and by key.
	code, out2, _ := run(t, context.Background(), "", "get", p[0])
	if code != ExitOK || out2 != out {
		t.Fatalf("get after --solve: exit %d, %q", code, out2)
	}
	_, js, _ := run(t, context.Background(), "", "get", "--format", "jsonl", p[0])
	key := js[strings.Index(js, `"key":"`)+7:][:64]
	if code, out3, _ := run(t, context.Background(), "", "get", key); code != ExitOK || out3 != out {
		t.Fatalf("get KEY: exit %d, %q", code, out3)
	}
	code, _, stderr = run(t, context.Background(), "", "get", "12x")
	if code != ExitFailure {
		t.Fatalf("get of a bad puzzle: exit %d, %s", code, stderr)
	}
}

func TestSolveTouchesNothingExternal(t *testing.T) {
	// Point every service at a port nothing listens on: solve must still
	// work, on the embedded server and the in-process cache.
	port := testenv.FreePort(t)
	t.Setenv("SUDOKU_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", port))
	t.Setenv("SUDOKU_REDIS_ADDRS", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("SUDOKU_REDIS_DIAL_TIMEOUT", "200ms")
	file := writeFile(t, append(puzzles(t, 200), "bad line"))
	code, out, stderr := run(t, context.Background(), "", "solve", file)
	if code != ExitFailure {
		t.Fatalf("exit %d, want 1 (one bad line): %s", code, stderr)
	}
	if want := localOut(t, file); out != want {
		t.Fatalf("solve output differs from solve --local")
	}
	if !strings.Contains(stderr, "200 unique, 1 invalid") {
		t.Errorf("summary: %q", stderr)
	}
}

func TestJobRm(t *testing.T) {
	newQueueEnv(t)
	file := writeFile(t, puzzles(t, 30))
	code, out, stderr := run(t, context.Background(), "", "submit", file) // no worker: its work waits
	if code != ExitOK {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	if code, _, stderr := run(t, context.Background(), "", "job", "rm", id); code != ExitOK || !strings.Contains(stderr, "job "+id+" removed") {
		t.Fatalf("job rm: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{{"job", "status", id}, {"job", "wait", id}, {"job", "rm", id}} {
		code, _, stderr := run(t, context.Background(), "", args...)
		if code != ExitFailure || !strings.Contains(stderr, "no job "+id) {
			t.Errorf("%v after rm: exit %d, %q", args, code, stderr)
		}
	}
}

func TestSubmitChecksTheOutputFirst(t *testing.T) {
	newQueueEnv(t)
	file := writeFile(t, puzzles(t, 5))
	bad := filepath.Join(t.TempDir(), "missing", "out.txt")
	code, _, stderr := run(t, context.Background(), "", "submit", "--wait", "--out", bad, file)
	if code != ExitUsage || !strings.Contains(stderr, "--out") {
		t.Fatalf("submit --out into a missing folder: exit %d, %q; want 2 naming --out", code, stderr)
	}
	_, list, _ := run(t, context.Background(), "", "job", "list")
	if strings.Count(strings.TrimSpace(list), "\n") != 0 {
		t.Errorf("a job was created all the same:\n%s", list)
	}
}

func TestRedisDownJobsGoOn(t *testing.T) {
	// Redis is only a cache: with it down for the producer and the
	// workers, a job completes all the same.
	e := newQueueEnv(t, fmt.Sprintf("SUDOKU_REDIS_ADDRS=127.0.0.1:%d", testenv.FreePort(t)), "SUDOKU_REDIS_DIAL_TIMEOUT=200ms",
		"SUDOKU_LOG_LEVEL=warn")
	e.startWorker()
	file := writeFile(t, manyPuzzles(t, 300))
	code, out, stderr := run(t, context.Background(), "", "submit", "--wait", file)
	if code != ExitOK {
		t.Fatalf("submit --wait with Redis down: exit %d: %s", code, stderr)
	}
	if out != localOut(t, file) {
		t.Fatal("results with Redis down differ from solve --local")
	}
	if !strings.Contains(stderr, "Redis not reachable") {
		t.Errorf("no word of Redis being down: %s", stderr)
	}
}

func TestCommandsUseOnlyWhatTheyNeed(t *testing.T) {
	e := newQueueEnv(t)
	e.startWorker()
	p := puzzles(t, 1)[0]
	code, want, _ := run(t, context.Background(), "", "get", "--solve", p)
	if code != ExitOK {
		t.Fatalf("get --solve: exit %d", code)
	}
	dead := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	// get of a cached puzzle reads Redis only.
	t.Setenv("SUDOKU_NATS_URL", "nats://"+dead)
	if code, out, stderr := run(t, context.Background(), "", "get", p); code != ExitOK || out != want {
		t.Errorf("get with NATS down: exit %d, %q, %s", code, out, stderr)
	}
	// Job commands read JetStream only.
	t.Setenv("SUDOKU_NATS_URL", testenv.NATSURL())
	t.Setenv("SUDOKU_REDIS_ADDRS", dead)
	if code, _, stderr := run(t, context.Background(), "", "job", "list"); code != ExitOK || strings.Contains(stderr, "Redis") {
		t.Errorf("job list with Redis down: exit %d, %s", code, stderr)
	}
	// get KEY with Redis down says so.
	t.Setenv("SUDOKU_REDIS_DIAL_TIMEOUT", "200ms")
	if code, _, stderr := run(t, context.Background(), "", "get", p); code != ExitFailure || !strings.Contains(stderr, "Redis at "+dead) {
		t.Errorf("get with Redis down: exit %d, %q", code, stderr)
	}
}

func TestNATSWithoutJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Setenv("SUDOKU_NATS_URL", srv.ClientURL())
	code, _, stderr := run(t, context.Background(), "", "job", "list")
	if code != ExitFailure || !strings.Contains(stderr, "does not have JetStream enabled") || !strings.Contains(stderr, "-js") {
		t.Errorf("job list on a server without JetStream: exit %d, %q", code, stderr)
	}
}
