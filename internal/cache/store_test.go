package cache

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

var (
	_ Cache = (*Redis)(nil)
	_ Cache = (*Memory)(nil)
)

// caches: the suite runs on each implementation; ttl is the TTL the
// cache was made with (the test reads it back from Redis).
type testCache struct {
	c   Cache
	rdb *redis.Client // nil for memory
	ttl time.Duration
}

func caches(t *testing.T) map[string]testCache {
	t.Helper()
	m := map[string]testCache{"memory": {c: NewMemory(0)}}
	if !testing.Short() {
		rdb := testenv.Redis(t)
		prefix := testenv.Name("test") + ":"
		testenv.CleanupPrefix(t, rdb, prefix)
		m["redis"] = testCache{c: NewRedis(rdb, RedisOptions{Prefix: prefix}), rdb: rdb}
		m["redis-ttl"] = testCache{c: NewRedis(rdb, RedisOptions{Prefix: prefix + "ttl:", TTL: time.Minute}), rdb: rdb, ttl: time.Minute}
	}
	return m
}

func solved(t *testing.T, puzzle string, opts solver.Options) (job.Key, job.Outcome) {
	t.Helper()
	g, err := solver.Parse(puzzle)
	if err != nil {
		t.Fatal(err)
	}
	var sv solver.Solver
	r, err := sv.Solve(context.Background(), &g, opts)
	return job.KeyOf(&g), job.FromSolve(&g, r, err)
}

const (
	p1 = "4...3.......6..8..........1....5..9..8....6...7.2........1.27..5.3....4.9........"
	p2 = "7.8...3.....2.1...5.........4.....263...8.......1...9..9.6....4....7.5..........."
	p3 = "................................................................................."
)

func TestCacheGetPut(t *testing.T) {
	ctx := context.Background()
	for name, tc := range caches(t) {
		t.Run(name, func(t *testing.T) {
			k1, o1 := solved(t, p1, solver.Options{})
			k2, _ := solved(t, p2, solver.Options{})
			k3, o3 := solved(t, p3, solver.Options{})
			kg, og := solved(t, p2, solver.Options{MaxNodes: 1}) // gave up: not an answer
			if og.Status != result.StatusGaveUp {
				t.Fatalf("MaxNodes 1 gave %s", og.Status)
			}
			o1.Cached = true // not stored
			if err := tc.c.Put(ctx, []Entry{{Key: k1, Outcome: &o1}, {Key: k3, Outcome: &o3}, {Key: kg, Outcome: &og}}); err != nil {
				t.Fatal(err)
			}
			got, err := tc.c.Get(ctx, []job.Key{k1, k2, k3})
			if err != nil {
				t.Fatal(err)
			}
			o1.Cached = false
			if got[0] == nil || *got[0] != o1 || got[2] == nil || *got[2] != o3 {
				t.Errorf("Get = %+v, %+v; want %+v, %+v", got[0], got[2], o1, o3)
			}
			if got[1] != nil {
				t.Errorf("uncached key found: %+v", got[1])
			}
			if g, _ := tc.c.Get(ctx, []job.Key{kg}); g[0] != nil {
				t.Errorf("a gave_up outcome was cached: %+v", g[0])
			}
			// A batch with nothing to store (all gave up, or all found in
			// the cache) is no error: Redis refuses an MSET of nothing.
			for _, entries := range [][]Entry{nil, {{Key: kg, Outcome: &og}}} {
				if err := tc.c.Put(ctx, entries); err != nil {
					t.Errorf("Put of nothing to store (%d entries) = %v", len(entries), err)
				}
			}
			if tc.rdb == nil {
				return
			}
			// The TTL is the cache's: every key written has it (or none).
			rc := tc.c.(*Redis)
			for _, k := range []job.Key{k1, k3} {
				ttl, err := tc.rdb.TTL(ctx, rc.Key(k)).Result()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tc.ttl == 0 && ttl != -1:
					t.Errorf("key %s has TTL %v, want none", k, ttl)
				case tc.ttl > 0 && (ttl <= 0 || ttl > tc.ttl):
					t.Errorf("key %s has TTL %v, want (0, %v]", k, ttl, tc.ttl)
				}
			}
		})
	}
}

