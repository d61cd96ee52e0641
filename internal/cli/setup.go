package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

func init() { addCommand(newSetupCmd) }

func newSetupCmd() *cobra.Command {
	var apply bool
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Show, or with --apply change, how the streams differ from the configuration",
		Long: `Compare the queue's streams (work, results, dead letters) and its jobs
bucket with this configuration (queue.*, job.result_ttl) and print each
difference, changing nothing. With --apply, create what is missing and
bring what exists to the configuration, printing each change.

No other command changes a stream or the bucket that exists: a worker
whose settings differ refuses to start and names each difference, other
commands use them as they are. Changing them is this command's, for a
shorter max age or a smaller limit deletes at once what a stream holds
beyond it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, conn, err := openConn(cmd, app.OpenOptions{NoCache: true, NoSetup: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			o := app.QueueOptions(cfg.Queue, cfg.Job.ResultTTL)
			diffs, err := queue.Plan(cmd.Context(), conn.JS, o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(diffs) == 0 {
				fmt.Fprintln(out, "the streams and the bucket match the configuration")
				return nil
			}
			verb := "differs"
			if apply {
				// The workers' consumer is theirs: each brings it to its
				// own settings.
				o.Update, o.NoConsumer = true, true
				if _, err := queue.Setup(cmd.Context(), conn.JS, o); err != nil {
					return fmt.Errorf("setup --apply: %w", err)
				}
				verb = "changed"
			}
			for _, d := range diffs {
				if d.Setting == "exists" {
					if apply {
						fmt.Fprintf(out, "created %s\n", d.What)
					} else {
						fmt.Fprintf(out, "missing %s\n", d.What)
					}
					continue
				}
				fmt.Fprintf(out, "%s %s: %s %s -> %s\n", verb, d.What, d.Setting, d.Have, d.Want)
			}
			if !apply {
				fmt.Fprintln(out, "nothing changed: 'sudoku setup --apply' applies these")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "create what is missing and change what differs")
	config.AddKeyFlags(cmd.Flags(), keyNATSURL)
	return cmd
}
