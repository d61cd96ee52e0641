package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// publisher publishes one job's batches asynchronously, with a bounded
// number of acks outstanding, and republishes a batch whose publish failed
// (the Nats-Msg-Id makes a repeat harmless).
type publisher struct {
	p        *Producer
	jobID    string
	next     uint64 // next batch index
	nextItem uint64 // next item index: the distinct puzzles queued, in order
	pending  []inflight
}

type inflight struct {
	msg    *nats.Msg
	future jetstream.PubAckFuture
}

// maxInflight bounds the publishes awaiting their ack.
const maxInflight = 256

// publishRetries bounds the attempts at one batch.
const publishRetries = 5

func newPublisher(p *Producer, jobID string) *publisher { return &publisher{p: p, jobID: jobID} }

// plan cuts puzzles (packed grids) into batches of at most BatchSize
// puzzles and MaxMessageBytes bytes, numbering them.
func (pb *publisher) plan(puzzles []string) []queue.Batch {
	var out []queue.Batch
	flags := queue.FlagPacked
	if !pb.p.opts.Force {
		flags |= queue.FlagCacheChecked
	}
	if pb.p.opts.FirstSolution {
		flags |= queue.FlagFirstSolution
	}
	// Room for the header, and per puzzle its varints and text.
	const header = 1 + 10 + 1 + queue.MaxJobID + 10 + 10
	for len(puzzles) > 0 {
		b := queue.Batch{JobID: pb.jobID, Index: pb.next, Flags: flags}
		size := header
		for len(puzzles) > 0 && len(b.Items) < pb.p.opts.BatchSize {
			n := 20 + len(puzzles[0])
			if len(b.Items) > 0 && size+n > pb.p.opts.MaxMessageBytes {
				break
			}
			size += n
			b.Items = append(b.Items, queue.Item{Index: pb.nextItem, Puzzle: puzzles[0]})
			pb.nextItem++
			puzzles = puzzles[1:]
		}
		pb.next++
		out = append(out, b)
	}
	return out
}

// publish sends b without waiting for its ack, first waiting for the
// oldest acks when too many are outstanding.
func (pb *publisher) publish(ctx context.Context, b *queue.Batch) error {
	m := nats.NewMsg(pb.p.q.BulkSubject())
	m.Data = b.Append(nil)
	m.Header.Set(nats.MsgIdHdr, b.MsgID())
	for len(pb.pending) >= maxInflight {
		if err := pb.settle(ctx, pb.pending[0]); err != nil {
			return err
		}
		pb.pending = pb.pending[1:]
	}
	f, err := pb.p.js.PublishMsgAsync(m)
	if err != nil {
		// Too many pending in the client, or disconnected: fall back to a
		// synchronous publish with retries.
		return pb.publishSync(ctx, m)
	}
	pb.pending = append(pb.pending, inflight{m, f})
	return nil
}

// settle waits for one publish's ack, republishing on failure.
func (pb *publisher) settle(ctx context.Context, f inflight) error {
	select {
	case <-f.future.Ok():
		return nil
	case err := <-f.future.Err():
		if errors.Is(err, context.Canceled) {
			return err
		}
		return pb.publishSync(ctx, f.msg)
	case <-ctx.Done():
		return fmt.Errorf("producer: publish: %w", ctx.Err())
	case <-time.After(30 * time.Second):
		return pb.publishSync(ctx, f.msg)
	}
}

// publishSync publishes m, retrying with backoff.
func (pb *publisher) publishSync(ctx context.Context, m *nats.Msg) error {
	var err error
	delay := 100 * time.Millisecond
	for attempt := 0; attempt < publishRetries; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = pb.p.js.PublishMsg(pctx, m)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(delay)
		delay *= 2
	}
	if err != nil {
		return fmt.Errorf("producer: publish batch %s: %w", m.Header.Get(nats.MsgIdHdr), err)
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
	pb.pending = nil
	return nil
}
