package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// publisher publishes one job's messages asynchronously, with a bounded
// number of acks outstanding, and republishes a message whose publish
// failed: a work batch's Nats-Msg-Id, and a results batch's expected last
// subject sequence, make a repeat harmless.
type publisher struct {
	p       *Producer
	pending []inflight
	bytes   int // of the pending messages
}

type inflight struct {
	msg     *nats.Msg
	results bool // a results batch: "wrong last sequence" means stored already
	future  jetstream.PubAckFuture
}

// maxInflight and maxInflightBytes bound the publishes awaiting their
// ack: enough to keep the server busy, few enough to keep memory small
// whatever the batch size.
const (
	maxInflight      = 256
	maxInflightBytes = 4 << 20
)

// publishRetries bounds the attempts at one message.
const publishRetries = 5

func newPublisher(p *Producer) *publisher { return &publisher{p: p} }

func (pb *publisher) opts(f inflight) []jetstream.PublishOpt {
	if f.results {
		return []jetstream.PublishOpt{queue.ExpectResults()}
	}
	return nil
}

// publish sends f.msg without waiting for its ack, first waiting for the
// oldest acks when too many are outstanding.
func (pb *publisher) publish(ctx context.Context, f inflight) error {
	for len(pb.pending) >= maxInflight || (len(pb.pending) > 0 && pb.bytes+len(f.msg.Data) > maxInflightBytes) {
		if err := pb.settle(ctx, pb.pending[0]); err != nil {
			return err
		}
		pb.bytes -= len(pb.pending[0].msg.Data)
		pb.pending[0] = inflight{}
		pb.pending = pb.pending[1:]
	}
	fut, err := pb.p.q.JS.PublishMsgAsync(f.msg, pb.opts(f)...)
	if err != nil {
		// Too many pending in the client, or disconnected: fall back to a
		// synchronous publish with retries.
		return pb.publishSync(ctx, f)
	}
	f.future = fut
	pb.pending = append(pb.pending, f)
	pb.bytes += len(f.msg.Data)
	return nil
}

// settle waits for one publish's ack, republishing on failure.
func (pb *publisher) settle(ctx context.Context, f inflight) error {
	select {
	case <-f.future.Ok():
		return nil
	case err := <-f.future.Err():
		if f.results && queue.IsWrongLastSequence(err) {
			return pb.resultsThere(ctx, f)
		}
		return pb.publishSync(ctx, f)
	case <-ctx.Done():
		return fmt.Errorf("publish: %w", ctx.Err())
	case <-time.After(30 * time.Second):
		return pb.publishSync(ctx, f)
	}
}

// publishSync publishes f.msg, retrying with backoff.
func (pb *publisher) publishSync(ctx context.Context, f inflight) error {
	var err error
	delay := 100 * time.Millisecond
	for attempt := 0; attempt < publishRetries; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = pb.p.q.JS.PublishMsg(pctx, f.msg, pb.opts(f)...)
		cancel()
		if f.results && queue.IsWrongLastSequence(err) {
			return pb.resultsThere(ctx, f)
		}
		if err == nil || ctx.Err() != nil {
			err = nil
			break
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
		delay *= 2
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.Is(err, nats.ErrMaxPayload) || (errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrMessageTooLarge) {
			return fmt.Errorf("NATS refused a batch of %d bytes as too large (queue.max_message_bytes must stay "+
				"below the server's max_payload and the stream's limit): %w", len(f.msg.Data), err)
		}
		return fmt.Errorf("publish to %s: %w", f.msg.Subject, err)
	}
	return nil
}

// resultsThere handles a results message whose subject held one already
// (queue.PublishResults): one that answers the batch alike stays (ours,
// published before a lost ack), one that does not (published there
// before the job wrote it, by hand or forged) is replaced by ours.
func (pb *publisher) resultsThere(ctx context.Context, f inflight) error {
	ours, err := job.DecodeAnyResults(f.msg.Data)
	if err != nil {
		return fmt.Errorf("publish to %s: %w", f.msg.Subject, err)
	}
	replaced, err := pb.p.q.PublishResults(ctx, f.msg, 10*time.Second, queue.SameResults(ctx, &ours))
	if replaced {
		pb.p.opts.Logger.Warn("producer: a results subject held a message that does not answer its batch; replaced it",
			"subject", f.msg.Subject)
	}
	if err != nil {
		return fmt.Errorf("publish to %s: %w", f.msg.Subject, err)
	}
	return nil
}

// wait waits for every outstanding ack.
func (pb *publisher) wait(ctx context.Context) error {
	for _, f := range pb.pending {
		if err := pb.settle(ctx, f); err != nil {
			return err
		}
	}
	pb.pending, pb.bytes = nil, 0
	return nil
}

// abandon forgets the outstanding publishes.
func (pb *publisher) abandon() { pb.pending, pb.bytes = nil, 0 }

// jsErrMessageTooLarge is JetStream's error code for a message over the
// stream's maximum message size.
const jsErrMessageTooLarge jetstream.ErrorCode = 10054
