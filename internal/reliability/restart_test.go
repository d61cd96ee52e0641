package reliability

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// outage stops a server for d, then starts it again.
func outage(t *testing.T, what string, stop, start func(), d time.Duration) {
	t.Helper()
	t0 := time.Now()
	stop()
	time.Sleep(d)
	start()
	t.Logf("%s down for %v", what, time.Since(t0).Round(time.Millisecond))
}

// midJob is a job of n hard puzzles in progress: two workers solving and
// a producer waiting for it (submit --wait), once a tenth of its batches
// are done.
type midJob struct {
	s        *sys
	n        int
	puzzles  []string
	workers  []*proc
	producer *proc
	id       string
}

func (s *sys) startMidJob(n int, seed uint64) *midJob {
	s.t.Helper()
	file, puzzles := genFile(s.t, hardest, n, seed)
	j := &midJob{s: s, n: n, puzzles: puzzles}
	j.workers = []*proc{s.startWorker("worker-0"), s.startWorker("worker-1")}
	j.producer = s.start("producer", nil, "submit", "--wait", file)
	j.id = waitJobID(s.t, j.producer)
	s.waitFor("the producer reading the results", time.Minute, func() bool { return s.readers() == 1 })
	s.waitFor("a tenth of the job done", time.Minute, func() bool { return s.batchesDone(j.id) >= n/s.batchSize/10 })
	return j
}

// readers returns the number of consumers of the results stream: one per
// process following a job (-1 when JetStream does not answer).
func (s *sys) readers() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := s.q.Results.Info(ctx)
	if err != nil {
		return -1
	}
	return info.State.Consumers
}

// notDone fails the test if the job is done already.
func (j *midJob) notDone(what string) {
	j.s.t.Helper()
	if d := j.s.batchesDone(j.id); d*j.s.batchSize >= j.n {
		j.s.t.Fatalf("the job finished (%d batches done) before %s: make it longer", d, what)
	}
}

// finish waits for the producer and checks the job: exit 0, every line
// right, exact counts, nothing left in the queue.
func (j *midJob) finish() {
	s := j.s
	s.t.Helper()
	if code := s.waitJob(j.producer, j.id, 2*time.Minute); code != cli.ExitOK {
		s.t.Fatalf("submit --wait: exit %d", code)
	}
	checkSolutions(s.t, j.puzzles, j.producer.stdout.String())
	checkSummary(s.t, j.producer.stderr.String(), j.id, fmt.Sprintf("%d unique", j.n))
	s.checkJob(j.id, want{lines: int64(j.n), queued: int64(j.n)})
	s.checkDrained()
}

