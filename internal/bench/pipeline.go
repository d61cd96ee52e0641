// Package bench measures sudoku-queue against a deployment: Pipeline
// compares the queue (NATS, a worker process, Redis) with solving in
// this process, batch size by batch size, and where the CPU goes; Jobs
// measures what a job costs, with many small jobs submitted at once. The
// sudoku bench commands map their flags to these functions' options.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/local"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// PipelineOptions say what Pipeline measures and where.
type PipelineOptions struct {
	// Config is the deployment's configuration: NATS and Redis; each
	// run's streams, subjects and key prefix are its own.
	Config *config.Config
	// Sizes are the queue.batch_size values to try.
	Sizes []int
	// Runs is the runs of each measurement (the median is reported).
	Runs int
	// Get is the lookups of each kind for the get latency (0: skip).
	Get int
	// Exe is the sudoku binary run as the worker (default: this
	// process's executable).
	Exe string
	// Out receives the table; Stderr the worker's output.
	Out, Stderr io.Writer
}

// cpu is CPU time of the processes a pipeline run involves.
type cpu struct {
	producer, worker, nats, redis time.Duration
}

// benchRun is one measurement of one batch size.
type benchRun struct {
	local, wait, cached float64 // puzzles/s
	localCPU            time.Duration
	cpu                 cpu
	n                   int
}

// Pipeline solves data (a puzzle file) in this process and through the
// queue, with one worker process started for the purpose, alternating,
// o.Runs times for each batch size, and writes puzzles/s of each, their
// ratio and where the CPU went (medians) to o.Out; then, unless o.Get is
// 0, the latency of a cached lookup and of a solve of a puzzle not in
// the cache.
func Pipeline(ctx context.Context, data []byte, o PipelineOptions) error {
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.Exe = exe
	}
	out := o.Out
	natsPID, redisPID := ServerPIDs(o.Config)
	fmt.Fprintf(out, "%-6s %-7s %11s %11s %6s | CPU us/puzzle: %6s %8s %6s %6s %6s | %8s\n",
		"batch", "phase", "pipeline/s", "local/s", "ratio", "local", "producer", "worker", "nats", "redis", "plumbing")
	for _, size := range o.Sizes {
		var rs []benchRun
		for r := 0; r < o.Runs; r++ {
			job := relabel(data, r)
			br, err := benchOnce(ctx, &o, job, size, natsPID, redisPID)
			if err != nil {
				return err
			}
			rs = append(rs, br)
		}
		med := func(f func(*benchRun) float64) float64 {
			xs := make([]float64, len(rs))
			for i := range rs {
				xs[i] = f(&rs[i])
			}
			return median(xs)
		}
		us := func(f func(*benchRun) time.Duration) float64 {
			return med(func(r *benchRun) float64 { return float64(f(r).Microseconds()) / float64(r.n) })
		}
		l := med(func(r *benchRun) float64 { return r.local })
		lc := us(func(r *benchRun) time.Duration { return r.localCPU })
		p, w := us(func(r *benchRun) time.Duration { return r.cpu.producer }), us(func(r *benchRun) time.Duration { return r.cpu.worker })
		na, re := us(func(r *benchRun) time.Duration { return r.cpu.nats }), us(func(r *benchRun) time.Duration { return r.cpu.redis })
		plumbing := med(func(r *benchRun) float64 {
			c := r.cpu.producer + r.cpu.worker + r.cpu.nats + r.cpu.redis - r.localCPU
			return float64(c.Microseconds()) / float64(r.n)
		})
		wt := med(func(r *benchRun) float64 { return r.wait })
		ct := med(func(r *benchRun) float64 { return r.cached })
		fmt.Fprintf(out, "%-6d %-7s %11.0f %11.0f %6.2f | %20.1f %8.1f %6.1f %6s %6s | %8.1f\n", size, "wait", wt, l, wt/l,
			lc, p, w, orNA(na, natsPID), orNA(re, redisPID), plumbing)
		fmt.Fprintf(out, "%-6d %-7s %11.0f %11.0f %6.2f |\n", size, "cached", ct, l, ct/l)
	}
	if natsPID == 0 || redisPID == 0 {
		fmt.Fprintln(out, "(n/a: the server does not run on this host, or its process is not visible)")
	}
	if o.Get > 0 {
		return benchGet(ctx, &o, data)
	}
	return nil
}

