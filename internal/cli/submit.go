package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

func init() { addCommand(newSubmitCmd) }

func newSubmitCmd() *cobra.Command {
	var (
		of    outputFlags
		wait  bool
		force bool
		first bool
		prio  string
	)
	cmd := &cobra.Command{
		Use:   "submit [FILE|-]",
		Short: "Submit a file of puzzles as a job to the workers",
		Long: `Submit every puzzle of FILE (or standard input) as one job: each puzzle is
validated (bad ones are reported with their line numbers and get invalid
results), puzzles already in the cache and repeated ones are answered
without a worker, the rest go to NATS JetStream in batches. The job's
record and results live in JetStream; prints the job id.

With --wait, stays until the job is done, writing the results in input
order as they come, like 'sudoku solve --local', then a summary on standard
error. While NATS does not answer, it says so (on the progress bar, or
logged once per outage) and goes on waiting. Interrupted while waiting
(exit status 130), or when job.wait_timeout (--job-wait-timeout) has passed
(exit status 124), the job keeps running: 'sudoku job wait ID' collects
it later.`,
		Example: `  sudoku submit puzzles.txt
  sudoku submit --wait --out solutions.txt puzzles.txt
  sudoku submit --priority high urgent.txt`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// One trace for the command: the submit and the follow of
			// --wait are children of this span.
			ctx, span := telemetry.Tracer().Start(cmd.Context(), "sudoku submit")
			defer span.End()
			in, name, _, err := openInput(cmd, args, false)
			if err != nil {
				return err
			}
			defer in.Close()
			rd := input.NewReader(in)
			if err := rd.RequirePuzzle(); err != nil { // before connecting
				return fmt.Errorf("%s: %w", name, err)
			}
			var out *output
			if wait {
				if sameFile(of.out, name) {
					return usageErrorf("--out %s is the input file", of.out)
				}
				// Before submitting anything: a bad --out must not leave
				// a job behind.
				if out, err = of.open(cmd); err != nil {
					return err
				}
				defer out.Close()
			}
			priority, err := job.ParsePriority(prio)
			if err != nil {
				return usageErrorf("--priority: %w", err)
			}
			cfg, log, conn, err := openConn(cmd, app.OpenOptions{NoConsumer: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			popts := app.ProducerOptions(cfg, log)
			popts.Force, popts.FirstSolution, popts.Priority = force, first, priority
			p := producer.New(conn.Queue, conn.Cache, popts)
			failed := func(err error) error { return fmt.Errorf("%s: %w", name, err) }
			if !wait {
				sub, err := p.Submit(ctx, rd)
				if err != nil {
					return failed(err)
				}
				reportSubmitted(cmd, &sub)
				fmt.Fprintln(cmd.OutOrStdout(), sub.ID)
				return nil
			}
			// The results are read while the batches are published.
			st, err := p.Start(ctx, rd)
			if err != nil {
				return failed(err)
			}
			return waitAndWrite(ctx, cmd, client.New(conn, popts), log, st.ID, out, waitOptions{resumable: true, timeout: cfg.Job.WaitTimeout,
				timed: true, started: st, failed: failed, submitted: func(s *producer.Submitted) { reportSubmitted(cmd, s) }})
		},
	}
	of.add(cmd)
	config.AddKeyFlags(cmd.Flags(), keyNATSURL, keyRedisAddrs, keyBatchSize, keyWaitTimeout)
	cmd.Flags().Lookup(config.FlagName(keyWaitTimeout)).Usage = "with --wait, stop waiting after this `duration` (the job goes on; " +
		"resume with 'sudoku job wait'); 0: as long as it takes ($SUDOKU_JOB_WAIT_TIMEOUT)"
	cmd.Flags().BoolVarP(&wait, "wait", "w", false, "wait for the results and write them in input order")
	cmd.Flags().BoolVar(&force, "force", false, "solve every puzzle again, even those in the cache")
	cmd.Flags().BoolVar(&first, "first", false, "stop at the first solution of each puzzle instead of proving it unique")
	cmd.Flags().StringVar(&prio, "priority", "normal", "the job's share of the workers against other jobs': `low`, normal or high (weights 1, 2, 4)")
	return asClient(cmd)
}

// reportSubmitted prints what submit did, and the first invalid lines, on
// stderr.
func reportSubmitted(cmd *cobra.Command, s *producer.Submitted) {
	stderr := cmd.ErrOrStderr()
	for _, r := range s.InvalidLines {
		fmt.Fprintf(stderr, "line %d: %s\n", r.Line, r.Error)
	}
	if more := s.Invalid - int64(len(s.InvalidLines)); more > 0 {
		fmt.Fprintf(stderr, "... and %d more invalid lines\n", more)
	}
	fmt.Fprintf(stderr, "job %s: %s: %d queued in %s, %d cached, %d repeated, %d invalid\n",
		s.ID, result.Plural(s.Lines, "line", "lines"), s.Queued, result.Plural(s.Batches, "batch", "batches"), s.Cached, s.Repeated, s.Invalid)
}