// TestNATSRestart restarts the NATS server (file storage) in the middle of
// a job, with two workers solving and a producer waiting (submit --wait):
// all reconnect by themselves, the job completes with every result, once.
func TestNATSRestart(t *testing.T) {
	s := newSys(t, options{privateNATS: true, env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	j := s.startMidJob(8000, 3)
	outage(t, "NATS", s.nats.Stop, s.nats.Start, 2*time.Second)
	j.notDone("NATS came back")
	j.finish()
	for _, p := range append(j.workers, j.producer) {
		checkOutageLog(t, p, "nats")
	}
}

// TestRedisRestart restarts Redis (without persistence: it comes back
// empty) in the middle of a job. Redis is only a cache: the workers solve
// on without it, say so once, and once more when it is back; the job
// completes with every result, once.
func TestRedisRestart(t *testing.T) {
	s := newSys(t, options{privateRedis: true, env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	j := s.startMidJob(8000, 4)
	// Longer than the cache's probes back off (5s at most), so that every
	// worker sees the outage.
	outage(t, "Redis", s.redis.Stop, s.redis.Start, 4*time.Second)
	j.notDone("Redis came back")
	j.finish()
	for _, w := range j.workers {
		checkOutageLog(t, w, "redis")
	}
	// The workers fill the cache again once it is back.
	if n := s.cached(); n <= 0 || n >= int64(j.n) {
		t.Errorf("%d results in the cache after the restart; want some, not all", n)
	}
}

// TestRedisKilledMidJob kills Redis in the middle of a job and never
// starts it again: the job completes with exit status 0, every line
// right and exact counts; each worker says once that the cache is
// failing; a worker started while Redis is down starts all the same and
// takes its share; a second job, submitted while Redis is down, completes
// too.
func TestRedisKilledMidJob(t *testing.T) {
	s := newSys(t, options{privateRedis: true, env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	// Long enough to outlast starting a worker and its first batch.
	j := s.startMidJob(32000, 5)
	s.redis.Stop()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	late := s.startWorker("worker-late", "SUDOKU_METRICS_ADDR="+addr)
	j.workers = append(j.workers, late)
	s.waitFor("the worker started without Redis to ack a batch", time.Minute, func() bool {
		v, err := metric(addr, `sudoku_batches_total{outcome="acked"}`)
		return err == nil && v > 0
	})
	j.notDone("the test looked")
	j.finish()
	for _, w := range j.workers[:2] {
		checkOutageLog(t, w, "redis-down")
	}
	if !strings.Contains(late.stderr.String(), "Redis not reachable; going on without the cache") {
		t.Errorf("the worker started without Redis does not say so:\n%s", logTail(late.stderr.String()))
	}
	file, puzzles := genFile(t, clue17, 500, 6)
	out, stderr := s.mustRun(cli.ExitOK, "submit", "--wait", file)
	checkSolutions(t, puzzles, out)
	id := jobIDRe.FindStringSubmatch(stderr)[1]
	checkSummary(t, stderr, id, "500 unique")
	s.checkJob(id, want{lines: 500, queued: 500})
}

// TestRedisFlushedMidJob empties Redis (FLUSHALL) in the middle of a job:
// nothing the job needs is there, so the job completes with exit status
// 0, every line right and exact counts, and the workers, who never saw
// Redis fail, log no warning about it.
func TestRedisFlushedMidJob(t *testing.T) {
	s := newSys(t, options{privateRedis: true, env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	j := s.startMidJob(8000, 7)
	before := s.cached()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("FLUSHALL with %d results in the cache", before)
	j.notDone("the flush")
	j.finish()
	for _, w := range j.workers {
		checkOutageLog(t, w)
	}
	// What was solved after the flush is cached again.
	if n := s.cached(); n <= 0 || n >= int64(j.n) {
		t.Errorf("%d results in the cache after the flush; want some, not all", n)
	}
}

// TestConnectionCut cuts the workers and two waiters (submit --wait and
// job wait) off NATS for a few seconds, then the workers off Redis: they
// all reconnect by themselves, the job completes with every result, once,
// and each process's log says what happened once per outage, not once
// per retry.
func TestConnectionCut(t *testing.T) {
	s := newSys(t, options{privateNATS: true, privateRedis: true, env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	// Long enough that both workers write to Redis after it is back: a
	// worker tries it again after a backoff of up to 5 s.
	j := s.startMidJob(40000, 8)
	jw := s.start("job-wait", nil, "job", "wait", j.id)
	s.waitFor("both waiters reading", time.Minute, func() bool { return s.readers() == 2 })
	outage(t, "NATS", s.nats.Stop, s.nats.Start, 3*time.Second)
	outage(t, "Redis", s.redis.Stop, s.redis.Start, 4*time.Second)
	j.notDone("the outages were over")

	if code := s.waitJob(jw, j.id, 2*time.Minute); code != cli.ExitOK {
		t.Fatalf("%s: exit %d", jw.name, code)
	}
	checkSolutions(t, j.puzzles, jw.stdout.String())
	checkSummary(t, jw.stderr.String(), j.id, fmt.Sprintf("%d unique", j.n))
	j.finish()
	for _, w := range j.workers {
		checkOutageLog(t, w, "nats", "redis")
	}
	// The waiters do not use Redis: they say nothing of its outage.
	for _, w := range []*proc{j.producer, jw} {
		checkOutageLog(t, w, "nats")
	}
}

// outageLogs are, for each kind of outage, the log lines that say the
// service went away and came back ("" for one that does not come back).
var outageLogs = map[string][2]string{
	"nats":       {"NATS: disconnected", "NATS: reconnected"},
	"redis":      {"cache: Redis writes failing", "cache: Redis writes are back"},
	"redis-down": {"cache: Redis writes failing", ""},
}

// checkOutageLog checks that p logged one outage of each service: exactly
// one line saying it went and one saying it came back; and that besides
// these it logged at most four warnings, errors or raw lines of a library
// (not one per retry).
func checkOutageLog(t *testing.T, p *proc, outages ...string) {
	t.Helper()
	log := p.stderr.String()
	expected := map[string]bool{}
	for _, o := range outages {
		for _, l := range outageLogs[o] {
			if l == "" {
				continue
			}
			if n := len(lines(log, l)); n != 1 {
				t.Errorf("%s logged %q %d times, want once:\n%s", p.name, l, n, logTail(log))
			}
			expected[l] = true
		}
	}
	// A cache outage the process did not have is not in its log at all.
	if !slices.ContainsFunc(outages, func(o string) bool { return strings.HasPrefix(o, "redis") }) {
		if n := len(lines(log, "cache: Redis")); n != 0 {
			t.Errorf("%s logged %d lines about the cache, want none:\n%s", p.name, n, logTail(log))
		}
	}
	var noise []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "level=WARN") && !strings.Contains(l, "level=ERROR") &&
			!strings.HasPrefix(l, "redis: ") && !strings.HasPrefix(l, "nats: ") {
			continue
		}
		ok := false
		for e := range expected {
			ok = ok || strings.Contains(l, e)
		}
		if !ok {
			noise = append(noise, l)
		}
	}
	if len(noise) > 4 {
		t.Errorf("%s logged %d more warnings, errors or raw library lines than the outages', want at most 4:\n%s",
			p.name, len(noise), strings.Join(noise, "\n"))
	}
}

// metric reads the sample named exactly series (as the text format writes
// it, such as `sudoku_batches_total{outcome="acked"}`) from the /metrics
// of the worker serving on addr.
func metric(addr, series string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s/metrics", series, addr)
}
