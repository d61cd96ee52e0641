package cli

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/bench"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
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
and print puzzles/s of each, their ratio, and where the CPU went (medians).
The queue runs use the configured NATS and Redis with their own streams,
subjects and key prefix (removed afterwards), and a fresh copy of FILE
(digits relabelled) each time, so nothing is cached at the start of a run.

For each batch size it reports:
  wait       submitting FILE and reading every result back in input order
             (what submit --wait does), with the CPU microseconds per
             puzzle of each process: the producer (this process), the
             worker, and nats-server and redis-server when they run on
             this host (found by their listening ports); plumbing is their
             sum minus what solving in-process costs;
  cached     submitting the same file again: every puzzle a cache hit.

Then the latency of get: a cached lookup, and get --solve of puzzles not
in the cache (the workers' solve endpoint), p50 and p99.`,
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
			data, err := os.ReadFile(args[0])
			if err != nil {
				return usageErrorf("bench: %w", err)
			}
			cfg, _, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			return bench.Pipeline(cmd.Context(), data, bench.PipelineOptions{Config: cfg, Sizes: bs, Runs: runs, Get: getN,
				Out: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
		},
	}
	config.AddKeyFlags(cmd.Flags(), keyNATSURL, keyRedisAddrs)
	cmd.Flags().StringVar(&sizes, "batch-sizes", "1024,4096", "comma-separated queue.batch_size values to try (the most puzzles per message)")
	cmd.Flags().IntVar(&runs, "runs", 3, "runs of each measurement (the median is reported)")
	cmd.Flags().IntVar(&getN, "get", 200, "lookups of each kind for the get latency (0: skip)")
	cmd.AddCommand(newBenchJobsCmd())
	return cmd
}

func newBenchJobsCmd() *cobra.Command {
	var (
		f      bench.JobsOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "jobs FILE",
		Short: "Measure what a job costs: many small jobs submitted at once",
		Long: `Submit --jobs jobs of --puzzles puzzles each, made fresh from the puzzles of
FILE (sudoku gen's symmetries, so none is cached), from --clients clients at
once, over --via: http (POST /v1/jobs of sudoku serve at --url), micro (the
workers' NATS submit endpoint) or cli (one 'sudoku submit' process a job).
The jobs go to --owners owners in turn ("bench-0", "bench-1", ...: the
X-Sudoku-Owner header, the submit subject, or job.owner).

It reports the time to submit them all, the time until every one has ended
(from a watch of the job records started before the first submission),
jobs a second (jobs / that time), each job's time from its submission to
its end (p50, p90), nats-server's CPU a job over the same time (read from
/proc of --nats-pid, or of the process listening on nats.url's port when
it runs on this host), and the consumers left on the work stream --settle
after the last job ended.

With --deployment it starts a private deployment for the run and stops it
after: nats-server and redis-server on free loopback ports (both must be
on PATH), 'sudoku serve' and --workers 'sudoku worker' processes of this
binary. Without it, it uses the configured NATS and a running serve.`,
		Example: `  sudoku bench jobs 17_clue.txt --deployment --jobs 1000 --puzzles 10 --clients 8
  sudoku bench jobs 17_clue.txt --deployment --via micro --owners 4 --json
  sudoku bench jobs 17_clue.txt --url http://127.0.0.1:8080 --nats-pid $(pidof nats-server)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case f.Jobs <= 0:
				return usageErrorf("--jobs %d: want 1 or more", f.Jobs)
			case f.Puzzles <= 0:
				return usageErrorf("--puzzles %d: want 1 or more", f.Puzzles)
			case f.Clients <= 0:
				return usageErrorf("--clients %d: want 1 or more", f.Clients)
			case f.Owners <= 0:
				return usageErrorf("--owners %d: want 1 or more", f.Owners)
			case f.Workers <= 0:
				return usageErrorf("--workers %d: want 1 or more", f.Workers)
			case f.Via != bench.ViaHTTP && f.Via != bench.ViaMicro && f.Via != bench.ViaCLI:
				return usageErrorf("--via %q: want %s, %s or %s", f.Via, bench.ViaHTTP, bench.ViaMicro, bench.ViaCLI)
			}
			fh, err := os.Open(args[0])
			if err != nil {
				return usageErrorf("bench jobs: %w", pathless(err))
			}
			defer fh.Close()
			if f.Config, _, err = loadConfig(cmd); err != nil {
				return err
			}
			f.Stderr = cmd.ErrOrStderr()
			res, err := bench.Jobs(cmd.Context(), fh, args[0], f)
			switch {
			case err != nil:
				return err
			case asJSON:
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			return res.WriteText(cmd.OutOrStdout(), f.Settle)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.Jobs, "jobs", 1000, "submit `N` jobs")
	fl.IntVar(&f.Puzzles, "puzzles", 10, "`K` puzzles a job")
	fl.IntVar(&f.Clients, "clients", 8, "`C` clients submitting at once")
	fl.IntVar(&f.Owners, "owners", 1, "spread the jobs over `O` owners")
	fl.StringVar(&f.Via, "via", bench.ViaHTTP, "submit over http, micro or cli")
	fl.StringVar(&f.URL, "url", "", "sudoku serve's base `URL` for --via http without --deployment (default http://serve.addr)")
	fl.IntVar(&f.NATSPID, "nats-pid", 0, "read nats-server's CPU from this `PID` (default: the listener of nats.url's port, on this host)")
	fl.BoolVar(&f.Deployment, "deployment", false, "start a private nats-server, redis-server, serve and --workers workers for the run")
	fl.IntVar(&f.Workers, "workers", 2, "with --deployment, the worker processes")
	fl.StringVar(&f.Exe, "exe", "", "run serve, the workers and --via cli's submits from this sudoku `binary` (default: this one), to compare builds")
	fl.BoolVar(&asJSON, "json", false, "print the figures as one JSON object")
	fl.DurationVar(&f.Settle, "settle", 5*time.Second, "wait this long after the last job ended before counting the consumers left")
	fl.DurationVar(&f.Timeout, "timeout", 5*time.Minute, "give up when the jobs have not all ended after this long")
	fl.Uint64Var(&f.Seed, "seed", 0, "seed of the puzzles made from FILE (0: from the clock, so none is cached)")
	config.AddKeyFlags(fl, keyNATSURL, keyRedisAddrs)
	return cmd
}
