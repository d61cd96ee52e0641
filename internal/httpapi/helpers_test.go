package httpapi

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/local"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// The hermetic tests run on an embedded NATS server of their own (the
// real nats-server, in this process, without a port) and a memory cache;
// real_test.go runs them against the shared NATS and Redis.

// env is one test's API: its queue, cache, server and client.
type env struct {
	t  testing.TB
	nc *nats.Conn
	q  *queue.Queue
	// raw is the cache under the faults; fault is what the API and the
	// workers use, each through a Guard of its own, as separate processes
	// on one Redis would.
	raw    cache.Cache
	fault  *faultCache
	guard  *cache.Guard // the API's
	srv    *Server
	url    string
	client *http.Client
	// stopWorker stops the newest in-process worker, if one runs.
	stopWorker func()
}

// envOptions say how to build an env.
type envOptions struct {
	opts     Options
	noWorker bool
	// server is the NATS server: "embedded" (the default: a new one for
	// the test) or "shared".
	server string
	// nc, when set, is a connection to a private server to set the queue
	// up on (the tests that stop and start it).
	nc *nats.Conn
	// cache, when set, is used instead of a memory cache.
	cache cache.Cache
}

// newEnv sets up a queue with unique names, a cache, a worker (unless
// noWorker) and an API server on httptest.
func newEnv(t testing.TB, eo envOptions) *env {
	t.Helper()
	e := &env{t: t}
	switch {
	case eo.nc != nil:
		// In files, as a deployment keeps them: the streams outlive a
		// restart of the private server (the tests that restart it).
		e.nc, e.q = eo.nc, setupQueue(t, eo.nc, false)
	default:
		tq := testenv.NewQueue(t, cmp.Or(eo.server, "embedded"), queue.Options{AckWait: 5 * time.Second})
		e.nc, e.q = tq.NC, tq.Queue
	}
	e.raw = eo.cache
	if e.raw == nil {
		e.raw = cache.NewMemory(0)
	}
	e.fault = &faultCache{Cache: e.raw}
	e.guard = newGuard(t, e.fault)
	if eo.opts.Logger == nil {
		eo.opts.Logger = testLogger(t)
	}
	if eo.opts.StatsInterval == 0 {
		eo.opts.StatsInterval = 200 * time.Millisecond
	}
	if eo.opts.Producer.BatchSize == 0 {
		eo.opts.Producer.BatchSize = 50
	}
	var err error
	e.srv, err = New(e.q, e.guard, eo.opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(e.srv.Handler())
	t.Cleanup(func() {
		e.srv.Close() // ends the streams, so that ts.Close does not wait for them
		ts.Close()
	})
	e.url = ts.URL
	e.client = ts.Client()
	if !eo.noWorker {
		e.startWorker()
	}
	return e
}

// setupQueue sets up a queue with unique names on nc, in memory or in
// files, removed when the test ends.
func setupQueue(t testing.TB, nc *nats.Conn, memory bool) *queue.Queue {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name("api")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := queue.Setup(ctx, js, queue.Options{Stream: name, DLQStream: name + "_DLQ", Prefix: strings.ToLower(name),
		Consumer: strings.ToLower(name), Memory: memory, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = q.Delete(ctx)
	})
	return q
}

// newGuard returns a guard on c that logs through t and probes a cache
// that is down every 100ms at most.
func newGuard(t testing.TB, c cache.Cache) *cache.Guard {
	return cache.NewGuard(c, cache.GuardOptions{Name: "test cache", Timeout: time.Second,
		MaxBackoff: 100 * time.Millisecond, Logger: testLogger(t)})
}

// startWorker runs a worker in this process, on the faulty cache through
// a guard of its own, until the test ends or stopWorker is called. It
// returns once the worker serves.
func (e *env) startWorker() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := worker.New(e.nc, e.q, newGuard(e.t, e.fault), worker.Options{Concurrency: 2,
		ShutdownTimeout: 5 * time.Second, Logger: testLogger(e.t)})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		cancel()
		e.t.Fatalf("worker: %v", err)
	}
	var once sync.Once
	e.stopWorker = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(e.stopWorker)
}

