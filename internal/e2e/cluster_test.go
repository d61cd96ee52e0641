package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// natsNode is one nats-server process of a private JetStream cluster.
type natsNode struct {
	t           testing.TB
	name        string // server name, as JetStream reports leaders
	port        int
	clusterPort int
	argv        []string
	logPath     string
	cmd         *exec.Cmd
	exited      chan struct{}
}

// URL returns the node's client URL.
func (n *natsNode) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// natsCluster starts size nats-server processes on free ports of
// 127.0.0.1 forming the JetStream cluster name, each with its own store,
// and waits until they have elected a meta leader. They are killed when
// the test ends; their logs are shown if it failed.
func natsCluster(t testing.TB, name string, size int) []*natsNode {
	t.Helper()
	bin := lookBin(t, "SUDOKU_TEST_NATS_SERVER", "nats-server")
	nodes := make([]*natsNode, size)
	for i := range nodes {
		nodes[i] = &natsNode{t: t, name: fmt.Sprintf("%s-n%d", name, i+1),
			port: testenv.FreePort(t), clusterPort: testenv.FreePort(t)}
	}
	for _, n := range nodes {
		var routes []string
		for _, o := range nodes {
			if o != n {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", o.clusterPort))
			}
		}
		dir := t.TempDir()
		n.logPath = filepath.Join(dir, "nats-server.log")
		n.argv = []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(n.port), "-n", n.name,
			"--cluster_name", name, "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", n.clusterPort),
			"--routes", strings.Join(routes, ","), "-js", "-sd", filepath.Join(dir, "js"), "-l", n.logPath}
		n.start()
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.kill()
			if t.Failed() {
				if b, err := os.ReadFile(n.logPath); err == nil {
					t.Logf("%s log (last 3000 bytes, without route retries):\n%s", n.name, tail(quiet(string(b)), 3000))
				}
			}
		}
	})
	waitMetaLeader(t, nodes, 30*time.Second)
	return nodes
}