// TestCacheKeysAreTheUsersKeys: an operator finds a result in Redis from
// the key that users see.
func TestCacheKeysAreTheUsersKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis")
	}
	rdb := testenv.Redis(t)
	prefix := testenv.Name("test") + ":"
	testenv.CleanupPrefix(t, rdb, prefix)
	c := NewRedis(rdb, RedisOptions{Prefix: prefix})
	k, o := solved(t, p1, solver.Options{})
	if err := c.Put(context.Background(), []Entry{{Key: k, Outcome: &o}}); err != nil {
		t.Fatal(err)
	}
	g, _ := solver.Parse(p1)
	// The documented layout: the prefix, "s2:", the first half of the key.
	want := prefix + "s2:" + g.Key()[:32]
	if n, err := rdb.Exists(context.Background(), want).Result(); err != nil || n != 1 {
		t.Errorf("no key %s (%v)", want, err)
	}
	if c.Key(k) != want {
		t.Errorf("Key = %s, want %s", c.Key(k), want)
	}
	if n, err := rdb.Keys(context.Background(), c.Pattern()).Result(); err != nil || len(n) != 1 || n[0] != want {
		t.Errorf("keys matching Pattern %s: %v, %v; want [%s]", c.Pattern(), n, err, want)
	}
	// Within the 44 bytes that Redis keeps with its object: the key with
	// the default prefix, and a solved puzzle's value.
	if n := len(NewRedis(rdb, RedisOptions{}).Key(k)); n > 44 {
		t.Errorf("a default key has %d bytes", n)
	}
	if v, err := rdb.Get(context.Background(), want).Result(); err != nil || len(v) > 44 {
		t.Errorf("the value has %d bytes (%v)", len(v), err)
	}
}

func TestCorruptValueIsAMiss(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis")
	}
	ctx := context.Background()
	rdb := testenv.Redis(t)
	prefix := testenv.Name("test") + ":"
	testenv.CleanupPrefix(t, rdb, prefix)
	c := NewRedis(rdb, RedisOptions{Prefix: prefix})
	k, _ := solved(t, p1, solver.Options{})
	_, o2 := solved(t, p2, solver.Options{})
	// A value of the old text format, garbage, and the value of another
	// puzzle (whose key would share the first half of k's): misses, not
	// errors.
	for _, v := range []string{"v1|unique|0|123|81|....|", "\x01\x00", string(job.AppendCacheValue(nil, &o2))} {
		if err := rdb.Set(ctx, c.Key(k), v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(ctx, []job.Key{k})
		if err != nil || got[0] != nil {
			t.Errorf("Get of %q = %+v, %v; want a miss", v, got[0], err)
		}
	}
}

func TestMemoryBound(t *testing.T) {
	c := NewMemory(100)
	_, o := solved(t, p1, solver.Options{})
	for i := range 1000 {
		var k job.Key
		k[0], k[1] = byte(i), byte(i>>8)
		if err := c.Put(context.Background(), []Entry{{Key: k, Outcome: &o}}); err != nil {
			t.Fatal(err)
		}
		if c.Len() > 100 {
			t.Fatalf("%d entries, bound 100", c.Len())
		}
	}
}

// failing is a cache whose calls fail while down is set.
type failing struct {
	Cache
	down       atomic.Bool
	gets, puts atomic.Int64
}

func (f *failing) Get(ctx context.Context, keys []job.Key) ([]*job.Outcome, error) {
	f.gets.Add(1)
	if f.down.Load() {
		return nil, errors.New("connection refused")
	}
	return f.Cache.Get(ctx, keys)
}

func (f *failing) Put(ctx context.Context, es []Entry) error {
	f.puts.Add(1)
	if f.down.Load() {
		return errors.New("OOM command not allowed when used memory > 'maxmemory'")
	}
	return f.Cache.Put(ctx, es)
}

