package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

func init() { addCommand(newDLQCmd) }

// The headers a worker sets on a dead letter (see worker.deadLetter).
const (
	hdrDLQReason     = "Sudoku-Dlq-Reason"
	hdrDLQError      = "Sudoku-Dlq-Error"
	hdrDLQSubject    = "Sudoku-Dlq-Subject"
	hdrDLQDeliveries = "Sudoku-Dlq-Deliveries"
	hdrDLQTime       = "Sudoku-Dlq-Time"
	hdrDLQMsgID      = "Sudoku-Dlq-Msg-Id"
	// hdrReplayedFrom marks a replayed message with where it came from.
	hdrReplayedFrom = "Sudoku-Replayed-From"
)

func newDLQCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Look at dead letters and put them back in the queue",
		Long: `A message that a worker cannot process is moved to the dead-letter stream
(queue.dlq_stream, default SUDOKU_DLQ) with why: "undecodable" for a body
that is not a batch, "max_deliver" for a batch whose every delivery failed
(the result store refused its results, say). 'sudoku dlq list' shows them;
once the cause is fixed, 'sudoku dlq replay' publishes each again, as it
was, to its original subject, and deletes it from the dead-letter stream.`,
	}
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
			_, _, conn, err := openConn(cmd, app.OpenOptions{NoStore: true})
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
			err = eachDeadLetter(cmd.Context(), conn.JS, q.DLQStream, func(dl *deadLetter) error {
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
dead-letter stream. Only subjects of the work stream are accepted.

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
			_, _, conn, err := openConn(cmd, app.OpenOptions{NoStore: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			q := conn.Queue.Opts
			if all {
				if err := eachDeadLetter(ctx, conn.JS, q.DLQStream, func(dl *deadLetter) error {
					seqs = append(seqs, dl.Seq)
					return nil
				}); err != nil {
					return err
				}
			}
			dlq, err := conn.JS.Stream(ctx, q.DLQStream)
			if err != nil {
				return fmt.Errorf("dead-letter stream %s: %w", q.DLQStream, err)
			}
			out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			failed := 0
			for _, seq := range seqs {
				dl, err := replay(ctx, conn.JS, dlq, q, seq)
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

// deadLetter is one message of the dead-letter stream, as dlq list shows
// it.
type deadLetter struct {
	Seq        uint64    `json:"seq"`
	Time       time.Time `json:"time"`
	Reason     string    `json:"reason"`
	Error      string    `json:"error"`
	Subject    string    `json:"subject"` // where it was first published
	Deliveries int       `json:"deliveries"`
	MsgID      string    `json:"msg_id,omitempty"`
	Bytes      int       `json:"bytes"`
	// Job, Batch and Puzzles come from the body, when it decodes.
	Job     string  `json:"job,omitempty"`
	Batch   *uint64 `json:"batch,omitempty"`
	Puzzles int     `json:"puzzles,omitempty"`
	// BodyError says why the body does not decode.
	BodyError string `json:"body_error,omitempty"`
}

// newDeadLetter describes the dead letter with sequence number seq, stored
// at stored, from its headers and body.
func newDeadLetter(seq uint64, stored time.Time, h nats.Header, data []byte) *deadLetter {
	dl := &deadLetter{
		Seq:     seq,
		Time:    stored,
		Reason:  h.Get(hdrDLQReason),
		Error:   h.Get(hdrDLQError),
		Subject: h.Get(hdrDLQSubject),
		MsgID:   h.Get(hdrDLQMsgID),
		Bytes:   len(data),
	}
	dl.Deliveries, _ = strconv.Atoi(h.Get(hdrDLQDeliveries))
	if t, err := time.Parse(time.RFC3339Nano, h.Get(hdrDLQTime)); err == nil {
		dl.Time = t
	}
	if b, err := queue.Decode(data); err != nil {
		dl.BodyError = err.Error()
	} else {
		dl.Job, dl.Batch, dl.Puzzles = b.JobID, &b.Index, len(b.Items)
	}
	return dl
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// dlqFetchWait is how long a fetch from the dead-letter stream waits for
// messages the stream info said were there.
const dlqFetchWait = 3 * time.Second

// eachDeadLetter calls fn with every message of the dead-letter stream,
// oldest first, up to the last one stored when it started (so a replay
// that fails again does not make it loop). It reads with an ordered
// consumer, which the server removes when it is done.
func eachDeadLetter(ctx context.Context, js jetstream.JetStream, stream string, fn func(*deadLetter) error) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("dead-letter stream %s: %w", stream, err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 {
		return nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("dead-letter stream %s: %w", stream, err)
	}
	for {
		batch, err := c.Fetch(256, jetstream.FetchMaxWait(dlqFetchWait))
		if err != nil {
			return fmt.Errorf("dead-letter stream %s: %w", stream, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("dead-letter stream %s: %w", stream, err)
			}
			if md.Sequence.Stream > st.LastSeq {
				return nil
			}
			if err := fn(newDeadLetter(md.Sequence.Stream, md.Timestamp, m.Headers(), m.Data())); err != nil {
				return err
			}
			if md.Sequence.Stream == st.LastSeq || md.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("dead-letter stream %s: %w", stream, err)
		}
		if got == 0 {
			// Nothing within dlqFetchWait: the rest was deleted meanwhile.
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// replay publishes dead letter seq again to its original subject, then
// deletes it from the dead-letter stream.
func replay(ctx context.Context, js jetstream.JetStream, dlq jetstream.Stream, q queue.Options, seq uint64) (*deadLetter, error) {
	raw, err := dlq.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("no such dead letter in %s", q.DLQStream)
	}
	if err != nil {
		return nil, err
	}
	dl := newDeadLetter(seq, raw.Time, raw.Header, raw.Data)
	if dl.Subject != q.BulkSubject() && dl.Subject != q.InteractiveSubject() {
		return nil, fmt.Errorf("original subject %q is not %s or %s; not replayed", dl.Subject, q.BulkSubject(), q.InteractiveSubject())
	}
	m := nats.NewMsg(dl.Subject)
	m.Data = raw.Data
	id := dl.MsgID
	if id == "" {
		id = q.DLQStream
	}
	// A new message id: the original one may still be in the work stream's
	// duplicate window, which would drop the replay without a word.
	m.Header.Set(nats.MsgIdHdr, id+".replay-"+strconv.FormatUint(seq, 10))
	m.Header.Set(hdrReplayedFrom, q.DLQStream+"/"+strconv.FormatUint(seq, 10))
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// A duplicate ack means an earlier replay published it and then failed
	// to delete it: deleting it now finishes that replay.
	if _, err := js.PublishMsg(pctx, m, jetstream.WithExpectStream(q.Stream)); err != nil {
		return nil, fmt.Errorf("publish to %s: %w", dl.Subject, err)
	}
	if err := dlq.DeleteMsg(pctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("replayed, but not deleted from %s (a second replay is harmless): %w", q.DLQStream, err)
	}
	return dl, nil
}