// quiet drops the lines of a nats-server log that repeat every second
// while a peer is down.
func quiet(log string) string {
	var b strings.Builder
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "Error trying to connect to route") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// start starts the node's process and waits (10s at most) until it
// accepts connections.
func (n *natsNode) start() {
	n.t.Helper()
	n.cmd = exec.Command(n.argv[0], n.argv[1:]...)
	if err := n.cmd.Start(); err != nil {
		n.t.Fatalf("start %s: %v", strings.Join(n.argv, " "), err)
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(n.cmd, n.exited)
	addr := fmt.Sprintf("127.0.0.1:%d", n.port)
	waitUntil(n.t, 10*time.Second, n.name+" listening on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// kill kills the node's process (SIGKILL) and waits for it.
func (n *natsNode) kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

// urls returns the nodes' client URLs, comma-separated.
func urls(nodes []*natsNode) string {
	var us []string
	for _, n := range nodes {
		us = append(us, n.URL())
	}
	return strings.Join(us, ",")
}

// waitMetaLeader waits until every node answers $JS.API.INFO without an
// error, which JetStream only does once the cluster has a meta leader.
func waitMetaLeader(t testing.TB, nodes []*natsNode, d time.Duration) {
	t.Helper()
	for _, n := range nodes {
		nc, err := nats.Connect(n.URL(), nats.Timeout(2*time.Second))
		if err != nil {
			t.Fatalf("connect to %s: %v", n.name, err)
		}
		var last string
		deadline := time.Now().Add(d)
		for {
			m, err := nc.Request("$JS.API.INFO", nil, time.Second)
			if err == nil {
				var info struct {
					Error *struct {
						Description string `json:"description"`
					} `json:"error"`
				}
				if json.Unmarshal(m.Data, &info) == nil && info.Error == nil {
					break
				}
				last = string(m.Data)
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				nc.Close()
				t.Fatalf("the cluster elected no JetStream meta leader within %v (%s: %s)", d, n.name, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
		nc.Close()
	}
}

// TestClusterLosesAServerMidJob runs a job on a three-server JetStream
// cluster with the stream at three replicas, two worker processes and a
// producer connected with all three URLs, kills (SIGKILL) the server
// leading the stream in the middle of the job, and checks that the job
// completes with every result right and every count exact.
func TestClusterLosesAServerMidJob(t *testing.T) {
	rs := testenv.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	nodes := natsCluster(t, "sq", 3)
	name := testenv.Name("e2ecl")
	e := baseEnv(queueEnv(name)...).with(
		"SUDOKU_NATS_URL="+urls(nodes),
		"SUDOKU_REDIS_ADDRS="+rs.Addr,
		"SUDOKU_QUEUE_REPLICAS=3",
		"SUDOKU_QUEUE_BATCH_SIZE=50",
		// Batches whose ack was lost with the server come back soon.
		"SUDOKU_QUEUE_ACK_WAIT=3s",
		"SUDOKU_QUEUE_BACKOFF=200ms,1s",
		"SUDOKU_WORKER_CONCURRENCY=1",
	)

	// Create the stream once the cluster can place three replicas: the
	// meta leader may know its peers a moment after it is elected.
	cfg := e.config(t)
	nc, err := nats.Connect(urls(nodes), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var q *queue.Queue
	waitUntil(t, 30*time.Second, "create the stream at 3 replicas", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		q, err = queue.Setup(ctx, js, app.QueueOptions(cfg.Queue))
		return err == nil
	})

	// Hard puzzles, so that the job lasts long enough to kill a server
	// in the middle of it.
	const n = 6000
	file := writeFile(t, manyPuzzles(t, n, "hardest_200.txt"))
	want := localOut(t, file)

	metricsAddrs := []string{freeAddr(t), freeAddr(t)}
	var workers []*proc
	for i, addr := range metricsAddrs {
		workers = append(workers, start(t, fmt.Sprintf("worker %d", i+1), e.with("SUDOKU_METRICS_ADDR="+addr), "worker"))
	}
	code, out, stderr := run(t, time.Minute, e, "submit", file)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(out)

	jobKey := name + ":job:{" + id + "}"
	done := func() int {
		d, _ := rdb.HGet(context.Background(), jobKey, "done").Int()
		return d
	}
	waitUntil(t, 30*time.Second, "the workers start on the job", func() bool { return done() > 0 })

	// Kill the server leading the bulk consumer: the workers' pull
	// requests wait there, so they must notice it is gone and pull from
	// its successor; it holds a replica of the stream too.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	si, err := q.JS.Stream(ctx, name)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ci, err := q.Bulk.Info(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var victim *natsNode
	for _, nd := range nodes {
		if nd.name == ci.Cluster.Leader {
			victim = nd
		}
	}
	if victim == nil {
		t.Fatalf("consumer leader %q is none of the servers", ci.Cluster.Leader)
	}
	victim.kill()
	at := done()
	t.Logf("killed %s, the bulk consumer's leader (the stream's is %s), with %d of %d puzzles done",
		victim.name, si.CachedInfo().Cluster.Leader, at, n)
	if at >= n {
		t.Fatal("the job finished before the server was killed; make it longer")
	}

	// Wait for the job, failing early, with the consumer's state, if it
	// stops making progress.
	consumerState := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ci, err := q.Bulk.Info(ctx)
		if err != nil {
			return "consumer info: " + err.Error()
		}
		return fmt.Sprintf("consumer leader %s: %d pending, %d ack pending, %d redelivered, %d pull requests waiting",
			ci.Cluster.Leader, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting)
	}
	waiter := start(t, "job wait", e, "job", "wait", id)
	last, lastChange := done(), time.Now()
	deadline := time.Now().Add(2 * time.Minute)
	for !waiter.exited() {
		if d := done(); d != last {
			last, lastChange = d, time.Now()
		}
		if time.Since(lastChange) > 30*time.Second || time.Now().After(deadline) {
			t.Fatalf("the job is stuck at %d of %d puzzles since %v after losing %s; %s\n"+
				"(no pull request waiting means the workers never noticed that their pull requests died "+
				"with the consumer's leader)", last, n, time.Since(lastChange).Round(time.Second), victim.name, consumerState())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if waiter.code != 0 {
		t.Fatalf("job wait: exit %d: %s", waiter.code, waiter.stderr.String())
	}
	if out := waiter.stdout.String(); out != want {
		t.Fatalf("results after losing a server differ from solve --local (%d vs %d bytes)", len(out), len(want))
	}
	jobStatus(t, e, id, n)

	// The workers rode it out, and their metrics add up to the job (a
	// batch whose ack was lost with the server is counted again).
	var solved, redelivered float64
	for i, w := range workers {
		if w.exited() {
			t.Fatalf("worker %d exited (%d) when the server was killed", i+1, w.code)
		}
		_, page, err := httpGet("http://" + metricsAddrs[i] + "/metrics")
		if err != nil {
			t.Fatalf("worker %d metrics: %v", i+1, err)
		}
		v, err := metricValue(page, `sudoku_puzzles_total{status="unique"}`)
		if err != nil {
			t.Fatalf("worker %d: %v", i+1, err)
		}
		r, _ := metricValue(page, "sudoku_redeliveries_total")
		t.Logf("worker %d: %v puzzles, %v redeliveries", i+1, v, r)
		solved += v
		redelivered += r
		if code, body, err := httpGet("http://" + metricsAddrs[i] + "/readyz"); err != nil || code != 200 {
			t.Errorf("worker %d /readyz after the failover: %d %q %v", i+1, code, body, err)
		}
	}
	if solved < n {
		t.Errorf("the workers' metrics count %v puzzles, want at least %d", solved, n)
	}
	for i, w := range workers {
		if code := w.stop(30 * time.Second); code != 0 {
			t.Errorf("worker %d: exit %d after SIGTERM", i+1, code)
		}
	}
}
