package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/local"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

func init() { addCommand(newBenchCmd) }

func newBenchCmd() *cobra.Command {
	var (
		sizes string
		runs  int
		getN  int
	)
	cmd := &cobra.Command{
		Use:   "bench FILE",
		Short: "Measure the pipeline (NATS + a worker process + Redis) against solving in-process",
		Long: `Solve FILE in this process (as solve --local) and through the queue, with
one worker process started for the purpose, alternating, several times,
and print puzzles/s of each and their ratio (medians). The queue runs use
the configured NATS and Redis with their own stream, subjects and key
prefix (removed afterwards), so nothing is cached at the start of a run.

For each batch size it reports:
  solve      the job, from the first publish to the last result stored;
  wait       the same plus reading every result back in input order
             (what submit --wait does);
  cached     submitting the same file again: every puzzle a cache hit.

Then the latency of get: a cached lookup, and get --solve of puzzles not
in the cache (the interactive path through the worker), p50 and p99.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var bs []int
			for _, s := range strings.Split(sizes, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || n <= 0 {
					return usageErrorf("--batch-sizes: %q is not a positive number", s)
				}
				bs = append(bs, n)
			}
			return runBench(cmd, args[0], bs, runs, getN)
		},
	}
	cmd.Flags().StringVar(&sizes, "batch-sizes", "64,256,1024", "comma-separated puzzles per message to try")
	cmd.Flags().IntVar(&runs, "runs", 3, "runs of each measurement (the median is reported)")
	cmd.Flags().IntVar(&getN, "get", 200, "lookups of each kind for the get latency (0: skip)")
	return cmd
}

func runBench(cmd *cobra.Command, file string, sizes []int, runs, getN int) error {
	ctx := cmd.Context()
	data, err := os.ReadFile(file)
	if err != nil {
		return usageErrorf("bench: %w", err)
	}
	out := cmd.OutOrStdout()
	localRate := func() (float64, error) {
		n := 0
		start := time.Now()
		err := local.Run(ctx, input.NewReader(bytes.NewReader(data)), func(result.Result) error { n++; return nil }, local.Options{})
		return float64(n) / time.Since(start).Seconds(), err
	}
	fmt.Fprintf(out, "%-6s %-7s %12s %12s %7s\n", "batch", "phase", "pipeline/s", "local/s", "ratio")
	for _, size := range sizes {
		var solveR, waitR, cachedR, localR []float64
		for r := 0; r < runs; r++ {
			l, err := localRate()
			if err != nil {
				return err
			}
			localR = append(localR, l)
			s, w, c, err := benchPipeline(cmd, data, size)
			if err != nil {
				return err
			}
			solveR, waitR, cachedR = append(solveR, s), append(waitR, w), append(cachedR, c)
		}
		l := median(localR)
		for _, ph := range []struct {
			name  string
			rates []float64
		}{{"solve", solveR}, {"wait", waitR}, {"cached", cachedR}} {
			p := median(ph.rates)
			fmt.Fprintf(out, "%-6d %-7s %12.0f %12.0f %7.2f\n", size, ph.name, p, l, p/l)
		}
	}
	if getN > 0 {
		return benchGet(cmd, data, getN)
	}
	return nil
}

// benchGet measures get: n cached lookups and n interactive solves of
// puzzles from data (relabelled, so none is cached).
func benchGet(cmd *cobra.Command, data []byte, n int) error {
	ctx := cmd.Context()
	cfg, conn, stop, err := benchConn(cmd, 256)
	if err != nil {
		return err
	}
	defer stop()
	var ps []string
	in := input.NewReader(bytes.NewReader(data))
	for len(ps) < n {
		it, err := in.Next()
		if err != nil {
			break
		}
		if g, err := solver.Parse(it.Text); err == nil {
			// Swap two digits: a puzzle the cache has not seen.
			for i, v := range g {
				switch v {
				case 1:
					g[i] = 2
				case 2:
					g[i] = 1
				}
			}
			ps = append(ps, g.String())
		}
	}
	_ = cfg
	var solveLat, getLat []float64
	for _, p := range ps {
		t0 := time.Now()
		if _, err := SolveInteractive(ctx, conn, p); err != nil {
			return err
		}
		solveLat = append(solveLat, float64(time.Since(t0).Microseconds())/1000)
	}
	for _, p := range ps {
		g, _ := solver.Parse(p)
		t0 := time.Now()
		rs, ok := conn.Cache.Lookup(ctx, []job.Key{job.KeyOf(&g)})
		if !ok || rs[0] == nil {
			return fmt.Errorf("bench: cached lookup of %s: not found (is Redis up?)", p)
		}
		getLat = append(getLat, float64(time.Since(t0).Microseconds())/1000)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "get latency over %d puzzles: cached p50 %.2f ms, p99 %.2f ms; --solve (uncached) p50 %.2f ms, p99 %.2f ms\n",
		len(ps), quantile(getLat, 0.5), quantile(getLat, 0.99), quantile(solveLat, 0.5), quantile(solveLat, 0.99))
	return nil
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// benchPipeline runs one job of data through a fresh stream and key prefix
// with one worker process, and returns the rates of the phases.
func benchPipeline(cmd *cobra.Command, data []byte, size int) (solveRate, waitRate, cachedRate float64, err error) {
	ctx := cmd.Context()
	cfg, conn, stop, err := benchConn(cmd, size)
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()

	p := producer.New(conn.Queue, conn.Cache, producerOptions(cfg, discardLogger(), false, false))
	run := func() (float64, float64, error) {
		start := time.Now()
		sub, err := p.Submit(ctx, input.NewReader(bytes.NewReader(data)))
		if err != nil {
			return 0, 0, err
		}
		published := time.Since(start)
		n := 0
		if _, err := producer.Follow(ctx, conn.Queue, sub.ID, func(result.Result) error { n++; return nil },
			producer.FollowOptions{Logger: discardLogger()}); err != nil {
			return 0, 0, err
		}
		return float64(n) / published.Seconds(), float64(n) / time.Since(start).Seconds(), nil
	}
	if solveRate, waitRate, err = run(); err != nil {
		return 0, 0, 0, err
	}
	_, cachedRate, err = run()
	return solveRate, waitRate, cachedRate, err
}

// benchConn connects with a stream and key prefix of its own and starts a
// worker process on them; stop stops the worker and removes everything.
func benchConn(cmd *cobra.Command, size int) (*config.Config, *app.Conn, func(), error) {
	cfg, _, err := loadConfig(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	name := "BENCH_" + strings.ToUpper(job.NewID()[:10])
	cfg.Queue.Stream, cfg.Queue.DLQStream = name, name+"_DLQ"
	cfg.Queue.SubjectPrefix, cfg.Queue.Consumer = strings.ToLower(name), strings.ToLower(name)
	cfg.Queue.BatchSize = size
	cfg.Redis.KeyPrefix = strings.ToLower(name) + ":"
	conn, err := app.Open(cmd.Context(), cfg, app.OpenOptions{}, discardLogger())
	if err != nil {
		return nil, nil, nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	wk := exec.Command(exe, "worker", "--log-level", "warn")
	wk.Env = append(os.Environ(), configEnv(cfg)...)
	wk.Stderr = cmd.ErrOrStderr()
	if err := wk.Start(); err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	time.Sleep(300 * time.Millisecond) // let it subscribe
	stop := func() {
		_ = wk.Process.Signal(os.Interrupt)
		_ = wk.Wait()
		_ = conn.Queue.Delete(context.Background())
		deleteKeys(cfg)
		conn.Close()
	}
	return cfg, conn, stop, nil
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
