package reliability

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
)

// cacheFullSize returns the number of puzzles of the full-cache tests:
// $SUDOKU_RELIABILITY_CACHE_N, else 20000 (100000 is the full size: a few
// minutes under -race on two cores).
func cacheFullSize(t *testing.T) int {
	if v := os.Getenv("SUDOKU_RELIABILITY_CACHE_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("SUDOKU_RELIABILITY_CACHE_N=%q: want a number of puzzles", v)
		}
		return n
	}
	return 20_000
}

// cacheEntryBytes is about what one cached result takes in Redis (key,
// value and Redis's own overhead), measured on Redis 7.
const cacheEntryBytes = 226

// cacheMaxMemory is the full-cache tests' Redis maxmemory.
const cacheMaxMemory = 8 << 20

// TestCacheFullLRU runs a job of easy and hard puzzles, all distinct,
// through two workers whose Redis holds at most 8 MB and evicts the least
// recently used keys: the job completes with exit status 0, every line
// the same as `solve --local`'s, and exact counts; Redis evicted keys
// meanwhile. The same file again is answered partly from what the cache
// kept, every line still right.
func TestCacheFullLRU(t *testing.T) { cacheFull(t, "allkeys-lru") }

// TestCacheFullNoEviction is TestCacheFullLRU with a Redis that refuses
// writes once full: the workers say that the cache's writes fail (not
// once per batch) and go on; the second run of the file is answered from
// the cache for exactly the puzzles it holds.
func TestCacheFullNoEviction(t *testing.T) { cacheFull(t, "noeviction") }