func TestGuardOutage(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	f := &failing{Cache: NewMemory(0)}
	var errs atomic.Int64
	g := NewGuard(f, GuardOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil)), MaxBackoff: 50 * time.Millisecond,
		OnError: func(string, error) { errs.Add(1) }})
	k, o := solved(t, p1, solver.Options{})
	g.Put(ctx, []Entry{{Key: k, Outcome: &o}})
	if got := g.Get(ctx, []job.Key{k}); got == nil || got[0] == nil {
		t.Fatalf("Get while up = %v", got)
	}

	f.down.Store(true)
	for range 100 {
		if got := g.Get(ctx, []job.Key{k}); got != nil {
			t.Fatalf("Get while down = %v, want nil (misses)", got)
		}
		g.Put(ctx, []Entry{{Key: k, Outcome: &o}})
	}
	if down, since := g.Down(); !down || time.Since(since) > time.Minute {
		t.Errorf("Down() = %v, %v while down", down, since)
	}
	// Calls back off: the first fails, the rest wait for the probe.
	if n := f.gets.Load(); n > 3 {
		t.Errorf("%d lookups reached a cache that is down within the backoff", n)
	}
	if n := errs.Load(); n < 2 {
		t.Errorf("OnError called %d times, want one per failed call (get and put)", n)
	}

	f.down.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for g.Get(ctx, []job.Key{k}) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the guard did not notice the cache was back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if down, _ := g.Down(); down {
		t.Error("Down() after recovery")
	}
	log := logs.String()
	if n := strings.Count(log, "lookups failing"); n != 1 {
		t.Errorf("the lookup outage was logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "lookups are back"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once:\n%s", n, log)
	}
}

func TestGuardWritesFailReadsGoOn(t *testing.T) {
	// A Redis that is full (noeviction) refuses writes but answers
	// lookups: the guard keeps reading.
	ctx := context.Background()
	mem := NewMemory(0)
	k, o := solved(t, p1, solver.Options{})
	_ = mem.Put(ctx, []Entry{{Key: k, Outcome: &o}})
	f := &failing{Cache: mem}
	g := NewGuard(&readOnly{f}, GuardOptions{Logger: slog.New(slog.DiscardHandler)})
	for range 3 {
		g.Put(ctx, []Entry{{Key: k, Outcome: &o}})
	}
	if got := g.Get(ctx, []job.Key{k}); got == nil || got[0] == nil {
		t.Errorf("Get after failed writes = %v, want the hit", got)
	}
	if down, _ := g.Down(); down {
		t.Error("failed writes marked lookups down")
	}
}

// readOnly fails every write.
type readOnly struct{ *failing }

func (r *readOnly) Put(context.Context, []Entry) error { return errors.New("OOM command not allowed") }

func TestNilGuard(t *testing.T) {
	g := NewGuard(nil, GuardOptions{})
	if g.Enabled() {
		t.Error("a guard without a cache is enabled")
	}
	if got, ok := g.Lookup(context.Background(), []job.Key{{}}); got != nil || ok {
		t.Errorf("Lookup = %v, %v", got, ok)
	}
	g.Put(context.Background(), []Entry{{}}) // no panic
}

func TestRedisDownIsAnError(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	c := NewRedis(rdb, RedisOptions{})
	defer c.Close()
	if _, err := c.Get(context.Background(), []job.Key{{}}); err == nil {
		t.Error("Get from a Redis that is down did not fail")
	}
	if err := c.Ping(context.Background()); err == nil {
		t.Error("Ping of a Redis that is down did not fail")
	}
}

// asked counts the keys a cache was asked for.
type asked struct {
	Cache
	keys atomic.Int64
}

func (a *asked) Get(ctx context.Context, keys []job.Key) ([]*job.Outcome, error) {
	a.keys.Add(int64(len(keys)))
	return a.Cache.Get(ctx, keys)
}

