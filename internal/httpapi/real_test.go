package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// The tests in this file run the API against real servers: the shared
// NATS (JetStream) and Redis on 127.0.0.1 (skipping when they are not
// there, failing when CI is set), or private ones they stop and start.

// realEnv is an env on the shared NATS and Redis, with a unique stream,
// subjects, consumers and key prefix.
func realEnv(t testing.TB, eo envOptions) *env {
	t.Helper()
	eo.server = "shared"
	rdb := testenv.Redis(t)
	prefix := testenv.Name("api") + ":"
	testenv.CleanupPrefix(t, rdb, prefix)
	eo.cache = cache.NewRedis(rdb, cache.RedisOptions{Prefix: prefix})
	return newEnv(t, eo)
}

func TestRealJobOverHTTPMatchesLocal(t *testing.T) {
	e := realEnv(t, envOptions{opts: Options{Producer: producer.Options{BatchSize: 100}}})
	ps := variants(t, 2000, clue17)
	lines := append([]string{"# 2000 puzzles and some mistakes"}, ps[:1000]...)
	lines = append(lines, "", "12345", ps[3], strings.Repeat("1", 81), "x"+ps[7][1:])
	lines = append(lines, ps[1000:]...)
	body := strings.Join(lines, "\n") + "\n"
	s := e.submit("text/plain", body, "")
	// 2004 lines in batches of 100, the invalid and repeated ones included.
	if s.Lines != 2004 || s.Invalid != 3 || s.Repeated != 1 || s.Queued != 2000 || s.Cached != 0 || s.Batches != 21 {
		t.Errorf("submitted: %+v", s)
	}
	// Streamed as the workers go: read at once, without waiting first.
	for _, format := range []result.Format{result.Text, result.JSONL} {
		res, data := e.get("/v1/jobs/" + s.ID + "/results?format=" + string(format))
		if want := localText(t, body, format); res.StatusCode != 200 || string(data) != want {
			t.Errorf("%s results differ from solve --local: %d, %d bytes vs %d", format, res.StatusCode, len(data), len(want))
		}
	}
	j := e.waitJob(s.ID, 30*time.Second)
	if j.Done != 2004 || j.Counts[result.StatusUnique] != 2000 || j.Counts[job.RepeatStatus] != 1 ||
		j.Counts[result.StatusInvalid] != 3 {
		t.Errorf("job: %+v", j)
	}

	// The same puzzles as a JSON array: all cached in Redis now.
	e.waitCached(ps[:500])
	data := `["` + strings.Join(ps[:500], `","`) + `"]`
	s2 := e.submit("application/json", data, "")
	if s2.Cached != 500 || s2.Queued != 0 {
		t.Errorf("JSON resubmission: %+v", s2)
	}
	res, got := e.get("/v1/jobs/" + s2.ID + "/results?format=text")
	if want := localText(t, strings.Join(ps[:500], "\n"), result.Text); res.StatusCode != 200 || string(got) != want {
		t.Errorf("JSON job results differ from solve --local")
	}

	// And one by one.
	hard := variants(t, 3, hardest)
	for _, p := range hard {
		res, data := e.post("/v1/solve", p)
		var sol Solution
		decode(t, data, &sol)
		if res.StatusCode != 200 || sol.Status != result.StatusUnique || sol.Cached {
			t.Errorf("solve %s: %d %s", p, res.StatusCode, data)
		}
		res, data = e.get("/v1/solutions/" + sol.Key)
		if res.StatusCode != 200 || !strings.Contains(string(data), sol.Solution) {
			t.Errorf("solution %s: %d %s", sol.Key, res.StatusCode, data)
		}
	}
}

