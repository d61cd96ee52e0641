package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// sentinel starts a Redis Sentinel (redis-server in sentinel mode, as
// Debian's redis-sentinel is) on a free port of 127.0.0.1, watching the
// master at masterAddr under the name master, with a quorum of one. It
// is killed when the test ends.
func sentinel(t testing.TB, master, masterAddr string) string {
	t.Helper()
	bin := lookBin(t, "SUDOKU_TEST_REDIS_SERVER", "redis-server")
	host, port, _ := net.SplitHostPort(masterAddr)
	addr := freeAddr(t)
	_, sport, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: it must be writable
	text := fmt.Sprintf("port %s\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
		"sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\n",
		sport, dir, filepath.Join(dir, "sentinel.log"), master, host, port, master, master)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		testenv.Unavailable(t, "redis-server --sentinel", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "sentinel.log")); err == nil {
				t.Logf("sentinel log:\n%s", tail(string(b), 3000))
			}
		}
	})
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second})
	defer sc.Close()
	waitUntil(t, 10*time.Second, "the sentinel knows the master", func() bool {
		select {
		case <-exited:
			t.Fatal("redis-server --sentinel exited; this redis-server cannot be a Sentinel")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		got, err := sc.GetMasterAddrByName(ctx, master).Result()
		return err == nil && len(got) == 2 && net.JoinHostPort(got[0], got[1]) == masterAddr
	})
	return addr
}

