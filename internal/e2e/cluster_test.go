package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// stepDown asks the leader of a stream (consumer "") or of a consumer
// to step down, through the server at url.
func stepDown(t testing.TB, nc *nats.Conn, stream, consumer string) {
	t.Helper()
	subject := "$JS.API.STREAM.LEADER.STEPDOWN." + stream
	if consumer != "" {
		subject = "$JS.API.CONSUMER.LEADER.STEPDOWN." + stream + "." + consumer
	}
	m, err := nc.Request(subject, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var resp struct {
		Success bool `json:"success"`
	}
	if json.Unmarshal(m.Data, &resp) != nil || !resp.Success {
		t.Logf("%s: %s", subject, m.Data)
	}
}

// leaders says which server leads each stream of q and the consumer of a
// job's lane ("" for one that does not answer now).
type leaders struct {
	work, results, jobs, dlq, consumer string
}

func (l leaders) String() string {
	return fmt.Sprintf("work stream %s, results stream %s, jobs bucket %s, dead-letter stream %s, job consumer %s",
		l.work, l.results, l.jobs, l.dlq, l.consumer)
}

func leadersOf(t testing.TB, q *queue.Queue, id string) leaders {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var l leaders
	for _, x := range []struct {
		stream string
		to     *string
	}{{q.Opts.Stream, &l.work}, {q.Opts.ResultsStream(), &l.results}, {"KV_" + q.Opts.JobsBucket(), &l.jobs},
		{q.Opts.DLQStream, &l.dlq}} {
		si, err := q.JS.Stream(ctx, x.stream)
		if err != nil {
			continue // no leader now: ""
		}
		if si.CachedInfo().Cluster != nil {
			*x.to = si.CachedInfo().Cluster.Leader
		}
	}
	if id == "" {
		return l
	}
	name, err := q.JobConsumer(ctx, id)
	if err != nil {
		return l
	}
	if c, err := q.JS.Consumer(ctx, q.Opts.Stream, name); err == nil && c.CachedInfo().Cluster != nil {
		l.consumer = c.CachedInfo().Cluster.Leader
	}
	return l
}

// laneConsumer creates the consumer of job id's lane, as the first worker
// to take one of its batches would, and returns its name: the consumer is
// shared by the lane's jobs, and no worker runs yet to create it.
func laneConsumer(t testing.TB, q *queue.Queue, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := q.JobLane(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.LaneWork(ctx, l); err != nil {
		t.Fatal(err)
	}
	return q.Opts.LaneConsumer(l)
}

// TestClusterLosesAServerMidJob runs a job on a three-server JetStream
// cluster, every stream at three replicas, two worker processes and a
// waiter (job wait) connected with all three URLs, and kills (SIGKILL) a
// server in the middle of the job:
//
//   - results_stream_leader: the server leading the results stream, where
//     the workers publish every batch's results (and not the job's
//     consumer, whose leader is moved off it first);
//   - consumer_leader: the server leading the consumer of the job's lane
//     (shared by the owner's jobs of its priority and slot), which holds
//     the workers' pull requests and takes their acks (and not the
//     results stream, whose leader is moved off it first);
//   - jobs_bucket_leader: the server leading the jobs bucket, which holds
//     the job's record and manifests (and neither of the others): the
//     replicas left may be behind, and what one of them does not have
//     must not make the waiter or a worker take the job for unknown.
//
// Each time the job completes with every result right and every count
// exact; the workers and the waiter ride the failover out without a
// restart; a batch whose publish or ack was lost with the server is
// delivered again (redelivered > 0: the first two cases, where the
// server held what every batch goes through), and the workers' metrics
// account for every delivery.
func TestClusterLosesAServerMidJob(t *testing.T) {
	for _, victim := range []string{"results_stream_leader", "consumer_leader", "jobs_bucket_leader"} {
		t.Run(victim, func(t *testing.T) { clusterLosesAServer(t, victim) })
	}
}

func clusterLosesAServer(t *testing.T, victimRole string) {
	rs := testenv.RedisServer(t)
	nodes := natsCluster(t, "sq", 3)
	name := testenv.Name("e2ecl")
	const batchSize = 50
	e := baseEnv(queueEnv(name)...).with(
		"SUDOKU_NATS_URL="+urls(nodes),
		"SUDOKU_REDIS_ADDRS="+rs.Addr,
		"SUDOKU_QUEUE_REPLICAS=3",
		fmt.Sprintf("SUDOKU_QUEUE_BATCH_SIZE=%d", batchSize),
		// Batches whose ack was lost with the server come back soon.
		"SUDOKU_QUEUE_ACK_WAIT=3s",
		"SUDOKU_QUEUE_BACKOFF=200ms,1s",
		"SUDOKU_WORKER_CONCURRENCY=1",
	)

	// Create the streams once the cluster can place three replicas: the
	// meta leader may know its peers a moment after it is elected.
	cfg := e.config(t)
	nc, err := nats.Connect(urls(nodes), nats.Timeout(2*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var q *queue.Queue
	waitUntil(t, 30*time.Second, "create the streams at 3 replicas", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		q, err = queue.Setup(ctx, js, app.QueueOptions(cfg.Queue, cfg.Job.ResultTTL))
		return err == nil
	})
	// The victim's role on a server of its own (the results stream and
	// the job's lane's consumer apart; the jobs bucket apart from both),
	// so that each case loses that role only: the streams before the job
	// is submitted, its lane's consumer (created here, before any worker
	// runs) after.
	var l leaders
	var id, consumer string
	alone := func(l leaders) bool {
		if l.results == "" || l.jobs == "" || (id != "" && l.consumer == "") {
			return false
		}
		if victimRole == "jobs_bucket_leader" {
			return l.jobs != l.results && (id == "" || l.jobs != l.consumer)
		}
		return id == "" || l.results != l.consumer
	}
	align := func() {
		waitUntil(t, 30*time.Second, "the "+victimRole+" alone on its server", func() bool {
			l = leadersOf(t, q, id)
			if alone(l) {
				return true
			}
			switch {
			case victimRole == "jobs_bucket_leader":
				stepDown(t, nc, "KV_"+q.Opts.JobsBucket(), "")
			case id == "" || victimRole == "consumer_leader":
				stepDown(t, nc, q.Opts.ResultsStream(), "")
			default:
				stepDown(t, nc, q.Opts.Stream, consumer)
			}
			time.Sleep(time.Second)
			return false
		})
	}
	align()

	// Hard puzzles, so that the job lasts long enough to kill a server
	// in the middle of it.
	const n = 6000
	file := writeFile(t, manyPuzzles(t, n, "hardest_200.txt"))
	want := localOut(t, file)

	code, out, stderr := run(t, time.Minute, e, "submit", file)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	id = strings.TrimSpace(out)
	consumer = laneConsumer(t, q, id)
	align()
	// The waiter starts with the cluster whole, and must ride the
	// failover out. (One started while a server is down may exit 1 with
	// "read results: context deadline exceeded": nats-server 2.9 places
	// an ordered consumer on any of the stream's peers, the dead one too,
	// and producer.Follow does not try again.)
	waiter := start(t, "job wait", e.with("SUDOKU_LOG_LEVEL=info"), "job", "wait", id)

	// Batches done: results messages of the job, one per batch.
	done := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := q.Results.Info(ctx, jetstream.WithSubjectFilter(q.Opts.ResultsFilter(id)))
		if err != nil {
			return -1
		}
		return len(info.State.Subjects)
	}
	batches := n / batchSize
	waitUntil(t, 30*time.Second, "the waiter reading the results", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := q.Results.Info(ctx)
		return err == nil && info.State.Consumers == 1
	})
	metricsAddrs := []string{freeAddr(t), freeAddr(t)}
	var workers []*proc
	for i, addr := range metricsAddrs {
		workers = append(workers, start(t, fmt.Sprintf("worker %d", i+1), e.with("SUDOKU_METRICS_ADDR="+addr), "worker"))
	}
	waitUntil(t, 30*time.Second, "the workers a tenth into the job", func() bool { return done() >= batches/10 })

	l = leadersOf(t, q, id)
	victimName := map[string]string{"results_stream_leader": l.results, "consumer_leader": l.consumer,
		"jobs_bucket_leader": l.jobs}[victimRole]
	var victim *natsNode
	var survivors []*natsNode
	for _, nd := range nodes {
		if nd.name == victimName {
			victim = nd
		} else {
			survivors = append(survivors, nd)
		}
	}
	if victim == nil || !alone(l) {
		t.Fatalf("no %s to kill alone: %v", victimRole, l)
	}
	at := done()
	victim.kill()
	t.Logf("killed %s, the %s, with %d of %d batches done (leaders: %v)", victim.name, victimRole, at, batches, l)
	if at >= batches {
		t.Fatal("the job finished before the server was killed; make it longer")
	}
	// The cluster elects new leaders; the workers go on.
	waitMetaLeader(t, survivors, 30*time.Second)
	waitUntil(t, time.Minute, "results again after the failover", func() bool { return done() > at })

	// Wait for the job, failing early, with the consumer's state, if it
	// stops making progress.
	consumerState := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := q.JS.Consumer(ctx, q.Opts.Stream, consumer)
		if err != nil {
			return "consumer " + consumer + " info: " + err.Error()
		}
		ci := c.CachedInfo()
		return fmt.Sprintf("consumer leader %s: %d pending, %d ack pending, %d redelivered, %d pull requests waiting",
			ci.Cluster.Leader, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting)
	}
	last, lastChange := done(), time.Now()
	deadline := time.Now().Add(3 * time.Minute)
	for !waiter.exited() {
		if d := done(); d != last {
			last, lastChange = d, time.Now()
		}
		// Once every result is in, the waiter has a minute to write them,
		// with the server still down. (Its ordered consumer may have lived
		// on the dead server, and nats-server 2.9 places a third of new
		// consumers there with one server of three down: producer.Follow
		// then opens another and reads batches by subject meanwhile.)
		if last == batches && time.Since(lastChange) > time.Minute {
			_ = waiter.cmd.Process.Signal(syscall.SIGQUIT) // where its goroutines are, in its stderr
			waiter.wait(10 * time.Second)
			t.Fatalf("every batch has its results since %v and job wait has not finished, with %s down; its stderr:\n%s",
				time.Since(lastChange).Round(time.Second), victim.name, waiter.stderr.String())
		}
		if last != batches && time.Since(lastChange) > 30*time.Second || time.Now().After(deadline) {
			t.Fatalf("the job is stuck at %d of %d batches since %v after losing %s; %s\n"+
				"(no pull request waiting means the workers never noticed that their pull requests died "+
				"with the consumer's leader)", last, batches, time.Since(lastChange).Round(time.Second), victim.name, consumerState())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lag := time.Since(lastChange); last == batches && lag > 10*time.Second {
		t.Logf("job wait finished %v after the last result came in", lag.Round(time.Second))
	}
	if waiter.code != 0 {
		t.Fatalf("job wait: exit %d: %s", waiter.code, waiter.stderr.String())
	}
	if out := waiter.stdout.String(); out != want {
		t.Fatalf("results after losing a server differ from solve --local (%d vs %d bytes)", len(out), len(want))
	}
	jobStatus(t, e, id, n)
	// One results message per batch, no more.
	if d := done(); d != batches {
		t.Errorf("%d results messages for %d batches", d, batches)
	}

	// The workers rode it out. Their metrics account for every delivery
	// they handled: each of the job's batches acked at least once, none
	// dead-lettered, none from the cache (the puzzles are new), some
	// delivered again (redelivered: a batch in work when the server died
	// lost its publish or its ack); and the puzzles they counted as solved
	// are n exactly, give or take a batch per handling beyond one per
	// batch (a batch solved twice counts twice; one whose results were
	// stored before its ack was lost is acked again without being solved,
	// and counted by the delivery that solved it only if that delivery
	// was acked). A new consumer leader may deliver a batch again as a
	// first delivery (it lost the first one's record): a handling beyond
	// one per batch is not always counted as a redelivery.
	//
	// A batch whose count was lost with the jobs bucket's leader is nak'ed
	// and delivered again; the job may be finished before that (its record
	// recounted from the results stored), so wait for every ack first.
	ackedNow := func() float64 {
		var a float64
		for i := range workers {
			if _, page, err := httpGet("http://" + metricsAddrs[i] + "/metrics"); err == nil {
				if v, err := metricValue(page, `sudoku_batches_total{outcome="acked"}`); err == nil {
					a += v
				}
			}
		}
		return a
	}
	for deadline := time.Now().Add(time.Minute); ackedNow() < float64(batches) && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	var solved, redelivered, acked, handled, deadLetters, hits float64
	for i, w := range workers {
		if w.exited() {
			t.Fatalf("worker %d exited (%d) when the server was killed", i+1, w.code)
		}
		_, page, err := httpGet("http://" + metricsAddrs[i] + "/metrics")
		if err != nil {
			t.Fatalf("worker %d metrics: %v", i+1, err)
		}
		m := func(series string) float64 {
			v, err := metricValue(page, series)
			if err != nil {
				t.Fatalf("worker %d: %v", i+1, err)
			}
			return v
		}
		wSolved, wRedelivered, wAcked := m(`sudoku_puzzles_total{status="unique"}`), m("sudoku_redeliveries_total"),
			m(`sudoku_batches_total{outcome="acked"}`)
		wHandled := wAcked + m(`sudoku_batches_total{outcome="nak"}`) + m(`sudoku_batches_total{outcome="abandoned"}`) +
			m(`sudoku_batches_total{outcome="dead_letter"}`)
		t.Logf("worker %d: %v batches handled (%v acked), %v redelivered, %v puzzles solved", i+1, wHandled, wAcked, wRedelivered, wSolved)
		solved += wSolved
		redelivered += wRedelivered
		acked += wAcked
		handled += wHandled
		deadLetters += m(`sudoku_batches_total{outcome="dead_letter"}`)
		hits += m("sudoku_cache_hits_total")
		if code, body, err := httpGet("http://" + metricsAddrs[i] + "/readyz"); err != nil || code != 200 {
			t.Errorf("worker %d /readyz after the failover: %d %q %v", i+1, code, body, err)
		}
	}
	t.Logf("all workers: %v batches handled for %d, %v acked, %v redelivered, %v puzzles solved for %d",
		handled, batches, acked, redelivered, solved, n)
	extra := handled - float64(batches)
	// A batch in work when the node went need not be delivered again: a
	// worker tries its writes again in place while JetStream elects a
	// leader (worker.retryUnavailable).
	switch {
	case acked < float64(batches):
		t.Errorf("%v batches acked and %v handled for %d batches", acked, handled, batches)
	case math.Abs(solved-n) > batchSize*extra:
		t.Errorf("%v puzzles solved for %d, more than a batch of %d per extra handling (%v) away", solved, n, batchSize, extra)
	case deadLetters != 0:
		t.Errorf("%v dead letters; want none", deadLetters)
	case hits > batchSize*extra:
		// The puzzles are new: only a batch handled again finds some of
		// them cached, by its handling before.
		t.Errorf("%v cache hits, more than a batch of %d per extra handling (%v)", hits, batchSize, extra)
	}
	if extra > redelivered {
		t.Logf("%v batches handled again as first deliveries after the failover", extra-redelivered)
	}
	for i, w := range workers {
		if code := w.stop(30 * time.Second); code != 0 {
			t.Errorf("worker %d: exit %d after SIGTERM", i+1, code)
		}
	}
}