// TestRealRedisDown stops a private Redis under the API and a worker:
// only the cache lookups fail (503 cache_unavailable), and fast; single
// puzzles and jobs go on; when Redis is back, so are the lookups.
func TestRealRedisDown(t *testing.T) {
	srv := testenv.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	e := newEnv(t, envOptions{server: "shared", cache: cache.NewRedis(rdb, cache.RedisOptions{}),
		opts: Options{RequestTimeout: 3 * time.Second}})
	if res, data := e.post("/v1/solve", puzzle1); res.StatusCode != 200 {
		t.Fatalf("solve with Redis up: %d %s", res.StatusCode, data)
	}
	srv.Stop()
	// What this process read lately is still answered.
	if res, data := e.get("/v1/solutions?puzzle=" + puzzle1); res.StatusCode != 200 {
		t.Errorf("a hot result with Redis down: %d %s", res.StatusCode, data)
	}
	ps := variants(t, 20, clue17)[1:]
	timed := func(method, path, body string) (*http.Response, []byte) {
		t.Helper()
		start := time.Now()
		res, data := e.do(method, path, "text/plain", strings.NewReader(body))
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s %s took %s with Redis down", method, path, d)
		}
		return res, data
	}
	res, data := timed("GET", "/v1/solutions?puzzle="+ps[0], "")
	wantError(t, res, data, http.StatusServiceUnavailable, CodeCacheUnavailable, "Redis")
	res, data = timed("POST", "/v1/solve", ps[1])
	if res.StatusCode != 200 || !strings.Contains(string(data), `"cached":false`) {
		t.Errorf("POST /v1/solve with Redis down: %d %s", res.StatusCode, data)
	}
	res, data = timed("POST", "/v1/jobs", strings.Join(ps[2:], "\n"))
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/jobs with Redis down: %d %s", res.StatusCode, data)
	}
	var s Submitted
	decode(t, data, &s)
	res, data = timed("GET", "/v1/jobs/"+s.ID+"/results?format=text", "")
	if want := localText(t, strings.Join(ps[2:], "\n"), result.Text); res.StatusCode != 200 || string(data) != want {
		t.Errorf("job results with Redis down: %d\n got %.200s\nwant %.200s", res.StatusCode, data, want)
	}
	if res, data := timed("GET", "/v1/jobs", ""); res.StatusCode != 200 {
		t.Errorf("GET /v1/jobs with Redis down: %d %s", res.StatusCode, data)
	}
	if res, data := timed("GET", "/readyz", ""); res.StatusCode != 200 || !strings.Contains(string(data), `"cache":"down"`) {
		t.Errorf("/readyz with Redis down: %d %s", res.StatusCode, data)
	}

	srv.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, data := e.get("/v1/solutions?puzzle=" + ps[0])
		if res.StatusCode == 404 { // a new, empty Redis
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back, but: %d %s", res.StatusCode, data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRealNATSDown(t *testing.T) {
	srv := testenv.NATSServer(t)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e := newEnv(t, envOptions{nc: nc, opts: Options{RequestTimeout: 3 * time.Second, SolveTimeout: 2 * time.Second}})
	if res, data := e.post("/v1/solve", puzzle1); res.StatusCode != 200 {
		t.Fatalf("solve with NATS up: %d %s", res.StatusCode, data)
	}
	s := e.submit("text/plain", puzzle1, "")
	e.stopWorker()
	srv.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for nc.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	other := variants(t, 2, clue17)[1]
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/v1/solve", other},
		{"POST", "/v1/jobs", other},
		{"GET", "/v1/jobs", ""},
		{"GET", "/v1/jobs/" + s.ID, ""},
		{"GET", "/readyz", ""},
	} {
		start := time.Now()
		res, data := e.do(tt.method, tt.path, "text/plain", strings.NewReader(tt.body))
		wantError(t, res, data, http.StatusServiceUnavailable, CodeQueueUnavailable, "NATS")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s %s took %s with NATS down (the request timeout is 3s)", tt.method, tt.path, d)
		}
	}
	// What is cached is still served.
	if res, data := e.post("/v1/solve", puzzle1); res.StatusCode != 200 || !strings.Contains(string(data), `"cached":true`) {
		t.Errorf("cached puzzle with NATS down: %d %s", res.StatusCode, data)
	}
	res, data := e.get("/v1/stats")
	var st Stats
	decode(t, data, &st)
	if res.StatusCode != 200 || st.QueueError == "" || st.Workers != nil || st.JobsError == "" || st.Jobs != nil {
		t.Errorf("stats with NATS down: %d %s", res.StatusCode, data)
	}

	// NATS back: the client reconnects and the API is ready again.
	srv.Start()
	deadline = time.Now().Add(15 * time.Second)
	for {
		res, data := e.get("/readyz")
		if res.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("NATS back, but /readyz: %d %s", res.StatusCode, data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