func orNA(v float64, pid int) string {
	if pid == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// relabel returns data with its digits relabelled by a permutation that
// depends on r: the same puzzles, none of them cached.
func relabel(data []byte, r int) []byte {
	perm := []byte("123456789")
	for i := range perm {
		j := (i*7 + r*5 + 3) % 9
		perm[i], perm[j] = perm[j], perm[i]
	}
	out := make([]byte, len(data))
	for i, c := range data {
		if c >= '1' && c <= '9' {
			c = perm[c-'1']
		}
		out[i] = c
	}
	return out
}

// benchOnce measures one batch size: data solved in-process, then through
// the queue with a fresh stream, key prefix and worker process.
func benchOnce(ctx context.Context, o *PipelineOptions, data []byte, size, natsPID, redisPID int) (benchRun, error) {
	var br benchRun
	c0, start := selfCPU(), time.Now()
	err := local.Run(ctx, input.NewReader(bytes.NewReader(data)), func(result.Result) error { br.n++; return nil }, local.Options{})
	if err != nil {
		return br, err
	}
	br.local, br.localCPU = float64(br.n)/time.Since(start).Seconds(), selfCPU()-c0

	cfg, conn, wpid, stop, err := benchConn(ctx, o, size)
	if err != nil {
		return br, err
	}
	defer stop()
	p := producer.New(conn.Queue, conn.Cache, app.ProducerOptions(cfg, discardLogger()))
	run := func() (float64, error) {
		start := time.Now()
		sub, err := p.Submit(ctx, input.NewReader(bytes.NewReader(data)))
		if err != nil {
			return 0, err
		}
		n := 0
		if _, err := producer.Follow(ctx, conn.Queue, sub.ID, func(result.Result) error { n++; return nil },
			producer.FollowOptions{Logger: discardLogger(), Trust: conn.Trust}); err != nil {
			return 0, err
		}
		return float64(n) / time.Since(start).Seconds(), nil
	}
	before := snapshot(wpid, natsPID, redisPID)
	if br.wait, err = run(); err != nil {
		return br, err
	}
	br.cpu = snapshot(wpid, natsPID, redisPID).minus(before)
	br.cached, err = run()
	return br, err
}

// snapshot reads the CPU time of this process and the others so far.
func snapshot(worker, nats, redis int) cpu {
	return cpu{producer: selfCPU(), worker: procCPU(worker), nats: procCPU(nats), redis: procCPU(redis)}
}

func (c cpu) minus(d cpu) cpu {
	return cpu{c.producer - d.producer, c.worker - d.worker, c.nats - d.nats, c.redis - d.redis}
}

// selfCPU returns the CPU time (user + system) of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the CPU time (user + system) of process pid, from
// /proc; 0 when it cannot be read.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): utime and
	// stime are the 14th and 15th fields of the line.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(u+st) * time.Second / hz
}

// ServerPIDs finds the processes listening on the NATS and Redis
// addresses of cfg, when they run on this host (0 otherwise).
func ServerPIDs(cfg *config.Config) (natsPID, redisPID int) {
	port := func(addr string) int {
		addr = strings.TrimPrefix(strings.TrimPrefix(addr, "nats://"), "tls://")
		if i := strings.LastIndexByte(addr, ':'); i >= 0 {
			p, _ := strconv.Atoi(addr[i+1:])
			return p
		}
		return 0
	}
	nurl := strings.Split(cfg.NATS.URL, ",")[0]
	if len(cfg.Redis.Addrs) > 0 {
		redisPID = listenerPID(port(cfg.Redis.Addrs[0]))
	}
	return listenerPID(port(nurl)), redisPID
}

