package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
		Short: "Look at jobs: status, wait for one, list them, remove one",
		Long: `A job's record and results live in JetStream (the jobs bucket and the
results stream) until job.result_ttl passes or 'sudoku job rm' removes
them; these commands need NATS only.`,
	}
	config.AddKeyFlags(cmd.PersistentFlags(), keyNATSURL)
	cmd.AddCommand(&cobra.Command{
		Use:   "status ID",
		Short: "Print a job's progress and counts by status",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, conn, err := openConn(cmd, app.OpenOptions{NoCache: true, NoConsumer: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			s, err := producer.JobStatus(cmd.Context(), conn.Queue, args[0])
			if err != nil {
				return jobError(args[0], err)
			}
			printJob(cmd.OutOrStdout(), &s, time.Now())
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
		Args: cobra.ExactArgs(1),
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
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List the newest jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, log, conn, err := openConn(cmd, app.OpenOptions{NoCache: true, NoConsumer: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			recs, err := producer.Jobs(cmd.Context(), conn.Queue, limit, log)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tCREATED\tSTATE\tLINES\tQUEUED\tCACHED\tREPEATED\tINVALID\tFAILED")
			for _, r := range recs {
				failed := "-"
				if r.State == job.Finished {
					failed = fmt.Sprint(r.Failures())
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.ID, r.Created.UTC().Format("2006-01-02 15:04:05"),
					r.State, r.Lines, r.Queued, r.Cached, r.Repeated, r.Invalid, failed)
			}
			return w.Flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 20, "list at most `N` jobs")
	cmd.AddCommand(list)
	cmd.AddCommand(&cobra.Command{
		Use:   "rm ID...",
		Short: "Remove jobs: their pending work, results and records",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, conn, err := openConn(cmd, app.OpenOptions{NoCache: true, NoConsumer: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			var errs []error
			for _, id := range args {
				if err := producer.Remove(cmd.Context(), conn.Queue, id); err != nil {
					errs = append(errs, jobError(id, err))
					continue
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "job %s removed\n", id)
			}
			return errors.Join(errs...)
		},
	})
	return cmd
}

// printJob prints a job's status for people. The lines say where each
// line's answer comes from (the workers, the cache, an earlier line, or
// none for an invalid one), so that a job answered without the workers
// shows its lines all the same.
func printJob(w io.Writer, s *producer.Status, now time.Time) {
	r := &s.Record
	fmt.Fprintf(w, "job       %s\n", r.ID)
	fmt.Fprintf(w, "state     %s\n", r.State)
	if r.Error != "" {
		fmt.Fprintf(w, "error     %s\n", r.Error)
	}
	fmt.Fprintf(w, "created   %s\n", r.Created.UTC().Format(time.RFC3339))
	if !r.Finished.IsZero() {
		fmt.Fprintf(w, "finished  %s\n", r.Finished.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "lines     %d: %d to the workers, %d cached, %d repeated, %d invalid\n",
		r.Lines, r.Queued, r.Cached, r.Repeated, r.Invalid)
	pct := 100.0
	if r.Lines > 0 {
		pct = 100 * float64(s.LinesDone) / float64(r.Lines)
	}
	total := fmt.Sprint(r.Batches)
	if r.State == job.Publishing {
		total += " so far"
	}
	fmt.Fprintf(w, "done      %d of %d lines (%.1f%%), %d of %s batches\n", s.LinesDone, r.Lines, pct, s.BatchesDone, total)
	// A rate only while results are coming: the record does not say
	// when the last one came (a job is marked finished by whoever reads
	// it to the end, maybe much later).
	live := r.State == job.Publishing || r.State == job.Published
	if el := now.Sub(r.Created).Seconds(); live && el > 0 && s.LinesDone > 0 && s.LinesDone < r.Lines {
		fmt.Fprintf(w, "rate      %.0f lines/s since created\n", float64(s.LinesDone)/el)
	}
	var parts []string
	for _, st := range result.Statuses {
		if n := s.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	// Repeats that the results' headers cannot resolve (a job not read
	// to its end yet): their status is that of the line they repeat.
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
	fmt.Fprintf(w, "failed    %d\n", s.Failures())
}
