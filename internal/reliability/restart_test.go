package reliability

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
)

// persistentRedis are the arguments of a private redis-server that keeps
// every write on disk before answering: without them, a restarted Redis
// comes back empty and the jobs in progress lose their records (their
// waiters then fail with "no such job"; see TestRedisRestartWithoutPersistence).
var persistentRedis = []string{"--appendonly", "yes", "--appendfsync", "always"}

// outage stops srv for d, then starts it again.
func outage(t *testing.T, what string, stop, start func(), d time.Duration) {
	t.Helper()
	t0 := time.Now()
	stop()
	time.Sleep(d)
	start()
	t.Logf("%s down for %v", what, time.Since(t0).Round(time.Millisecond))
}

// TestNATSRestart restarts the NATS server (file storage) in the middle of
// a job, with two workers solving and a producer waiting (submit --wait):
// both reconnect by themselves, the job completes with every result, once.
func TestNATSRestart(t *testing.T) {
	const n = 8000
	s := newSys(t, options{privateNATS: true, env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	file, puzzles := genFile(t, hardest, n, 3)
	w0, w1 := s.startWorker("worker-0"), s.startWorker("worker-1")
	p := s.start("producer", nil, "submit", "--wait", file)
	id := waitJobID(t, p)
	s.waitFor("a tenth of the job done", time.Minute, func() bool { return s.done(id) >= n/10 })
	outage(t, "NATS", s.nats.Stop, s.nats.Start, 2*time.Second)
	if d := s.done(id); d >= n {
		t.Fatalf("the job finished (%d done) before NATS came back: make it longer", d)
	}

	if code := p.wait(2 * time.Minute); code != cli.ExitOK {
		t.Fatalf("submit --wait: exit %d", code)
	}
	checkSolutions(t, puzzles, p.stdout.String())
	s.checkJob(id, n)
	s.checkDrained()
	for _, w := range []*proc{w0, w1, p} {
		checkOutageLog(t, w, "nats")
	}
}

// TestRedisRestart restarts Redis (persisting with appendfsync always) in
// the middle of a job: the workers hold their batches while it is down and
// go on when it is back, the waiting producer too; every result, once.
func TestRedisRestart(t *testing.T) {
	const n = 8000
	s := newSys(t, options{privateRedis: true, redisArgs: persistentRedis, env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	file, puzzles := genFile(t, hardest, n, 4)
	w0, w1 := s.startWorker("worker-0"), s.startWorker("worker-1")
	p := s.start("producer", nil, "submit", "--wait", file)
	id := waitJobID(t, p)
	s.waitFor("a tenth of the job done", time.Minute, func() bool { return s.done(id) >= n/10 })
	// Longer than go-redis's retries of one command (about 2s), so that
	// the workers see the outage and say so.
	outage(t, "Redis", s.redis.Stop, s.redis.Start, 4*time.Second)
	if d := s.done(id); d >= n {
		t.Fatalf("the job finished (%d done) before Redis came back: make it longer", d)
	}

	if code := p.wait(2 * time.Minute); code != cli.ExitOK {
		t.Fatalf("submit --wait: exit %d", code)
	}
	checkSolutions(t, puzzles, p.stdout.String())
	s.checkJob(id, n)
	s.checkDrained()
	for _, w := range []*proc{w0, w1} {
		checkOutageLog(t, w, "redis")
	}
}

// TestRedisRestartWithoutPersistence shows what a Redis without
// persistence costs: the job records of the jobs in progress are gone
// after a restart, and the waiter says so instead of waiting for ever.
// (The results written after the restart are still cached.)
func TestRedisRestartWithoutPersistence(t *testing.T) {
	const n = 4000
	s := newSys(t, options{privateRedis: true, env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	file, _ := genFile(t, hardest, n, 5)
	s.startWorker("worker-0")
	p := s.start("producer", nil, "submit", "--wait", file)
	id := waitJobID(t, p)
	s.waitFor("some of the job done", time.Minute, func() bool { return s.done(id) > 0 })
	outage(t, "Redis", s.redis.Stop, s.redis.Start, time.Second)
	if code := p.wait(time.Minute); code != cli.ExitFailure || !strings.Contains(p.stderr.String(), "no such job") {
		t.Fatalf("submit --wait after its job record was lost: exit %d, want 1 and \"no such job\"; stderr:\n%s",
			code, tail(p.stderr.String(), 20))
	}
	// The queue still drains: the batches are processed, their results
	// stored, and nothing counts them.
	s.checkDrained()
}

// TestConnectionCut cuts the workers and two waiters (submit --wait and
// job wait) off NATS for a few seconds, then off Redis: they all reconnect
// by themselves, the job completes with every result, once, and each
// process's log says what happened once per outage, not once per retry.
func TestConnectionCut(t *testing.T) {
	const n = 12000
	s := newSys(t, options{privateNATS: true, privateRedis: true, redisArgs: persistentRedis,
		env: []string{"SUDOKU_WORKER_CONCURRENCY=1"}})
	file, puzzles := genFile(t, hardest, n, 6)
	w0, w1 := s.startWorker("worker-0"), s.startWorker("worker-1")
	p := s.start("producer", nil, "submit", "--wait", file)
	id := waitJobID(t, p)
	jw := s.start("job-wait", nil, "job", "wait", id)
	// Both waiters listen for the job's events once they wait.
	s.waitFor("both waiters waiting", time.Minute, func() bool { return s.subscribers(s.name+".events."+id) == 2 })
	// No batch can complete while either service is down, so the job
	// lasts through both outages.
	outage(t, "NATS", s.nats.Stop, s.nats.Start, 3*time.Second)
	outage(t, "Redis", s.redis.Stop, s.redis.Start, 4*time.Second)
	if d := s.done(id); d >= n {
		t.Fatalf("the job finished (%d done) before the outages were over: make it longer", d)
	}

	for _, w := range []*proc{p, jw} {
		if code := w.wait(2 * time.Minute); code != cli.ExitOK {
			t.Fatalf("%s: exit %d", w.name, code)
		}
		checkSolutions(t, puzzles, w.stdout.String())
	}
	s.checkJob(id, n)
	s.checkDrained()
	for _, w := range []*proc{w0, w1} {
		checkOutageLog(t, w, "nats", "redis")
	}
	// The waiters poll the job record and say nothing of a Redis outage:
	// they just wait on.
	for _, w := range []*proc{p, jw} {
		checkOutageLog(t, w, "nats")
	}
}

// jobIDRe finds the job id in what submit reports on stderr.
var jobIDRe = regexp.MustCompile(`(?m)^job ([0-9a-v]{26}): \d+ lines`)

// waitJobID waits for a submitting process to report its job id.
func waitJobID(t *testing.T, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if m := jobIDRe.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1]
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s reported no job id (exit %d):\n%s", p.name, p.code, tail(p.stderr.String(), 20))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outageLogs are, for each service, the log lines that say it went away
// and came back.
var outageLogs = map[string][2]string{
	"nats":  {"nats: disconnected", "nats: reconnected"},
	"redis": {"result store unavailable", "result store is back"},
}

// checkOutageLog checks that p logged one outage of each service: exactly
// one line saying it went and one saying it came back; and that besides
// these it logged at most four warnings, errors or raw lines of a library
// (not one per retry). (After NATS comes back, the pull subscriptions of
// nats.go may overflow once or twice as they catch up: "slow consumer,
// messages dropped", which JetStream redelivers.)
func checkOutageLog(t *testing.T, p *proc, services ...string) {
	t.Helper()
	log := p.stderr.String()
	expected := 0
	for _, service := range services {
		down, up := outageLogs[service][0], outageLogs[service][1]
		nd, nu := len(lines(log, down)), len(lines(log, up))
		if nd != 1 || nu != 1 {
			t.Errorf("%s logged %q %d times and %q %d times, want once each:\n%s", p.name, down, nd, up, nu, logTail(log))
		}
		expected += nd + nu
	}
	noise := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") ||
			strings.HasPrefix(l, "redis: ") || strings.HasPrefix(l, "nats: ") {
			noise++
		}
	}
	// The expected lines at INFO level are not in noise; the others are.
	for _, l := range strings.Split(log, "\n") {
		for _, service := range services {
			for _, want := range outageLogs[service] {
				if strings.Contains(l, want) && strings.Contains(l, "level=INFO") {
					expected--
				}
			}
		}
	}
	if extra := noise - expected; extra > 4 {
		t.Errorf("%s logged %d more warnings, errors or raw library lines than the outages', want at most 4:\n%s", p.name, extra, logTail(log))
	}
}

// logTail is the end of a process's log, without the long start-up line
// that prints the configuration.
func logTail(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "config.nats.url=") {
			keep = append(keep, l)
		}
	}
	return tail(strings.Join(keep, "\n"), 40)
}

// subscribers returns the number of connections to the private NATS
// server subscribed to subject, from its monitoring endpoint.
func (s *sys) subscribers(subject string) int {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/connz?subs=1", s.natsMonitor))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var connz struct {
		Connections []struct {
			Subs []string `json:"subscriptions_list"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&connz); err != nil {
		return -1
	}
	n := 0
	for _, c := range connz.Connections {
		if slices.Contains(c.Subs, subject) {
			n++
		}
	}
	return n
}
