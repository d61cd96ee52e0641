package cache_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestRedisCluster runs a job with a Redis Cluster of three primaries on
// loopback as its cache (keys spread over the slots of every node), then
// reads every solution back with sudoku get.
func TestRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	var addrs []string
	for range 3 {
		s := testenv.RedisServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		addrs = append(addrs, s.Addr)
	}
	create := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "0", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rdb.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := rdb.ClusterInfo(context.Background()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster is not ready: %v %s", err, info)
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Setenv("SUDOKU_REDIS_ADDRS", strings.Join(addrs, ","))
	t.Setenv("SUDOKU_LOG_LEVEL", "warn")
	puzzles := testenv.Puzzles(t, "../cli/testdata/17_clue_200.txt", 300)
	file := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(file, []byte(strings.Join(puzzles, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cli.Run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	// The one-command start (embedded NATS, a worker in this process)
	// with the cluster as its cache.
	code, out, stderr := run("solve", file)
	if code != cli.ExitOK || strings.Contains(stderr, "in-process cache") {
		t.Fatalf("solve with a Redis Cluster: exit %d: %s", code, stderr)
	}
	sols := strings.Split(strings.TrimSpace(out), "\n")
	if len(sols) != len(puzzles) {
		t.Fatalf("%d solutions for %d puzzles", len(sols), len(puzzles))
	}
	// Every solution is in the cluster, on every node's share of slots.
	var mu sync.Mutex // ForEachMaster calls on every master at once
	nodes := map[string]int{}
	for i, p := range puzzles {
		code, got, stderr := run("get", p)
		if code != cli.ExitOK || strings.TrimSpace(got) != sols[i] {
			t.Fatalf("get of puzzle %d: exit %d, %q (%s); want %s", i, code, got, stderr, sols[i])
		}
	}
	err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		nodes[c.Options().Addr] = int(n)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for addr, n := range nodes {
		if n == 0 {
			t.Errorf("node %s holds no key: %v", addr, nodes)
		}
		total += n
	}
	if total < len(puzzles) {
		t.Errorf("%d keys in the cluster for %d puzzles: %v", total, len(puzzles), nodes)
	}
}
