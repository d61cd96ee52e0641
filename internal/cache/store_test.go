package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// store: the suite runs on each implementation.
type store = Store

var (
	_ Store = (*Redis)(nil)
	_ Store = (*Memory)(nil)
)

func stores(t *testing.T) map[string]store {
	t.Helper()
	m := map[string]store{"memory": NewMemory()}
	if !testing.Short() {
		rdb := testenv.Redis(t)
		prefix := testenv.Name("test") + ":"
		testenv.CleanupPrefix(t, rdb, prefix)
		m["redis"] = NewRedis(rdb, RedisOptions{Prefix: prefix})
		m["redis-ttl"] = NewRedis(rdb, RedisOptions{Prefix: prefix + "ttl:", TTL: time.Minute})
	}
	return m
}

func solved(t *testing.T, puzzle string) result.Result {
	t.Helper()
	g, err := solver.Parse(puzzle)
	if err != nil {
		t.Fatal(err)
	}
	r, err := solver.Solve(context.Background(), &g, solver.Options{})
	return result.FromSolve(&g, r, err)
}

const (
	p1 = "4...3.......6..8..........1....5..9..8....6...7.2........1.27..5.3....4.9........"
	p2 = "7.8...3.....2.1...5.........4.....263...8.......1...9..9.6....4....7.5..........."
	p3 = "................................................................................."
)

func TestStoreResults(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			r1, r3 := solved(t, p1), solved(t, p3)
			bad := result.Invalid(7, "12x|45", errors.New("solver: line 1 column 3: invalid character"))
			bad.Key = InputKey(bad.Puzzle)
			if err := s.Put(ctx, []result.Result{r1, r3, bad}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, []string{r1.Key, solved(t, p2).Key, r3.Key, bad.Key})
			if err != nil {
				t.Fatal(err)
			}
			if got[1] != nil {
				t.Errorf("uncached key found: %+v", got[1])
			}
			bad.Line = 0
			for i, want := range map[int]result.Result{0: r1, 2: r3, 3: bad} {
				if got[i] == nil || *got[i] != want {
					t.Errorf("Get[%d] = %+v, want %+v", i, got[i], want)
				}
			}
		})
	}
}

func TestStoreJobCountsOnce(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			id := testenv.Name("job")
			if _, err := s.Job(ctx, id); !errors.Is(err, ErrJobNotFound) {
				t.Fatalf("Job of unknown id: err = %v, want ErrJobNotFound", err)
			}
			if err := s.CreateJob(ctx, id, time.Now()); err != nil {
				t.Fatal(err)
			}
			r1, r2, r3 := solved(t, p1), solved(t, p2), solved(t, p3)
			lines := []OrderEntry{{1, r1.Key}, {3, r2.Key}, {4, r1.Key}, {9, r3.Key}}
			if err := s.AddToJob(ctx, id, JobDelta{Lines: lines, Queued: 3, Batches: 2}); err != nil {
				t.Fatal(err)
			}
			// A batch completed before the job is sealed does not finish it.
			if fin, err := s.CompleteBatch(ctx, id, 0, []result.Result{r1, r2}); err != nil || fin {
				t.Fatalf("CompleteBatch 0 = %v, %v; want false, nil", fin, err)
			}
			// Redelivered: counted once.
			if fin, err := s.CompleteBatch(ctx, id, 0, []result.Result{r1, r2}); err != nil || fin {
				t.Fatalf("CompleteBatch 0 again = %v, %v; want false, nil", fin, err)
			}
			if fin, err := s.SealJob(ctx, id); err != nil || fin {
				t.Fatalf("SealJob = %v, %v; want false, nil", fin, err)
			}
			if fin, err := s.CompleteBatch(ctx, id, 1, []result.Result{r3}); err != nil || !fin {
				t.Fatalf("CompleteBatch 1 = %v, %v; want true, nil", fin, err)
			}
			j, err := s.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.Total != 4 || j.Queued != 3 || j.Done != 3 || j.Batches != 2 || !j.Sealed || !j.IsFinished() {
				t.Errorf("job = %+v", j)
			}
			if j.Counts[result.StatusUnique] != 2 || j.Counts[result.StatusMultiple] != 1 || j.Failed() != 1 {
				t.Errorf("counts = %v, failed %d", j.Counts, j.Failed())
			}
			order, err := s.Order(ctx, id, 1, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(order) != 3 || order[0] != lines[1] || order[2] != lines[3] {
				t.Errorf("Order(1, 10) = %v, want %v", order, lines[1:])
			}
			jobs, err := s.Jobs(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, j := range jobs {
				found = found || j.ID == id
			}
			if !found {
				t.Errorf("Jobs does not list %s", id)
			}
		})
	}
}

func TestSealEmptyJobFinishes(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			id := testenv.Name("job")
			if err := s.CreateJob(ctx, id, time.Now()); err != nil {
				t.Fatal(err)
			}
			if fin, err := s.SealJob(ctx, id); err != nil || !fin {
				t.Fatalf("SealJob of a job with nothing queued = %v, %v; want true", fin, err)
			}
			if _, err := s.SealJob(ctx, id+"x"); !errors.Is(err, ErrJobNotFound) {
				t.Fatalf("SealJob of unknown job: %v", err)
			}
		})
	}
}

func TestCompleteEmptyBatch(t *testing.T) {
	// A batch without puzzles (only a hand-made message can carry one)
	// completes like any other: Redis refuses an MSET without arguments,
	// which once made such a batch fail every delivery.
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := s.CompleteBatch(ctx, "", 0, nil); err != nil {
				t.Fatalf("CompleteBatch of no results, no job: %v", err)
			}
			id := testenv.Name("job")
			if err := s.CreateJob(ctx, id, time.Now()); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CompleteBatch(ctx, id, 0, nil); err != nil {
				t.Fatalf("CompleteBatch of no results: %v", err)
			}
		})
	}
}

func TestCorruptValue(t *testing.T) {
	rdb := testenv.Redis(t)
	prefix := testenv.Name("test") + ":"
	testenv.CleanupPrefix(t, rdb, prefix)
	s := NewRedis(rdb, RedisOptions{Prefix: prefix})
	ctx := context.Background()
	rdb.Set(ctx, prefix+"sol:abc", "garbage", 0)
	if _, err := s.Get(ctx, []string{"abc"}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get of a corrupt value: err = %v, want ErrCorrupt", err)
	}
}

func TestRedisDown(t *testing.T) {
	srv := testenv.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	s := NewRedis(rdb, RedisOptions{})
	ctx := context.Background()
	r1 := solved(t, p1)
	if err := s.Put(ctx, []result.Result{r1}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, err := s.CompleteBatch(ctx, "", 0, []result.Result{r1}); err == nil {
		t.Fatal("CompleteBatch with Redis down: no error")
	}
	srv.Start()
	got, err := s.Get(ctx, []string{r1.Key})
	if err != nil {
		t.Fatalf("Get after Redis came back: %v", err)
	}
	if got[0] != nil {
		t.Fatalf("a restarted Redis without persistence kept %v", got[0])
	}
}

func FuzzDecodeResult(f *testing.F) {
	f.Add("v1|unique|3|" + p1 + "|81|" + p1 + "|")
	f.Add("v1|invalid|0||5|a|b|c|solver: bad | pipe")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, v string) {
		r, err := decodeResult("k", v)
		if err != nil {
			return
		}
		if again, err := decodeResult("k", encodeResult(&r)); err != nil || again != r {
			t.Fatalf("round trip of %q: %+v, %v", v, again, err)
		}
	})
}
