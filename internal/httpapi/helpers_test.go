package httpapi

import (
	"bufio"
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
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/embedded"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/local"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// The hermetic tests share one embedded NATS server (the real
// nats-server, in this process, without a port); each test has its own
// stream, subjects and consumers on it, and its own in-memory store.
var (
	embeddedOnce sync.Once
	embeddedSrv  *embedded.Server
	embeddedErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if embeddedSrv != nil {
		embeddedSrv.Shutdown()
	}
	os.Exit(code)
}

// embeddedNATS connects to the shared embedded server.
func embeddedNATS(t testing.TB) *nats.Conn {
	t.Helper()
	embeddedOnce.Do(func() { embeddedSrv, embeddedErr = embedded.Start(embedded.Options{}) })
	if embeddedErr != nil {
		t.Fatal(embeddedErr)
	}
	nc, err := embeddedSrv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// env is one test's API: its queue, store, server and client.
type env struct {
	t      testing.TB
	nc     *nats.Conn
	q      *queue.Queue
	store  *faultStore
	raw    cache.Store // the store under the faults, which the worker uses
	srv    *Server
	url    string
	client *http.Client
	// stopWorker stops the in-process worker, if one runs.
	stopWorker func()
}

// envOptions say how to build an env.
type envOptions struct {
	opts     Options
	noWorker bool
	// nc and store, when set, are used instead of the embedded server and
	// a memory store (the tests against the real servers).
	nc    *nats.Conn
	store cache.Store
}

// newEnv sets up a queue with unique names, a store, a worker (unless
// noWorker) and an API server on httptest.
func newEnv(t testing.TB, eo envOptions) *env {
	t.Helper()
	nc := eo.nc
	if nc == nil {
		nc = embeddedNATS(t)
	}
	var store cache.Store = eo.store
	if store == nil {
		store = cache.NewMemory()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name("api")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := queue.Setup(ctx, js, queue.Options{Stream: name, DLQStream: name + "_DLQ", Prefix: name, Consumer: name,
		Memory: true, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = q.Delete(ctx)
	})
	e := &env{t: t, nc: nc, q: q, store: &faultStore{Store: store}, raw: store}
	if eo.opts.Logger == nil {
		eo.opts.Logger = testLogger(t)
	}
	if eo.opts.StatsInterval == 0 {
		eo.opts.StatsInterval = 200 * time.Millisecond
	}
	if eo.opts.Producer.BatchSize == 0 {
		eo.opts.Producer.BatchSize = 50
	}
	e.srv, err = New(q, e.store, eo.opts)
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

// startWorker runs a worker pool in this process until the test ends.
func (e *env) startWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	w := worker.New(e.nc, e.q, e.raw, worker.Options{Concurrency: 2, ShutdownTimeout: 5 * time.Second,
		Logger: testLogger(e.t)})
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	e.stopWorker = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(e.stopWorker)
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

// faultStore is a store that can be made to fail (as if Redis were down)
// or to panic.
type faultStore struct {
	Store
	down  atomic.Bool
	panic atomic.Bool
}

var errStoreDown = errors.New("test: store down")

func (f *faultStore) check() error {
	if f.panic.Load() {
		panic("test: store panics")
	}
	if f.down.Load() {
		return errStoreDown
	}
	return nil
}

func (f *faultStore) Get(ctx context.Context, keys []string) ([]*result.Result, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, keys)
}

func (f *faultStore) Put(ctx context.Context, rs []result.Result) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.Put(ctx, rs)
}

func (f *faultStore) CreateJob(ctx context.Context, id string, created time.Time) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.CreateJob(ctx, id, created)
}

func (f *faultStore) AddToJob(ctx context.Context, id string, d cache.JobDelta) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.AddToJob(ctx, id, d)
}

func (f *faultStore) SealJob(ctx context.Context, id string) (bool, error) {
	if err := f.check(); err != nil {
		return false, err
	}
	return f.Store.SealJob(ctx, id)
}

func (f *faultStore) Job(ctx context.Context, id string) (cache.Job, error) {
	if err := f.check(); err != nil {
		return cache.Job{}, err
	}
	return f.Store.Job(ctx, id)
}

func (f *faultStore) Jobs(ctx context.Context, limit int) ([]cache.Job, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Store.Jobs(ctx, limit)
}

func (f *faultStore) Order(ctx context.Context, id string, from, n int64) ([]cache.OrderEntry, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Store.Order(ctx, id, from, n)
}

func (f *faultStore) Ping(ctx context.Context) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.Ping(ctx)
}