// listenerPID returns the process listening on TCP port on this host, from
// /proc/net/tcp{,6} and the processes' sockets; 0 when none is found.
func listenerPID(port int) int {
	if port == 0 {
		return 0
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// local_address is "IP:PORT" in hex; state 0A is LISTEN.
			if len(fs) > 9 && fs[3] == "0A" && strings.HasSuffix(fs[1], fmt.Sprintf(":%04X", port)) {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		fh.Close()
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, fd := range procs {
		links, _ := os.ReadDir(fd)
		for _, l := range links {
			if target, err := os.Readlink(filepath.Join(fd, l.Name())); err == nil && inodes[target] {
				pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
				return pid
			}
		}
	}
	return 0
}

// benchGet measures get: n cached lookups and n solves of puzzles from
// data (relabelled, so none is cached) on the workers' solve endpoint.
func benchGet(ctx context.Context, o *PipelineOptions, data []byte) error {
	n := o.Get
	_, conn, _, stop, err := benchConn(ctx, o, 256)
	if err != nil {
		return err
	}
	defer stop()
	var ps []solver.Grid
	in := input.NewReader(bytes.NewReader(relabel(data, 7)))
	for len(ps) < n {
		it, err := in.Next()
		if err != nil {
			break
		}
		if g, err := solver.Parse(it.Text); err == nil {
			ps = append(ps, g)
		}
	}
	var solveLat, getLat []float64
	for i := range ps {
		// What get --solve does: a lookup, then the request.
		t0 := time.Now()
		rs, ok := conn.Cache.Lookup(ctx, []job.Key{job.KeyOf(&ps[i])})
		if ok && rs[0] != nil {
			return fmt.Errorf("bench: %s is cached already, though relabelled", ps[i].String())
		}
		_, err := producer.Solve(ctx, conn.NC, conn.Queue.Opts, ps[i].String(), producer.SolveOptions{NoLookup: ok, Trust: conn.Trust})
		if err != nil {
			return err
		}
		solveLat = append(solveLat, float64(time.Since(t0).Microseconds())/1000)
	}
	for i := range ps {
		t0 := time.Now()
		rs, ok := conn.Cache.Lookup(ctx, []job.Key{job.KeyOf(&ps[i])})
		if !ok || rs[0] == nil {
			return fmt.Errorf("bench: cached lookup of %s: not found (is Redis up?)", ps[i].String())
		}
		getLat = append(getLat, float64(time.Since(t0).Microseconds())/1000)
	}
	fmt.Fprintf(o.Out, "get latency over %d puzzles: cached p50 %.2f ms, p99 %.2f ms; --solve (uncached) p50 %.2f ms, p99 %.2f ms\n",
		len(ps), quantile(getLat, 0.5), quantile(getLat, 0.99), quantile(solveLat, 0.5), quantile(solveLat, 0.99))
	return nil
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// benchConn connects with streams and a key prefix of their own and starts
// a worker process on them; stop stops the worker and removes everything.
func benchConn(ctx context.Context, o *PipelineOptions, size int) (*config.Config, *app.Conn, int, func(), error) {
	c := *o.Config
	cfg := &c
	name := "BENCH_" + strings.ToUpper(job.NewID("x")[2:12])
	cfg.Queue.Stream, cfg.Queue.DLQStream = name, name+"_DLQ"
	cfg.Queue.SubjectPrefix, cfg.Queue.Consumer = strings.ToLower(name), strings.ToLower(name)
	cfg.Queue.BatchSize = size
	cfg.Redis.KeyPrefix = strings.ToLower(name) + ":"
	conn, err := app.Open(ctx, cfg, app.OpenOptions{}, discardLogger())
	if err != nil {
		return nil, nil, 0, nil, err
	}
	wk := exec.Command(o.Exe, "worker", "--log-level", "warn")
	wk.Env = append(os.Environ(), configEnv(cfg)...)
	wk.Stderr = o.Stderr
	if err := wk.Start(); err != nil {
		conn.Close()
		return nil, nil, 0, nil, err
	}
	stop := func() {
		_ = wk.Process.Signal(os.Interrupt)
		_ = wk.Wait()
		_ = conn.Queue.Delete(context.Background())
		deleteKeys(cfg)
		conn.Close()
	}
	// Wait until it answers on its solve endpoint: pulling and serving.
	deadline := time.Now().Add(20 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := producer.Solve(pctx, conn.NC, conn.Queue.Opts, strings.Repeat(".", 81), producer.SolveOptions{First: true, Trust: conn.Trust})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, 0, nil, fmt.Errorf("bench: the worker process did not start: %w", err)
		}
	}
	return cfg, conn, wk.Process.Pid, stop, nil
}

// configEnv renders the queue and Redis settings a worker process needs.
func configEnv(c *config.Config) []string {
	return []string{
		"SUDOKU_NATS_URL=" + c.NATS.URL,
		"SUDOKU_REDIS_ADDRS=" + strings.Join(c.Redis.Addrs, ","),
		"SUDOKU_REDIS_KEY_PREFIX=" + c.Redis.KeyPrefix,
		"SUDOKU_QUEUE_STREAM=" + c.Queue.Stream,
		"SUDOKU_QUEUE_DLQ_STREAM=" + c.Queue.DLQStream,
		"SUDOKU_QUEUE_SUBJECT_PREFIX=" + c.Queue.SubjectPrefix,
		"SUDOKU_QUEUE_CONSUMER=" + c.Queue.Consumer,
	}
}

// deleteKeys removes the benchmark's keys.
func deleteKeys(c *config.Config) {
	rdb, err := app.RedisClient(c.Redis)
	if err != nil {
		return
	}
	defer rdb.Close()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, c.Redis.KeyPrefix+"*", 10000).Iterator()
	var keys []string
	flush := func() {
		if len(keys) > 0 {
			rdb.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 10000 {
			flush()
		}
	}
	flush()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// discardLogger logs nothing.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
