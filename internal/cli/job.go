package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

func init() { addCommand(newJobCmd) }

func newJobCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Look at jobs: status, wait for one, list them",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status ID",
		Short: "Print a job's progress and counts by status",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, conn, err := openConn(cmd, app.OpenOptions{})
			if err != nil {
				return err
			}
			defer conn.Close()
			j, err := conn.Store.Job(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			printJob(cmd.OutOrStdout(), &j)
			return nil
		},
	})
	var of outputFlags
	wait := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait until a job is done, then write its results in input order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, conn, err := openConn(cmd, app.OpenOptions{})
			if err != nil {
				return err
			}
			defer conn.Close()
			return waitAndWrite(cmd.Context(), cmd, conn, args[0], &of, true)
		},
	}
	of.add(wait)
	cmd.AddCommand(wait)
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List the newest jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, _, conn, err := openConn(cmd, app.OpenOptions{})
			if err != nil {
				return err
			}
			defer conn.Close()
			jobs, err := conn.Store.Jobs(cmd.Context(), limit)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-26s  %-20s  %10s  %10s  %8s  %s\n", "ID", "CREATED", "LINES", "DONE", "FAILED", "STATE")
			for _, j := range jobs {
				fmt.Fprintf(w, "%-26s  %-20s  %10d  %10s  %8d  %s\n", j.ID, j.Created.UTC().Format("2006-01-02 15:04:05"),
					j.Total, fmt.Sprintf("%d/%d", j.Done, j.Queued), j.Failed(), jobState(&j))
			}
			return nil
		},
	}
	list.Flags().IntVar(&limit, "limit", 20, "list at most `N` jobs")
	cmd.AddCommand(list)
	return cmd
}

func jobState(j *cache.Job) string {
	switch {
	case j.IsFinished():
		return "finished"
	case j.Sealed:
		return "running"
	}
	return "publishing"
}

// printJob prints a job record for people.
func printJob(w io.Writer, j *cache.Job) {
	fmt.Fprintf(w, "job       %s\n", j.ID)
	fmt.Fprintf(w, "state     %s\n", jobState(j))
	fmt.Fprintf(w, "created   %s\n", j.Created.UTC().Format(time.RFC3339))
	end := time.Now()
	if j.IsFinished() {
		end = j.Finished
		fmt.Fprintf(w, "finished  %s\n", j.Finished.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "lines     %d\n", j.Total)
	pct := 100.0
	if j.Queued > 0 {
		pct = 100 * float64(j.Done) / float64(j.Queued)
	}
	fmt.Fprintf(w, "solved    %d of %d queued (%.1f%%) in %d batches\n", j.Done, j.Queued, pct, j.Batches)
	if el := end.Sub(j.Created).Seconds(); el > 0 {
		fmt.Fprintf(w, "rate      %.0f puzzles/s\n", float64(j.Done)/el)
	}
	var parts []string
	sts := slices.Clone(result.Statuses)
	for _, st := range sts {
		if n := j.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	fmt.Fprintf(w, "results   %s (distinct puzzles)\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "failed    %d\n", j.Failed())
}