// TestRedisSentinel runs a worker and producers whose Redis is found
// through a Sentinel (redis.master_name, redis.addrs naming the
// Sentinel), as go-redis's UniversalClient does for a master name. A
// first job fills the cache on the master. In the middle of a second
// job (some of its batches done, not all), the master is killed: the
// job does not notice (Redis is only a cache), it completes with every
// line right and exact counts while the Sentinel promotes the replica.
// The worker, started before, then writes to the new master, found
// through the Sentinel: every solution of a job after the failover is
// there. It says once that the cache failed and once that it is back
// (or neither, when the client's retries rode the failover out).
func TestRedisSentinel(t *testing.T) {
	ns := testenv.NATSServer(t)
	master := testenv.RedisServer(t)
	replica := testenv.RedisServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port))
	const masterName = "sudoku-test"
	sAddr := sentinel(t, masterName, master.Addr)

	name := testenv.Name("e2esn")
	const batchSize = 50
	e := baseEnv(queueEnv(name)...).with(
		"SUDOKU_NATS_URL="+ns.URL(),
		"SUDOKU_REDIS_ADDRS="+sAddr,
		"SUDOKU_REDIS_MASTER_NAME="+masterName,
		fmt.Sprintf("SUDOKU_QUEUE_BATCH_SIZE=%d", batchSize),
		"SUDOKU_WORKER_CONCURRENCY=1",
	)
	worker := start(t, "worker", e.with("SUDOKU_LOG_LEVEL=info"), "worker")

	job := func(file string) {
		t.Helper()
		code, out, stderr := run(t, time.Minute, e, "submit", "--wait", file)
		if code != 0 {
			t.Fatalf("submit --wait: exit %d: %s", code, stderr)
		}
		if out != localOut(t, file) {
			t.Fatal("results through the Sentinel differ from solve --local")
		}
	}
	ps := manyPuzzles(t, 900, "17_clue_200.txt")
	job(writeFile(t, ps[:300]))
	// The worker fills the cache after each ack.
	waitUntil(t, 10*time.Second, "the first job's 300 solutions in the master", func() bool {
		return keyCount(t, master.Addr, name) == 300
	})
	waitUntil(t, 10*time.Second, "the replica is in sync", func() bool {
		return keyCount(t, replica.Addr, name) == keyCount(t, master.Addr, name)
	})
	defer func() {
		if t.Failed() {
			t.Logf("%s: %d keys, role %s", replica.Addr, keyCount(t, replica.Addr, name), role(replica.Addr))
			t.Log(consumerState(ns.URL(), name))
			_ = worker.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, in its log
			worker.wait(5 * time.Second)
		}
	}()

	// A job of hard puzzles, long enough to lose the master in its
	// middle.
	const n = 3000
	file := writeFile(t, manyPuzzles(t, n, "hardest_200.txt"))
	want := localOut(t, file)
	code, out, stderr := run(t, time.Minute, e, "submit", file)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	waiter := start(t, "job wait", e, "job", "wait", id)
	done := func() int { return batchesDone(t, ns.URL(), name, id) }
	waitUntil(t, 30*time.Second, "some of the job done", func() bool { return done() > 0 })

	// Lose the master (SIGKILL) with a cache write in flight or about to
	// be: the Sentinel sees it down after a second and promotes the
	// replica. (A manual SENTINEL FAILOVER would leave the old master up
	// and writable for ~10 s until the Sentinel demotes it: results
	// written there in that window are lost. Sentinel's failover is for
	// a master that is gone.)
	master.Stop()
	at := done()
	t.Logf("killed the master with %d of %d batches done", at, n/batchSize)
	if at >= n/batchSize {
		t.Fatal("the job finished before the master was killed; make it longer")
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: sAddr})
	defer sc.Close()
	waitUntil(t, 30*time.Second, "the Sentinel names the replica as master", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		got, err := sc.GetMasterAddrByName(ctx, masterName).Result()
		return err == nil && len(got) == 2 && net.JoinHostPort(got[0], got[1]) == replica.Addr
	})
	if code := waiter.wait(2 * time.Minute); code != 0 {
		t.Fatalf("job wait: exit %d: %s", code, waiter.stderr.String())
	}
	if waiter.stdout.String() != want {
		t.Fatal("results of the job that lost the master differ from solve --local")
	}
	jobStatus(t, e, id, n)

	// The worker writes to the new master once its cache has backed off
	// (5s at most) and a write, its probe, went through. Writes made
	// before that are dropped (the cache is best-effort), so the third
	// job may fill only part of it; the fourth must fill it all.
	time.Sleep(6 * time.Second)
	job(writeFile(t, ps[300:600]))
	const failing, back = "cache: Redis writes failing", "cache: Redis writes are back"
	waitUntil(t, 10*time.Second, "the worker's cache writes to come back", func() bool {
		log := worker.stderr.String()
		return !strings.Contains(log, failing) || strings.Contains(log, back)
	})
	before := keyCount(t, replica.Addr, name)
	job(writeFile(t, ps[600:]))
	waitUntil(t, 10*time.Second, "the fourth job's 300 solutions in the new master", func() bool {
		return keyCount(t, replica.Addr, name) == before+300
	})
	if worker.exited() {
		t.Fatalf("the worker exited (%d) during the failover", worker.code)
	}
	// An outage is logged once when it starts and once when it ends. (The
	// client may also ride the failover out by retrying a write: then
	// there is no outage to log, and nothing was dropped.)
	log := worker.stderr.String()
	if f, b := strings.Count(log, failing), strings.Count(log, back); f > 1 || b != f {
		t.Errorf("the worker logged %q %d times and %q %d times, want once each or neither:\n%s", failing, f, back, b, log)
	}
}

// batchesDone returns how many batches of job id have their results in
// the results stream of the queue name on the NATS server at url.
func batchesDone(t testing.TB, url, name, id string) int {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return -1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o := queue.Options{Stream: name, Prefix: name}
	s, err := js.Stream(ctx, o.ResultsStream())
	if err != nil {
		return -1
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(o.ResultsFilter(id)))
	if err != nil {
		return -1
	}
	return len(info.State.Subjects)
}

// consumerState describes the bulk consumer of the stream name on the
// NATS server at url.
func consumerState(url, name string) string {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return err.Error()
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, name, name+"-bulk")
	if err != nil {
		return "consumer: " + err.Error()
	}
	ci := c.CachedInfo()
	return fmt.Sprintf("consumer %s: %d pending, %d ack pending, %d redelivered, %d pull requests waiting, last delivered %d",
		ci.Name, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Delivered.Stream)
}

// role returns the replication role of the Redis at addr.
func role(addr string) string {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := rdb.Do(ctx, "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return fmt.Sprint(err)
	}
	return fmt.Sprint(v[0])
}

// keyCount returns the number of keys starting with prefix on the Redis
// at addr.
func keyCount(t testing.TB, addr, prefix string) int {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatalf("keys on %s: %v", addr, err)
	}
	return len(keys)
}