// waitCached waits until the cache holds the result of every puzzle (the
// workers fill it after they publish a batch's results).
func (e *env) waitCached(puzzles []string) {
	e.t.Helper()
	keys := make([]job.Key, len(puzzles))
	for i, p := range puzzles {
		g, err := solver.Parse(p)
		if err != nil {
			e.t.Fatal(err)
		}
		keys[i] = job.KeyOf(&g)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := e.raw.Get(context.Background(), keys)
		if err != nil {
			e.t.Fatal(err)
		}
		missing := 0
		for _, o := range got {
			if o == nil {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d of %d puzzles not cached after 10s", missing, len(puzzles))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failedJob submits a job straight through the producer whose input
// breaks off after its first lines with cause: a job marked failed.
func (e *env) failedJob(lines []string, cause string) string {
	e.t.Helper()
	in := io.MultiReader(strings.NewReader(strings.Join(lines, "\n")+"\n"), iotest.ErrReader(errors.New(cause)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := producer.New(e.q, e.guard, producer.Options{BatchSize: 10, Logger: testLogger(e.t)}).
		Submit(ctx, input.NewReader(in))
	if !errors.Is(err, producer.ErrSubmit) || !strings.Contains(err.Error(), cause) {
		e.t.Fatalf("a submission that breaks off: %v, want an error that matches producer.ErrSubmit", err)
	}
	return sub.ID
}

// testLogger logs warnings and errors through t.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// do sends a request and returns the answer with its body read.
func (e *env) do(method, path, contentType string, body io.Reader, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return res, data
}

// get is do for GET.
func (e *env) get(path string, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	return e.do(http.MethodGet, path, "", nil, header...)
}

// post is do for POST with a text body.
func (e *env) post(path, body string, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	return e.do(http.MethodPost, path, "text/plain", strings.NewReader(body), header...)
}

// decode decodes a JSON answer into v.
func decode(t testing.TB, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("answer is not the JSON expected: %v: %s", err, data)
	}
}

// wantError checks an error answer: status, code, and that the message
// contains each of parts.
func wantError(t testing.TB, res *http.Response, data []byte, status int, code string, parts ...string) errorBody {
	t.Helper()
	var b errorBody
	if res.StatusCode != status {
		t.Errorf("status %d, want %d: %s", res.StatusCode, status, data)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, data)
	}
	if b.Error.Code != code {
		t.Errorf("code %q, want %q: %s", b.Error.Code, code, data)
	}
	for _, p := range parts {
		if !strings.Contains(b.Error.Message, p) {
			t.Errorf("message %q does not mention %q", b.Error.Message, p)
		}
	}
	if strings.Contains(string(data), "goroutine") || strings.Contains(string(data), ".go:") {
		t.Errorf("error body looks like a stack trace: %s", data)
	}
	if status >= 500 && status != http.StatusInternalServerError && res.Header.Get("Retry-After") == "" {
		t.Errorf("status %d without Retry-After", status)
	}
	return b
}

// readLines returns the lines of a test file.
func readLines(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	clue17  = "testdata/17_clue_200.txt"
	hardest = "testdata/hardest_200.txt"
)

// variants makes n distinct valid puzzles from a fixture.
func variants(t testing.TB, n int, fixture string) []string {
	return testenv.Puzzles(t, fixture, n)
}

// relabelled returns n hard puzzles from the hardest fixture with their
// digits permuted at random (from seed): distinct and uncached, as many as
// needed.
func relabelled(t testing.TB, n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed))
	hard := readLines(t, hardest)
	out := make([]string, 0, n)
	seen := make(map[string]bool, n)
	for i := 0; len(out) < n; i++ {
		perm := rng.Perm(9)
		b := []byte(hard[i%len(hard)])
		for j, c := range b {
			if c >= '1' && c <= '9' {
				b[j] = byte('1' + perm[c-'1'])
			}
		}
		if p := string(b); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// localText returns what `sudoku solve --local` prints for text: every
// result in input order, in the text format.
func localText(t testing.TB, text string, format result.Format) string {
	t.Helper()
	var sb strings.Builder
	w := result.NewWriter(&sb, format)
	err := local.Run(context.Background(), input.NewReader(strings.NewReader(text)), w.Write, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// faultCache is a cache that can be made to fail (as if Redis were down)
// or to panic.
type faultCache struct {
	cache.Cache
	down  atomic.Bool
	panic atomic.Bool
}

var errCacheDown = errors.New("test: cache down")

func (f *faultCache) check() error {
	if f.panic.Load() {
		panic("test: cache panics")
	}
	if f.down.Load() {
		return errCacheDown
	}
	return nil
}

func (f *faultCache) Get(ctx context.Context, keys []job.Key) ([]*job.Outcome, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Cache.Get(ctx, keys)
}

func (f *faultCache) Put(ctx context.Context, entries []cache.Entry) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Cache.Put(ctx, entries)
}

func (f *faultCache) Ping(ctx context.Context) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Cache.Ping(ctx)
}
