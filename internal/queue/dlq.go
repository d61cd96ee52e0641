package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// The reasons a message is dead-lettered: the last token of its subject in
// the dead-letter stream and the value of HdrDLQReason.
const (
	// ReasonUndecodable: the body is not a work batch.
	ReasonUndecodable = "undecodable"
	// ReasonUnknownJob: the batch names a job with no record (never
	// submitted, removed, or expired).
	ReasonUnknownJob = "unknown_job"
	// ReasonOutOfRange: the job's producer published no batch of that
	// index.
	ReasonOutOfRange = "out_of_range"
	// ReasonMismatch: the batch is not the one the job's producer
	// published under that index (its digest differs from the manifest's).
	ReasonMismatch = "mismatch"
	// ReasonMaxDeliver: every delivery failed, or the workers holding it
	// died each time.
	ReasonMaxDeliver = "max_deliver"
)

// The headers of a dead letter.
const (
	HdrDLQReason     = "Sudoku-Dlq-Reason"
	HdrDLQError      = "Sudoku-Dlq-Error"
	HdrDLQSubject    = "Sudoku-Dlq-Subject"
	HdrDLQDeliveries = "Sudoku-Dlq-Deliveries"
	HdrDLQTime       = "Sudoku-Dlq-Time"
	HdrDLQMsgID      = "Sudoku-Dlq-Msg-Id"
	// HdrReplayedFrom marks a replayed message with where it came from:
	// "<dead-letter stream>/<sequence>".
	HdrReplayedFrom = "Sudoku-Replayed-From"
)

// DeadLetterMsg builds the dead letter of a message (its subject,
// headers and body) that failed for reason because of cause after
// deliveries deliveries.
func (o Options) DeadLetterMsg(subject string, h nats.Header, data []byte, reason string, cause error, deliveries uint64) *nats.Msg {
	dl := nats.NewMsg(o.DLQSubject(reason))
	dl.Data = data
	dl.Header.Set(HdrDLQReason, reason)
	dl.Header.Set(HdrDLQError, oneLine(cause.Error()))
	dl.Header.Set(HdrDLQSubject, subject)
	dl.Header.Set(HdrDLQDeliveries, strconv.FormatUint(deliveries, 10))
	dl.Header.Set(HdrDLQTime, time.Now().UTC().Format(time.RFC3339Nano))
	if id := h.Get(nats.MsgIdHdr); id != "" {
		dl.Header.Set(HdrDLQMsgID, id)
	}
	return dl
}

// oneLine keeps a header value on one line.
func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// DeadLetter is one message of the dead-letter stream, as 'sudoku dlq
// list' shows it.
type DeadLetter struct {
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

// NewDeadLetter describes the dead letter with sequence number seq, stored
// at stored, from its headers and body.
func NewDeadLetter(seq uint64, stored time.Time, h nats.Header, data []byte) *DeadLetter {
	dl := &DeadLetter{
		Seq:     seq,
		Time:    stored,
		Reason:  h.Get(HdrDLQReason),
		Error:   h.Get(HdrDLQError),
		Subject: h.Get(HdrDLQSubject),
		MsgID:   h.Get(HdrDLQMsgID),
		Bytes:   len(data),
	}
	dl.Deliveries, _ = strconv.Atoi(h.Get(HdrDLQDeliveries))
	if t, err := time.Parse(time.RFC3339Nano, h.Get(HdrDLQTime)); err == nil {
		dl.Time = t
	}
	if b, err := job.DecodeWork(data); err != nil {
		dl.BodyError = err.Error()
	} else {
		dl.Job, dl.Batch, dl.Puzzles = b.Job, &b.Index, len(b.Items)
	}
	return dl
}

// dlqFetchWait is how long a fetch from the dead-letter stream waits for
// messages the stream info said were there.
const dlqFetchWait = 3 * time.Second

// EachDeadLetter calls fn with every message of the dead-letter stream,
// oldest first, up to the last one stored when it started (so a replay
// that fails again does not make it loop). It reads with an ordered
// consumer, which the server removes when it is done.
func (q *Queue) EachDeadLetter(ctx context.Context, fn func(*DeadLetter) error) error {
	stream := q.Opts.DLQStream
	s, err := q.JS.Stream(ctx, stream)
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
			if err := fn(NewDeadLetter(md.Sequence.Stream, md.Timestamp, m.Headers(), m.Data())); err != nil {
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

// ErrNotABatch is matched by the error of Replay for a dead letter whose
// body is not a work batch.
var ErrNotABatch = errors.New("the body is not a work batch")

// Replay publishes dead letter seq again to its original subject, with
// its body unchanged and a message id of its own, then deletes it from the
// dead-letter stream. Only work subjects and bodies that are work batches
// are accepted (ErrNotABatch: a worker would dead-letter it again at
// once). A replay is safe to repeat.
func (q *Queue) Replay(ctx context.Context, seq uint64) (*DeadLetter, error) {
	o := q.Opts
	dlq, err := q.JS.Stream(ctx, o.DLQStream)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream %s: %w", o.DLQStream, err)
	}
	raw, err := dlq.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("no such dead letter in %s", o.DLQStream)
	}
	if err != nil {
		return nil, err
	}
	dl := NewDeadLetter(seq, raw.Time, raw.Header, raw.Data)
	if !strings.HasPrefix(dl.Subject, strings.TrimSuffix(o.WorkFilter(), ">")) {
		return nil, fmt.Errorf("original subject %q is not a work subject (%s); not replayed", dl.Subject, o.WorkFilter())
	}
	if dl.BodyError != "" {
		// A worker would dead-letter it again at once.
		return nil, fmt.Errorf("%w: %s; not replayed (remove it with: nats stream rmm %s %d)",
			ErrNotABatch, dl.BodyError, o.DLQStream, seq)
	}
	m := nats.NewMsg(dl.Subject)
	m.Data = raw.Data
	id := dl.MsgID
	if id == "" {
		id = o.DLQStream
	}
	// A new message id: the original one may still be in the work stream's
	// duplicate window, which would drop the replay without a word.
	m.Header.Set(nats.MsgIdHdr, id+".replay-"+strconv.FormatUint(seq, 10))
	m.Header.Set(HdrReplayedFrom, o.DLQStream+"/"+strconv.FormatUint(seq, 10))
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// A duplicate ack means an earlier replay published it and then failed
	// to delete it: deleting it now finishes that replay.
	if _, err := q.JS.PublishMsg(pctx, m, jetstream.WithExpectStream(o.Stream)); err != nil {
		return nil, fmt.Errorf("publish to %s: %w", dl.Subject, err)
	}
	if err := dlq.DeleteMsg(pctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("replayed, but not deleted from %s (a second replay is harmless): %w", o.DLQStream, err)
	}
	return dl, nil
}
