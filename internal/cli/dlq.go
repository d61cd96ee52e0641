package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

func init() { addCommand(newDLQCmd) }

func newDLQCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Look at dead letters and put them back in the queue",
		Long: `A message that a worker cannot process is moved to the dead-letter stream
(queue.dlq_stream, default SUDOKU_DLQ) with why:
  undecodable   the body is not a batch
  unknown_job   the batch names a job with no record (never submitted,
                removed, or expired)
  out_of_range  the job's producer published no batch of that index
  mismatch      the batch differs from the one the job's producer published
  max_deliver   every delivery failed, or its workers died each time
'sudoku dlq list' shows them; once the cause is fixed, 'sudoku dlq replay'
publishes each again, as it was, to its original subject, and deletes it
from the dead-letter stream.`,
	}
	config.AddKeyFlags(cmd.PersistentFlags(), keyNATSURL)
	cmd.AddCommand(newDLQListCmd(), newDLQReplayCmd())
	return cmd
}

func newDLQListCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the dead letters, oldest first",
		Long: `List every message of the dead-letter stream, oldest first: its sequence
number in that stream (what 'sudoku dlq replay' takes), when and why it was
dead-lettered, the error, the subject it was published to, how many times
it was delivered, and the job, batch and number of puzzles it carries when
its body decodes. --format jsonl writes one JSON object per message.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != string(result.Text) && format != string(result.JSONL) {
				return usageErrorf("--format %q: want %s or %s", format, result.Text, result.JSONL)
			}
			_, _, conn, err := openConn(cmd, app.OpenOptions{NoCache: true, NoConsumer: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			q := conn.Queue.Opts
			var w *tabwriter.Writer
			if format == string(result.Text) {
				w = tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "SEQ\tTIME\tREASON\tDELIVERIES\tSUBJECT\tJOB\tBATCH\tPUZZLES\tERROR")
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			n := 0
			err = conn.Queue.EachDeadLetter(cmd.Context(), func(dl *queue.DeadLetter) error {
				n++
				if w == nil {
					return enc.Encode(dl)
				}
				job, batch, puzzles := "-", "-", "-"
				if dl.Job != "" {
					job, batch, puzzles = dl.Job, strconv.FormatUint(*dl.Batch, 10), strconv.Itoa(dl.Puzzles)
				}
				_, err := fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", dl.Seq, dl.Time.UTC().Format("2006-01-02 15:04:05"),
					orDash(dl.Reason), dl.Deliveries, orDash(dl.Subject), job, batch, puzzles, orDash(dl.Error))
				return err
			})
			if w != nil {
				if ferr := w.Flush(); err == nil {
					err = ferr
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d dead letters in %s\n", n, q.DLQStream)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", string(result.Text), "output `format`: text or jsonl")
	return cmd
}

func newDLQReplayCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "replay [SEQ...|--all]",
		Short: "Publish dead letters again to their original subjects",
		Long: `Publish each dead letter named by its sequence number (see 'sudoku dlq
list'), or every one with --all, again to the subject it was first
published to, with its body unchanged, then delete it from the
dead-letter stream. Only work batches first published to subjects of the
work stream are replayed: a body that is not a batch would be
dead-lettered again at once (remove it with 'nats stream rmm').

A replay is safe to repeat: the republished message carries a message id
of its own (the original id, ".replay-", the dead-letter sequence), so
JetStream drops a second copy of the same replay, and workers count a
batch once however often it is delivered. Exit status 1 when some could
not be replayed; the others are replayed all the same.`,
		Example: `  sudoku dlq replay 3 7
  sudoku dlq replay --all`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return usageErrorf("name the sequence numbers to replay, or --all (not both)")
			}
			var seqs []uint64
			for _, a := range args {
				s, err := strconv.ParseUint(a, 10, 64)
				if err != nil || s == 0 {
					return usageErrorf("%q is not a sequence number (see 'sudoku dlq list')", a)
				}
				seqs = append(seqs, s)
			}
			ctx := cmd.Context()
			_, _, conn, err := openConn(cmd, app.OpenOptions{NoCache: true, NoConsumer: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			q := conn.Queue.Opts
			if all {
				if err := conn.Queue.EachDeadLetter(ctx, func(dl *queue.DeadLetter) error {
					seqs = append(seqs, dl.Seq)
					return nil
				}); err != nil {
					return err
				}
			}
			out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			failed := 0
			for _, seq := range seqs {
				dl, err := conn.Queue.Replay(ctx, seq)
				if err != nil {
					failed++
					fmt.Fprintf(stderr, "%d: %v\n", seq, err)
					if ctx.Err() != nil {
						return ctx.Err()
					}
					continue
				}
				what := "undecodable body"
				if dl.Job != "" {
					what = fmt.Sprintf("job %s batch %d, %d puzzles", dl.Job, *dl.Batch, dl.Puzzles)
				}
				fmt.Fprintf(out, "%d\treplayed to %s (%s)\n", seq, dl.Subject, what)
			}
			fmt.Fprintf(stderr, "%d replayed, %d failed, from %s\n", len(seqs)-failed, failed, q.DLQStream)
			if failed > 0 {
				return &exitError{code: ExitFailure}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead letter")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