func cacheFull(t *testing.T, policy string) {
	n := cacheFullSize(t)
	s := newSys(t, options{privateRedis: true,
		redisArgs: []string{"--maxmemory", strconv.Itoa(cacheMaxMemory), "--maxmemory-policy", policy},
		env:       []string{"SUDOKU_QUEUE_BATCH_SIZE=256", "SUDOKU_WORKER_CONCURRENCY=1"}})
	file, _ := mixedFile(t, n, 5, 21) // one puzzle in five from the hardest set
	start := time.Now()
	_, local, stderr := s.run(5*time.Minute, "", "solve", "--local", "--workers", "2", file)
	if local == "" {
		t.Fatalf("solve --local: %s", stderr)
	}
	t.Logf("solve --local: %d puzzles in %v", n, time.Since(start).Round(time.Millisecond))

	// Fill Redis, apart from our keys, so that half of the job's results
	// fit: the limit is reached whatever the job's size.
	filler := s.fillRedis(cacheMaxMemory - int64(n)*cacheEntryBytes/2)
	w0, w1 := s.startWorker("worker-0"), s.startWorker("worker-1")

	start = time.Now()
	code, out, stderr := s.run(10*time.Minute, "", "submit", "--wait", file)
	elapsed := time.Since(start)
	if code != cli.ExitOK {
		t.Fatalf("submit --wait: exit %d: %s", code, tail(stderr, 20))
	}
	if out != local {
		t.Fatalf("the results differ from solve --local's (%d and %d bytes)", len(out), len(local))
	}
	id := jobIDRe.FindStringSubmatch(stderr)[1]
	checkSummary(t, stderr, id, fmt.Sprintf("%d unique", n))
	s.checkJob(id, want{lines: int64(n), queued: int64(n)})
	info := s.redisInfo()
	kept := s.cached()
	t.Logf("job %s: %d puzzles in %v (%.0f/s); Redis (%s): %s of %s used, %s keys evicted, %d results kept, %d filler keys",
		id, n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), policy, info["used_memory_human"],
		info["maxmemory_human"], info["evicted_keys"], kept, filler)
	if kept <= 0 || kept >= int64(n) {
		t.Errorf("%d results kept in the cache; want some, not all %d", kept, n)
	}
	failing := w0.count("cache: Redis writes failing") + w1.count("cache: Redis writes failing")
	switch policy {
	case "allkeys-lru":
		if ev, _ := strconv.Atoi(info["evicted_keys"]); ev == 0 {
			t.Errorf("Redis evicted no key: the cache was never full")
		}
		if failing != 0 {
			t.Errorf("the workers logged %d failing writes: an LRU cache takes every write", failing)
		}
	case "noeviction":
		// The workers say that the writes fail, not once per batch: once,
		// and again only after a write got through (a full Redis takes a
		// write now and then, as its memory use wavers at the limit).
		back := w0.count("cache: Redis writes are back") + w1.count("cache: Redis writes are back")
		if failing < 1 || failing > 10 || back > failing {
			t.Errorf("the workers logged %d failing writes and %d recoveries, want 1 to 10 (not one a batch):\n%s\n%s",
				failing, back, logTail(w0.stderr.String()), logTail(w1.stderr.String()))
		}
		t.Logf("the workers logged writes failing %d times, back %d times", failing, back)
		if c := w0.count("OOM command not allowed") + w1.count("OOM command not allowed"); c == 0 {
			t.Errorf("no worker says why Redis refused the writes (OOM)")
		}
	}
	s.checkDrained()

	// The same file again: what the cache holds answers those lines, the
	// workers the others, every line still right.
	code, out, stderr = s.run(10*time.Minute, "", "submit", "--wait", file)
	if code != cli.ExitOK {
		t.Fatalf("second submit --wait: exit %d: %s", code, tail(stderr, 20))
	}
	if out != local {
		t.Fatalf("the results of the second run differ from solve --local's (%d and %d bytes)", len(out), len(local))
	}
	second := jobIDRe.FindStringSubmatch(stderr)[1]
	// The summary counts every line answered from the cache: by the
	// producer (the record's cached) and by the workers (the lines queued
	// that a worker found there).
	m := regexp.MustCompile(`(\d+) from the cache`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the second run's summary names no line from the cache:\n%s", tail(stderr, 5))
	}
	fromCache, _ := strconv.ParseInt(m[1], 10, 64)
	switch {
	case policy == "noeviction" && fromCache != kept:
		// Nothing is evicted: the cache holds what it held.
		t.Errorf("the second run found %d puzzles in the cache, which held %d", fromCache, kept)
	case fromCache <= 0 || fromCache > kept:
		t.Errorf("the second run found %d puzzles in the cache, which held %d", fromCache, kept)
	}
	checkSummary(t, stderr, second, fmt.Sprintf("%d unique (%d from the workers, %d from the cache)", n, int64(n)-fromCache, fromCache))
	st := s.status(second)
	if st.Cached > fromCache || st.Cached+st.Queued != int64(n) {
		t.Errorf("the second job's record: %d cached by the producer, %d queued; want at most %d and a sum of %d",
			st.Cached, st.Queued, fromCache, n)
	}
	s.checkJob(second, want{lines: int64(n), queued: -1, cached: st.Cached})
	s.checkDrained()
	t.Logf("second job %s: %d from the cache (%d found by the producer), %d from the workers", second, fromCache, st.Cached, int64(n)-fromCache)
}

// fillRedis writes filler keys (outside the test's prefix) of 1 kB until
// Redis uses at least target bytes, and returns how many it wrote.
func (s *sys) fillRedis(target int64) int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	value := strings.Repeat("f", 1000)
	n := 0
	for {
		used, _ := strconv.ParseInt(s.redisInfo()["used_memory"], 10, 64)
		if used >= target {
			return n
		}
		p := s.rdb.Pipeline()
		for range 100 {
			p.Set(ctx, "filler:"+strconv.Itoa(n), value, 0)
			n++
		}
		if _, err := p.Exec(ctx); err != nil {
			s.t.Fatalf("fill Redis: %v", err)
		}
	}
}

// redisInfo returns the fields of Redis's INFO.
func (s *sys) redisInfo() map[string]string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text, err := s.rdb.Info(ctx).Result()
	if err != nil {
		s.t.Fatalf("redis INFO: %v", err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m
}
