package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// fixture is the puzzles of testdata/17_clue_300.txt.
func fixture(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("testdata/17_clue_300.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ps = append(ps, sc.Text())
	}
	return ps
}

// env is one test's queue (unique stream, subjects and consumer) and store
// (unique key prefix) on the shared servers.
type env struct {
	t     testing.TB
	nc    *nats.Conn
	js    jetstream.JetStream
	q     *queue.Queue
	rdb   *redis.Client
	store *cache.Redis
}

func newEnv(t testing.TB, qo queue.Options) *env {
	t.Helper()
	nc := testenv.NATS(t)
	rdb := testenv.Redis(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name("wt")
	qo.Stream, qo.DLQStream, qo.Prefix, qo.Consumer = name, name+"_DLQ", name, name
	if qo.AckWait == 0 {
		qo.AckWait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := queue.Setup(ctx, js, qo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Delete(context.Background()) })
	prefix := name + ":"
	testenv.CleanupPrefix(t, rdb, prefix)
	return &env{t: t, nc: nc, js: js, q: q, rdb: rdb, store: cache.NewRedis(rdb, cache.RedisOptions{Prefix: prefix})}
}

// submit creates a job of puzzles in batches of size and publishes it.
func (e *env) submit(puzzles []string, size int) string {
	e.t.Helper()
	ctx := context.Background()
	id := testenv.Name("job")
	if err := e.store.CreateJob(ctx, id, time.Now()); err != nil {
		e.t.Fatal(err)
	}
	nb := (len(puzzles) + size - 1) / size
	if err := e.store.AddToJob(ctx, id, cache.JobDelta{Queued: int64(len(puzzles)), Batches: int64(nb)}); err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i < nb; i++ {
		b := queue.Batch{JobID: id, Index: uint64(i)}
		for j := i * size; j < min(len(puzzles), (i+1)*size); j++ {
			b.Items = append(b.Items, queue.Item{Index: uint64(j), Puzzle: puzzles[j]})
		}
		e.publish(&b)
	}
	if _, err := e.store.SealJob(ctx, id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) publish(b *queue.Batch) {
	e.t.Helper()
	m := nats.NewMsg(e.q.Opts.BulkSubject())
	m.Data = b.Append(nil)
	m.Header.Set(nats.MsgIdHdr, b.MsgID())
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
}

// waitJob waits until the job is finished, or fails the test after d.
func (e *env) waitJob(id string, d time.Duration) cache.Job {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		j, err := e.store.Job(context.Background(), id)
		if err == nil && j.IsFinished() {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s not finished after %v: %+v (err %v)", id, d, j, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkResults checks that every puzzle has its correct cached result.
func (e *env) checkResults(puzzles []string) {
	e.t.Helper()
	keys := make([]string, len(puzzles))
	for i, p := range puzzles {
		g, err := solver.Parse(p)
		if err != nil {
			keys[i] = cache.InputKey(p)
			continue
		}
		keys[i] = g.Key()
	}
	got, err := e.store.Get(context.Background(), keys)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, r := range got {
		if r == nil {
			e.t.Errorf("puzzle %d has no result", i)
			continue
		}
		g, err := solver.Parse(puzzles[i])
		if err != nil {
			if r.Status != result.StatusInvalid {
				e.t.Errorf("invalid puzzle %d: status %s", i, r.Status)
			}
			continue
		}
		want, err := solver.Solve(context.Background(), &g, solver.Options{})
		if err != nil || r.Status != result.StatusUnique || r.Solution != want.Solution.Digits() {
			e.t.Errorf("puzzle %d: got %+v", i, r)
		}
	}
}

// countingObserver counts batches by outcome.
type countingObserver struct {
	mu       sync.Mutex
	outcomes map[string]int
	puzzles  int
}

func (o *countingObserver) Batch(s *BatchStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.outcomes == nil {
		o.outcomes = map[string]int{}
	}
	o.outcomes[s.Outcome]++
	if s.Outcome == "acked" {
		o.puzzles += s.Puzzles
	}
}

func (o *countingObserver) get(outcome string) (int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcomes[outcome], o.puzzles
}

// runWorker starts a worker in this process on its own connection; the
// returned function stops it and waits.
func (e *env) runWorker(store Store, opts Options) (stop func()) {
	e.t.Helper()
	nc, err := nats.Connect(testenv.NATSURL())
	if err != nil {
		e.t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	q, err := queue.Setup(context.Background(), js, e.q.Opts)
	if err != nil {
		e.t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{e.t}, nil))
	}
	w := New(nc, q, store, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("worker Run: %v", err)
			}
			nc.Close()
		})
	}
	e.t.Cleanup(stop)
	return stop
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestTwoWorkersShareAJob(t *testing.T) {
	e := newEnv(t, queue.Options{})
	puzzles := fixture(t)
	var o1, o2 countingObserver
	e.runWorker(e.store, Options{Concurrency: 1, Observer: &o1})
	e.runWorker(e.store, Options{Concurrency: 1, Observer: &o2})
	id := e.submit(puzzles, 10)
	j := e.waitJob(id, 30*time.Second)
	if j.Done != int64(len(puzzles)) || j.Counts[result.StatusUnique] != int64(len(puzzles)) {
		t.Errorf("job = %+v", j)
	}
	e.checkResults(puzzles)
	n1, p1 := o1.get("acked")
	n2, p2 := o2.get("acked")
	t.Logf("worker 1: %d batches, %d puzzles; worker 2: %d batches, %d puzzles", n1, p1, n2, p2)
	if n1 == 0 || n2 == 0 {
		t.Errorf("a worker got no work: %d and %d batches", n1, n2)
	}
	if p1+p2 < len(puzzles) {
		t.Errorf("%d puzzles acked, want at least %d", p1+p2, len(puzzles))
	}
}

func TestInvalidPuzzlesInABatch(t *testing.T) {
	e := newEnv(t, queue.Options{})
	puzzles := fixture(t)[:20]
	bad := []string{
		strings.Repeat("1", 81),              // repeats
		"12345",                              // too short
		"hello<b>" + strings.Repeat(".", 73), // letters
	}
	all := append(append([]string{}, puzzles[:10]...), bad...)
	all = append(all, puzzles[10:]...)
	var o countingObserver
	e.runWorker(e.store, Options{Observer: &o})
	id := e.submit(all, 100)
	j := e.waitJob(id, 30*time.Second)
	if j.Counts[result.StatusInvalid] != int64(len(bad)) || j.Counts[result.StatusUnique] != int64(len(puzzles)) {
		t.Errorf("counts = %v", j.Counts)
	}
	e.checkResults(all)
	got, _ := e.store.Get(context.Background(), []string{cache.InputKey(bad[1])})
	if got[0] == nil || !strings.Contains(got[0].Error, "5 cells") {
		t.Errorf("result of a short line = %+v, want an error naming the cell count", got[0])
	}
	if n, _ := o.get("nak"); n != 0 {
		t.Errorf("%d naks: invalid puzzles must not be redelivered", n)
	}
}

func TestUndecodableMessageIsDeadLettered(t *testing.T) {
	e := newEnv(t, queue.Options{})
	var o countingObserver
	e.runWorker(e.store, Options{Observer: &o})
	m := nats.NewMsg(e.q.Opts.BulkSubject())
	m.Data = []byte("<html>not a batch</html>")
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	// The worker goes on with good work afterwards.
	puzzles := fixture(t)[:5]
	id := e.submit(puzzles, 5)
	e.waitJob(id, 30*time.Second)

	dlq, err := e.js.Stream(context.Background(), e.q.Opts.DLQStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := dlq.GetLastMsgForSubject(context.Background(), e.q.Opts.DLQSubject("undecodable"))
	if err != nil {
		t.Fatalf("no dead letter: %v", err)
	}
	if string(raw.Data) != "<html>not a batch</html>" || !strings.Contains(raw.Header.Get("Sudoku-Dlq-Error"), "version") {
		t.Errorf("dead letter = %q, headers %v", raw.Data, raw.Header)
	}
	// Terminated: no longer in the work stream. (The last batch's ack goes
	// out just after its results are stored: allow it a moment.)
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := e.q.Bulk.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer still has %d pending, %d awaiting ack", info.NumPending, info.NumAckPending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, _ := o.get("dead_letter"); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
}

func TestRedisDownMidJob(t *testing.T) {
	e := newEnv(t, queue.Options{})
	// A private Redis that keeps its data across the restart (append-only
	// file, synced on every write), so the job record survives.
	srv := testenv.RedisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	e.store = cache.NewRedis(rdb, cache.RedisOptions{Prefix: "t:"})

	puzzles := fixture(t)
	id := e.submit(puzzles, 10)
	var o countingObserver
	e.runWorker(e.store, Options{Concurrency: 2, Observer: &o, NakDelays: []time.Duration{200 * time.Millisecond}})
	// Stop Redis as soon as the first batch is done.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for _, p := o.get("acked"); p == 0; _, p = o.get("acked") {
			time.Sleep(time.Millisecond)
		}
		srv.Stop()
	}()
	<-stopped
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := o.get("nak"); n < 1; n, _ = o.get("nak") {
		if time.Now().After(deadline) {
			t.Fatal("no nak while Redis was down")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // down for a while: the worker keeps running
	if j, _ := o.get("acked"); j >= 30 {
		t.Fatalf("every batch acked with Redis down")
	}
	srv.Start()
	j := e.waitJob(id, 60*time.Second)
	if j.Done != int64(len(puzzles)) || j.Counts[result.StatusUnique] != int64(len(puzzles)) {
		t.Errorf("job = %+v", j)
	}
	e.checkResults(puzzles)
	naks, _ := o.get("nak")
	dead, _ := o.get("dead_letter")
	t.Logf("naks while Redis was down: %d", naks)
	if dead != 0 {
		t.Errorf("%d dead letters", dead)
	}
}

func TestInteractiveEventCarriesResult(t *testing.T) {
	e := newEnv(t, queue.Options{})
	e.runWorker(e.store, Options{})
	p := fixture(t)[0]
	id := testenv.Name("get")
	sub, err := e.nc.SubscribeSync(e.q.Opts.EventSubject(id))
	if err != nil {
		t.Fatal(err)
	}
	b := queue.Batch{JobID: id, Items: []queue.Item{{Puzzle: p}}}
	m := nats.NewMsg(e.q.Opts.InteractiveSubject())
	m.Data = b.Append(nil)
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Results []result.Result `json:"results"`
	}
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Results) != 1 || ev.Results[0].Status != result.StatusUnique {
		t.Fatalf("event = %s", msg.Data)
	}
}

func TestPanicBecomesError(t *testing.T) {
	e := newEnv(t, queue.Options{})
	puzzles := fixture(t)[:10]
	poison, _ := solver.Parse(puzzles[3])
	nc := testenv.NATS(t)
	w := New(nc, e.q, e.store, Options{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	w.solve = func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error) {
		if *g == poison {
			panic(errors.New("boom"))
		}
		return sv.Solve(ctx, g, opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	id := e.submit(puzzles, 10)
	j := e.waitJob(id, 30*time.Second)
	if j.Counts[result.StatusGaveUp] != 1 || j.Counts[result.StatusUnique] != 9 {
		t.Fatalf("counts = %v", j.Counts)
	}
	got, _ := e.store.Get(context.Background(), []string{poison.Key()})
	if got[0] == nil || !strings.Contains(got[0].Error, "internal error: boom") {
		t.Fatalf("result of the puzzle that panicked = %+v", got[0])
	}
}