// TestLookupBatch: a batch none of whose sample is cached costs the cache
// the sample only; one with some cached, or a small one, is looked up
// whole and every hit found.
func TestLookupBatch(t *testing.T) {
	ctx := context.Background()
	key, o := solved(t, p1, solver.Options{})
	keyOf := func(i int) job.Key { k := key; k[0], k[1] = byte(i), byte(i>>8); return k }
	for _, tc := range []struct {
		name      string
		n         int
		cached    func(i int) bool
		wantAsked int64
		wantHits  int
	}{
		{"none cached", 1000, func(int) bool { return false }, SampleSize, 0},
		{"all cached", 1000, func(int) bool { return true }, SampleSize + 1000, 1000},
		{"a fifth cached", 1000, func(i int) bool { return i%5 == 0 }, SampleSize + 1000, 200},
		{"small batch", 2 * SampleSize, func(i int) bool { return i == 7 }, 2 * SampleSize, 1},
		{"one cached, off the sample", 1000, func(i int) bool { return i == 1 }, SampleSize, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := NewMemory(0)
			keys := make([]job.Key, tc.n)
			var es []Entry
			for i := range keys {
				keys[i] = keyOf(i)
				if tc.cached(i) {
					es = append(es, Entry{Key: keys[i], Outcome: &o})
				}
			}
			if err := mem.Put(ctx, es); err != nil {
				t.Fatal(err)
			}
			a := &asked{Cache: mem}
			hits, ok := NewGuard(a, GuardOptions{}).LookupBatch(ctx, keys)
			n := 0
			for i, h := range hits {
				if h != nil {
					n++
					if !tc.cached(i) {
						t.Errorf("key %d: a hit for a key not cached", i)
					}
				}
			}
			if !ok || n != tc.wantHits || a.keys.Load() != tc.wantAsked {
				t.Errorf("LookupBatch: %d hits, answered %v, %d keys asked; want %d, true, %d",
					n, ok, a.keys.Load(), tc.wantHits, tc.wantAsked)
			}
		})
	}
}

// TestPoisonedValueIsAMiss stores well-formed values that lie under a
// solvable puzzle's key (issue 22, finding 8: get, the HTTP API, the
// micro service and submit --wait served them): none, multiple, and a
// unique solution against the rules. Every lookup through a Guard finds a
// miss; the right value is a hit.
func TestPoisonedValueIsAMiss(t *testing.T) {
	ctx := context.Background()
	k, right := solved(t, p1, solver.Options{})
	none := job.Outcome{Status: result.StatusNone, Puzzle: right.Puzzle}
	multiple := right
	multiple.Status = result.StatusMultiple
	broken := right
	broken.Solution[0], broken.Solution[1] = broken.Solution[1], broken.Solution[0]
	for name, tc := range caches(t) {
		for _, bad := range []struct {
			name string
			o    job.Outcome
		}{{"none", none}, {"multiple", multiple}, {"unique against the rules", broken}} {
			t.Run(name+"/"+bad.name, func(t *testing.T) {
				if tc.rdb != nil {
					// As anyone who can write Redis would: the value alone.
					v := job.AppendCacheValue(nil, &bad.o)
					if err := tc.rdb.Set(ctx, tc.c.(*Redis).Key(k), v, time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
				} else if err := tc.c.Put(ctx, []Entry{{Key: k, Outcome: &bad.o}}); err != nil {
					t.Fatal(err)
				}
				g := NewGuard(tc.c, GuardOptions{Logger: slog.New(slog.DiscardHandler)})
				if got := g.Get(ctx, []job.Key{k}); got != nil && got[0] != nil {
					t.Errorf("a value saying %s was served: %+v", bad.o.Status, got[0])
				}
				if err := tc.c.Put(ctx, []Entry{{Key: k, Outcome: &right}}); err != nil {
					t.Fatal(err)
				}
				if got := g.Get(ctx, []job.Key{k}); got == nil || got[0] == nil || got[0].Status != result.StatusUnique {
					t.Errorf("the right value: %+v", got)
				}
			})
		}
	}
}
