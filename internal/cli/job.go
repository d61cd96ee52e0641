package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

func init() { addCommand(newJobCmd) }

func newJobCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Look at jobs: status, wait for one, list them, cancel or remove one",
		Long: `A job's record and results live in JetStream (the jobs bucket and the
results stream) until job.result_ttl passes or 'sudoku job rm' removes
them; these commands need NATS only.`,
	}
	config.AddKeyFlags(cmd.PersistentFlags(), keyNATSURL)
	cmd.AddCommand(&cobra.Command{
		Use:   "status ID",
		Short: "Print a job's progress and counts by status",
		Args:  cobra.MatchAll(cobra.ExactArgs(1), jobIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := openClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			s, err := c.Status(cmd.Context(), args[0])
			if err != nil {
				return jobError(args[0], err)
			}
			printJob(cmd.OutOrStdout(), &s)
			return nil
		},
	})
	var of outputFlags
	wait := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait until a job is done, writing its results in input order",
		Long: `Write every result of job ID in input order, as they come: from the start
of the job, whoever submitted it, and as often as asked while the job is
kept. job.wait_timeout (--job-wait-timeout) bounds the wait: when it has
passed, job wait stops, says how many results it wrote, and exits with
status 124; the job keeps running. 0 waits as long as it takes.`,
		Args: cobra.MatchAll(cobra.ExactArgs(1), jobIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := of.open(cmd)
			if err != nil {
				return err
			}
			defer out.Close()
			cfg, log, conn, err := openConn(cmd, app.OpenOptions{NoCache: true, NoConsumer: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			return waitAndWrite(cmd.Context(), cmd, conn, log, args[0], out, waitOptions{resumable: true, timeout: cfg.Job.WaitTimeout})
		},
	}
	of.add(wait)
	config.AddKeyFlags(wait.Flags(), keyWaitTimeout)
	cmd.AddCommand(asClient(wait))
	var (
		limit int
		all   bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the newest jobs",
		Long: `List the newest jobs. A producer user lists its own (job.owner, or
nats.user), or with --all every owner's if roles init --shared-reads let
it; admins, readers and gateways, and every process without roles, list
every owner's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			sts, err := c.List(cmd.Context(), client.ListOptions{All: all, Limit: limit})
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tCREATED\tSTATE\tPRIORITY\tLINES\tDONE\tQUEUED\tCACHED\tREPEATED\tINVALID\tUNSOLVED")
			for _, s := range sts {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.ID, s.Created.UTC().Format("2006-01-02 15:04:05"),
					s.State, s.Priority, s.Lines, s.Done, s.Queued, s.Cached, s.Repeated, s.Invalid, s.Unsolved)
			}
			return w.Flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 20, "list at most `N` jobs")
	list.Flags().BoolVar(&all, "all", false, "a producer: list every owner's jobs, not only its own")
	cmd.AddCommand(list)
	cmd.AddCommand(&cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel jobs: their work not yet done leaves the queue; results so far stay",
		Args:  cobra.MatchAll(cobra.MinimumNArgs(1), jobIDs),
		Long: `Cancel each job ID: its record says cancelled, its batches not yet done
leave the queue at once, and the batches workers hold are finished or
dropped. The results stored before stay readable with 'sudoku job wait',
which then exits with status 3. A job that has ended is left as it is.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := openClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var errs []error
			for _, id := range args {
				st, err := c.Cancel(cmd.Context(), id)
				if err != nil {
					errs = append(errs, jobError(id, err))
					continue
				}
				if st.State != job.Cancelled {
					fmt.Fprintf(cmd.ErrOrStderr(), "job %s is %s already: left as it is\n", id, st.State)
					continue
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "job %s cancelled: %d of %d lines done\n", id, st.Done, st.Lines)
			}
			return errors.Join(errs...)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "rm ID...",
		Short: "Remove jobs (cancelling those running): their pending work, results and records",
		Long: `Remove each job ID, cancelling it first if it runs. An admin's rm purges its
work, results and record at once. An owner's (a producer's, who may not
purge the streams) waits for the workers to drop its work, then deletes
its record: the job is gone for every reader, and its results, which
nothing names any more, leave the results stream when job.result_ttl
passes.`,
		Args: cobra.MatchAll(cobra.MinimumNArgs(1), jobIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := openClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			how := "removed"
			if !c.PurgesResults() {
				how = "removed (its results expire with job.result_ttl)"
			}
			var errs []error
			for _, id := range args {
				if err := c.Remove(cmd.Context(), id); err != nil {
					errs = append(errs, jobError(id, err))
					continue
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "job %s %s\n", id, how)
			}
			return errors.Join(errs...)
		},
	})
	return cmd
}

// jobIDs refuses, before NATS is asked anything, an argument that is not
// a job id: one that could never name a job is a mistake of the command
// line, not a job that is gone.
func jobIDs(_ *cobra.Command, args []string) error {
	for _, id := range args {
		if _, err := job.IDTime(id); err != nil || !job.ValidID(id) {
			return fmt.Errorf("%q is not a job id: %s; 'sudoku job list' lists the jobs", clipArg(id), job.IDForm)
		}
	}
	return nil
}

// printJob prints a job's status for people. The lines say where each
// line's answer comes from (the workers, the cache, an earlier line, or
// none for an invalid one), so that a job answered without the workers
// shows its lines all the same.
func printJob(w io.Writer, s *producer.Status) {
	fmt.Fprintf(w, "job       %s\n", s.ID)
	fmt.Fprintf(w, "state     %s\n", s.State)
	fmt.Fprintf(w, "priority  %s\n", s.Priority)
	if s.Error != "" {
		fmt.Fprintf(w, "error     %s\n", s.Error)
	}
	fmt.Fprintf(w, "created   %s\n", s.Created.UTC().Format(time.RFC3339))
	if s.Finished != nil {
		fmt.Fprintf(w, "finished  %s\n", s.Finished.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "lines     %d: %d to the workers, %d cached, %d repeated, %d invalid\n",
		s.Lines, s.Queued, s.Cached, s.Repeated, s.Invalid)
	total := fmt.Sprint(s.Batches)
	if s.State == job.Publishing {
		total += " so far"
	}
	fmt.Fprintf(w, "done      %d of %d lines (%.1f%%), %d of %s batches\n", s.Done, s.Lines, 100*s.Progress, s.BatchesDone, total)
	// A rate only while results are coming.
	if s.State.Active() && s.Done > 0 && s.Done < s.Lines && s.Rate > 0 {
		fmt.Fprintf(w, "rate      %.0f lines/s since created\n", s.Rate)
	}
	var parts []string
	for _, st := range result.Statuses {
		if n := s.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	// Lines that repeat a line of another batch: their answer is that
	// line's (job wait prints it).
	switch n := s.Counts[job.RepeatStatus]; {
	case n == 1:
		parts = append(parts, "1 repeat of an earlier line")
	case n > 1:
		parts = append(parts, fmt.Sprintf("%d repeats of earlier lines", n))
	}
	if len(parts) == 0 {
		parts = append(parts, "none yet")
	}
	fmt.Fprintf(w, "results   %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "unsolved  %d (no unique solution: none, several, invalid or given up)\n", s.Unsolved)
}
