package metrics

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// TestMetricsAfterJobs runs a worker with metrics on the shared NATS and
// Redis through two jobs and a bad message, and checks what /metrics says
// about them, and /readyz.
func TestMetricsAfterJobs(t *testing.T) {
	nc := testenv.NATS(t)
	rdb := testenv.Redis(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name("mt")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q, err := queue.Setup(ctx, js, queue.Options{Stream: name, DLQStream: name + "_DLQ", Prefix: name,
		Consumer: name, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Delete(context.Background()) })
	testenv.CleanupPrefix(t, rdb, name+":")
	store := cache.NewRedis(rdb, cache.RedisOptions{Prefix: name + ":"})

	m := NewWorker()
	w := worker.New(nc, q, store, worker.Options{Concurrency: 2, Observer: m,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	m.SetInFlight(w.InFlight)
	srv, err := Listen("127.0.0.1:0", Handler(m.Registry(), NATSCheck(nc), PingCheck("redis", store.Ping)))
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

	data, err := os.ReadFile("testdata/17_clue_100.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(data), "\n")
	// submit runs a job in batches of 10 and waits for it.
	submit := func(force bool) {
		t.Helper()
		p := producer.New(js, q.Opts, store, producer.Options{BatchSize: 10, Force: force})
		sub, err := p.Submit(ctx, input.NewReader(strings.NewReader(string(data))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := producer.Wait(ctx, store, nc, q.Opts, sub.ID, nil); err != nil {
			t.Fatalf("job %s: %v", sub.ID, err)
		}
	}
	// waitFor scrapes until key reaches want: the worker reports a batch
	// after its ack, a moment after the job is seen finished.
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

	submit(false) // the producer looks the cache up: every puzzle is a miss
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
	})

	submit(true) // forced: the worker looks the cache up and finds all
	wantSamples(t, waitFor(`sudoku_batches_total{outcome="acked"}`, 20), map[string]float64{
		`sudoku_puzzles_total{status="unique"}`: float64(2 * n),
		`sudoku_cache_hits_total`:               float64(n),
		`sudoku_cache_misses_total`:             float64(n),
		`sudoku_solve_seconds_count`:            float64(n),
		`sudoku_batches_total{outcome="acked"}`: 20,
	})

	// A message that does not decode is dead-lettered and counted.
	if _, err := js.Publish(ctx, q.Opts.BulkSubject(), []byte("not a batch")); err != nil {
		t.Fatal(err)
	}
	wantSamples(t, waitFor(`sudoku_errors_total{kind="decode"}`, 1), map[string]float64{
		`sudoku_errors_total{kind="decode"}`:          1,
		`sudoku_errors_total{kind="store"}`:           0,
		`sudoku_batches_total{outcome="dead_letter"}`: 1,
		`sudoku_batches_total{outcome="acked"}`:       20,
	})

	if code, body := get(t, base+"/readyz"); code != 200 || body != "nats: ok\nredis: ok\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}

	// A Redis that does not answer makes the process unready, and says so.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), DialTimeout: 200 * time.Millisecond})
	defer dead.Close()
	bad := cache.NewRedis(dead, cache.RedisOptions{})
	h := Handler(m.Registry(), NATSCheck(nc), PingCheck("redis", bad.Ping))
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
