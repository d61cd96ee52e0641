package metrics

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// failingCache is a cache that fails every call while down is set, as
// Redis does when it is unreachable.
type failingCache struct {
	cache.Cache
	down atomic.Bool
}

var errDown = errors.New("test: cache down")

func (c *failingCache) Get(ctx context.Context, keys []job.Key) ([]*job.Outcome, error) {
	if c.down.Load() {
		return nil, errDown
	}
	return c.Cache.Get(ctx, keys)
}

func (c *failingCache) Put(ctx context.Context, entries []cache.Entry) error {
	if c.down.Load() {
		return errDown
	}
	return c.Cache.Put(ctx, entries)
}

// TestMetricsAfterJobs runs a worker with metrics on the shared NATS and
// Redis through jobs, a forged batch, a message that does not decode and
// a cache outage, and checks what /metrics says about them, and /readyz.
func TestMetricsAfterJobs(t *testing.T) {
	q := testenv.NewQueue(t, "shared", queue.Options{AckWait: 5 * time.Second})
	rdb := testenv.Redis(t)
	prefix := testenv.Name("mt") + ":"
	testenv.CleanupPrefix(t, rdb, prefix)
	redisCache := cache.NewRedis(rdb, cache.RedisOptions{Prefix: prefix})
	fc := &failingCache{Cache: redisCache}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// As `sudoku worker` wires them: the guard reports its failed calls,
	// and the gauge reads whether its lookups work.
	m := NewWorker()
	guard := cache.NewGuard(fc, cache.GuardOptions{Logger: log, MaxBackoff: 100 * time.Millisecond})
	guard.SetOnError(m.CacheError)
	m.SetCacheUp(func() bool { down, _ := guard.Down(); return guard.Enabled() && !down })
	w := worker.New(q.NC, q.Queue, guard, worker.Options{Concurrency: 2, Observer: m, Logger: log})
	m.SetInFlight(w.InFlight)
	srv, err := Listen("127.0.0.1:0", Handler(m.Registry(), NATSCheck(q.NC), PingCheck("redis", redisCache.Ping)))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr()
	runCtx, stop := context.WithCancel(ctx)
	srvDone, wDone := make(chan error, 1), make(chan error, 1)
	go func() { srvDone <- srv.Run(runCtx) }()
	go func() { wDone <- w.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-wDone; err != nil {
			t.Errorf("worker: %v", err)
		}
		if err := <-srvDone; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	}()
	select {
	case <-w.Ready():
	case err := <-wDone:
		t.Fatalf("worker: %v", err)
	}

	data, err := os.ReadFile("testdata/17_clue_100.txt")
	if err != nil {
		t.Fatal(err)
	}
	puzzles := strings.Fields(string(data))
	n := len(puzzles)
	keys := make([]job.Key, n)
	for i, p := range puzzles {
		g, err := solver.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = job.KeyOf(&g)
	}
	// fresh are 10 other puzzles: the first 10 relabelled.
	var fresh strings.Builder
	for _, p := range puzzles[:10] {
		fresh.WriteString(strings.NewReplacer("1", "2", "2", "1").Replace(p) + "\n")
	}
	// submit runs a job of text in batches of 10 and reads its results.
	submit := func(text string, force bool) {
		t.Helper()
		p := producer.New(q.Queue, guard, producer.Options{BatchSize: 10, Force: force, Logger: log})
		sub, err := p.Submit(ctx, input.NewReader(strings.NewReader(text)))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := producer.Follow(ctx, q.Queue, sub.ID, func(result.Result) error { return nil },
			producer.FollowOptions{Logger: log})
		if err != nil {
			t.Fatalf("job %s: %v", sub.ID, err)
		}
		if want := int64(strings.Count(text, "\n")); rec.Counts[result.StatusUnique] != want {
			t.Fatalf("job %s: counts %v, want %d unique", sub.ID, rec.Counts, want)
		}
	}
	// waitFor scrapes until key reaches want: the worker reports a batch
	// after its ack, a moment after its results are read.
	waitFor := func(key string, want float64) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := scrape(t, base+"/metrics")
			if got[key] >= want || time.Now().After(deadline) {
				return got
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// waitCached waits until the worker has cached every puzzle (it
	// does so after the ack).
	waitCached := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := redisCache.Get(ctx, keys)
			if err != nil {
				t.Fatal(err)
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
				t.Fatalf("%d puzzles not cached after 10s", missing)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// The producer looks the first batch up and, finding none, leaves the
	// rest to the worker: every puzzle is a miss.
	submit(string(data), false)
	wantSamples(t, waitFor(`sudoku_batches_total{outcome="acked"}`, 10), map[string]float64{
		`sudoku_puzzles_total{status="unique"}`:             float64(n),
		`sudoku_puzzles_total{status="multiple"}`:           0,
		`sudoku_cache_hits_total`:                           0,
		`sudoku_cache_misses_total`:                         float64(n),
		`sudoku_solve_seconds_count`:                        float64(n),
		`sudoku_batches_total{outcome="acked"}`:             10,
		`sudoku_batches_total{outcome="nak"}`:               0,
		`sudoku_batch_duration_seconds_count{queue="bulk"}`: 10,
		`sudoku_redeliveries_total`:                         0,
		`sudoku_in_flight`:                                  0,
		`sudoku_cache_up`:                                   1,
		`sudoku_cache_errors_total{op="get"}`:               0,
		`sudoku_cache_errors_total{op="put"}`:               0,
	})

	waitCached()
	// A first batch of new puzzles, then the cached ones: the producer
	// stops looking after the first, the worker finds the rest.
	submit(fresh.String()+string(data), false)
	wantSamples(t, waitFor(`sudoku_batches_total{outcome="acked"}`, 21), map[string]float64{
		`sudoku_puzzles_total{status="unique"}`: float64(2*n + 10),
		`sudoku_cache_hits_total`:               float64(n),
		`sudoku_cache_misses_total`:             float64(n + 10),
		`sudoku_solve_seconds_count`:            float64(n + 10),
		`sudoku_batches_total{outcome="acked"}`: 21,
	})
	// Forced: solved again, the cache not looked up.
	submit(string(data), true)
	wantSamples(t, waitFor(`sudoku_batches_total{outcome="acked"}`, 31), map[string]float64{
		`sudoku_puzzles_total{status="unique"}`: float64(3*n + 10),
		`sudoku_cache_hits_total`:               float64(n),
		`sudoku_cache_misses_total`:             float64(2*n + 10),
		`sudoku_solve_seconds_count`:            float64(2*n + 10),
		`sudoku_batches_total{outcome="acked"}`: 31,
	})

	// A message that does not decode, and a batch no producer published
	// (its job has no record), are dead-lettered and counted apart.
	if _, err := q.JS.Publish(ctx, q.Opts.WorkSubject(job.NewID("alice"), queue.Lane{Owner: "alice", Priority: job.PriorityNormal, Slot: queue.SlotSmall}), []byte("not a batch")); err != nil {
		t.Fatal(err)
	}
	g, _ := solver.Parse(puzzles[0])
	forged := &job.Batch{Job: job.NewID("alice"), Items: []job.Item{{Line: 1, Kind: job.Solve, Grid: g}}}
	if _, err := q.JS.PublishMsg(ctx, q.Opts.WorkMsg(forged, queue.Lane{Owner: "alice", Priority: job.PriorityNormal, Slot: queue.SlotSmall})); err != nil {
		t.Fatal(err)
	}
	waitFor(`sudoku_errors_total{kind="decode"}`, 1)
	wantSamples(t, waitFor(`sudoku_errors_total{kind="rejected"}`, 1), map[string]float64{
		`sudoku_errors_total{kind="decode"}`:          1,
		`sudoku_errors_total{kind="rejected"}`:        1,
		`sudoku_errors_total{kind="jetstream"}`:       0,
		`sudoku_errors_total{kind="shutdown"}`:        0,
		`sudoku_batches_total{outcome="dead_letter"}`: 2,
		`sudoku_batches_total{outcome="acked"}`:       31,
		`sudoku_puzzles_total{status="unique"}`:       float64(3*n + 10),
	})

	// The cache fails: the worker solves without it, and the metrics say
	// how its calls failed and that it is down.
	fc.down.Store(true)
	submit(string(data), false)
	got := waitFor(`sudoku_batches_total{outcome="acked"}`, 41)
	wantSamples(t, got, map[string]float64{
		`sudoku_batches_total{outcome="acked"}`: 41,
		`sudoku_puzzles_total{status="unique"}`: float64(4*n + 10),
		`sudoku_cache_hits_total`:               float64(n),
		`sudoku_cache_misses_total`:             float64(3*n + 10),
		`sudoku_solve_seconds_count`:            float64(3*n + 10),
		`sudoku_cache_up`:                       0,
	})
	if got[`sudoku_cache_errors_total{op="get"}`] < 1 || got[`sudoku_cache_errors_total{op="put"}`] < 1 {
		t.Errorf("cache errors: get %v, put %v; want at least 1 each", got[`sudoku_cache_errors_total{op="get"}`],
			got[`sudoku_cache_errors_total{op="put"}`])
	}
	// Back: once a lookup succeeds again, the gauge says so.
	fc.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		guard.Get(ctx, keys[:1]) // a lookup, as the worker's next batch would make
		if scrape(t, base+"/metrics")[`sudoku_cache_up`] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sudoku_cache_up still 0 10s after the cache is back")
		}
		time.Sleep(50 * time.Millisecond)
	}

	if code, body := get(t, base+"/readyz"); code != 200 || body != "nats: ok\nredis: ok\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}

	// A Redis that does not answer makes a process that checks it unready,
	// and says so.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), DialTimeout: 200 * time.Millisecond})
	defer dead.Close()
	bad := cache.NewRedis(dead, cache.RedisOptions{})
	h := Handler(m.Registry(), NATSCheck(q.NC), PingCheck("redis", bad.Ping))
	srv2, err := Listen("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv2.Run(runCtx) }()
	code, body := get(t, "http://"+srv2.Addr()+"/readyz")
	if code != 503 || !strings.HasPrefix(body, "nats: ok\nredis: ") || !strings.Contains(body, "connection refused") {
		t.Errorf("/readyz with Redis down: %d %q, want 503 naming redis", code, body)
	}
}
