package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

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

// TestRedisSentinel runs a worker and a producer whose Redis is found
// through a Sentinel (redis.master_name, redis.addrs naming the
// Sentinel), as go-redis's UniversalClient does for a master name; then
// kills the master, waits for the Sentinel to promote the replica, and
// runs a second job, which the same worker must write to the new master.
func TestRedisSentinel(t *testing.T) {
	ns := testenv.NATSServer(t)
	master := testenv.RedisServer(t)
	replica := testenv.RedisServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port))
	const masterName = "sudoku-test"
	sAddr := sentinel(t, masterName, master.Addr)

	name := testenv.Name("e2esn")
	e := baseEnv(queueEnv(name)...).with(
		"SUDOKU_NATS_URL="+ns.URL(),
		"SUDOKU_REDIS_ADDRS="+sAddr,
		"SUDOKU_REDIS_MASTER_NAME="+masterName,
		"SUDOKU_QUEUE_BATCH_SIZE=50",
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
	ps := manyPuzzles(t, 600, "17_clue_200.txt")
	job(writeFile(t, ps[:300]))
	if n := keyCount(t, master.Addr, name); n == 0 {
		t.Fatal("nothing written to the master")
	}

	// Lose the master (SIGKILL): the Sentinel sees it down after a second
	// and promotes the replica; the worker (started before) and a new
	// producer find the new master through the Sentinel. (A manual
	// SENTINEL FAILOVER would leave the old master up and writable for
	// ~10 s until the Sentinel demotes it: results written there in that
	// window are lost. Sentinel's failover is for a master that is gone.)
	waitUntil(t, 10*time.Second, "the replica is in sync", func() bool {
		return keyCount(t, replica.Addr, name) == keyCount(t, master.Addr, name)
	})
	sc := redis.NewSentinelClient(&redis.Options{Addr: sAddr})
	defer sc.Close()
	master.Stop()
	waitUntil(t, 30*time.Second, "the Sentinel names the replica as master", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		got, err := sc.GetMasterAddrByName(ctx, masterName).Result()
		return err == nil && len(got) == 2 && net.JoinHostPort(got[0], got[1]) == replica.Addr
	})
	before := keyCount(t, replica.Addr, name)
	defer func() {
		if t.Failed() {
			t.Logf("%s: %d keys, role %s", replica.Addr, keyCount(t, replica.Addr, name), role(replica.Addr))
			t.Log(consumerState(ns.URL(), name))
			_ = worker.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, in its log
			worker.wait(5 * time.Second)
		}
	}()
	job(writeFile(t, ps[300:]))
	if after := keyCount(t, replica.Addr, name); after <= before {
		t.Errorf("the new master has %d keys after the second job, %d before", after, before)
	}
	if worker.exited() {
		t.Fatalf("the worker exited (%d) during the failover", worker.code)
	}
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
