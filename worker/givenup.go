package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// The max-deliveries advisory is the only word the server gives of a
// message it gave up (maxdeliver.go), and it is not stored: on
// nats-server 2.9 one published while no worker listens (every worker
// restarting, or the one that pulled going away at that moment) is lost.
// The message then sits in its lane past its last delivery, never to be
// delivered again, and its job, its other batches done, waits for ever.
//
// The sweep is the backstop: a published job whose record counts fewer
// batches than it has, while its lane's consumer has nothing to deliver
// and nothing in work (queue.Queue.JobIdle) but the job's work is still in
// the stream, has messages that were given up. Each of them the consumer
// delivered (its sequence is at most the consumer's last delivered) and
// holds no more (nothing awaits an ack in the lane, a message waiting for
// its redelivery included); it is so still after the advisory's grace
// (maxDeliverGrace), and is then moved to the dead-letter stream as the
// advisory would have moved it, reason "max_deliver", with an error that
// says how it was found. The job then waits for 'sudoku dlq replay' like
// any job with a batch dead-lettered, instead of for nothing.

// maxGivenUpScan bounds the messages of one job a sweep looks at.
const maxGivenUpScan = 256

// givenUpCause says why a message the sweep found is dead-lettered.
func givenUpCause(maxDeliver int) error {
	return fmt.Errorf("delivered %d times without an answer, then given up by the server; its max-deliveries "+
		"advisory was lost (no worker listening then), and a worker's sweep found it left in its lane with nothing "+
		"of the lane pending or in work", maxDeliver)
}

// sweepGivenUp dead-letters the messages of job id left in lane l past
// their last delivery (see above), and returns how many it moved. It
// waits the advisory's grace between its two looks.
func (w *Worker) sweepGivenUp(ctx context.Context, id string, l queue.Lane) int {
	s, err := w.q.JS.Stream(ctx, w.q.Opts.Stream)
	if err != nil {
		return 0
	}
	subject := w.q.Opts.WorkSubject(id, l)
	var seqs []uint64
	for seq := uint64(1); len(seqs) < maxGivenUpScan; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			w.log.Debug("worker: cannot look for a job's work given up", "job", id, "err", err)
			return 0
		}
		seqs = append(seqs, m.Sequence)
		seq = m.Sequence + 1
	}
	// givenUp returns those of seqs the lane's consumer delivered and
	// holds no more, and its MaxDeliver.
	givenUp := func(seqs []uint64) ([]uint64, int) {
		c, err := w.q.JS.Consumer(ctx, w.q.Opts.Stream, w.q.Opts.LaneConsumer(l))
		if err != nil {
			return nil, 0
		}
		ci := c.CachedInfo()
		if ci.Config.MaxDeliver <= 0 || ci.NumAckPending > 0 {
			return nil, 0 // never given up; or some message may be in work
		}
		var out []uint64
		for _, seq := range seqs {
			if seq <= ci.Delivered.Stream {
				out = append(out, seq)
			}
		}
		return out, ci.Config.MaxDeliver
	}
	if seqs, _ = givenUp(seqs); len(seqs) == 0 {
		return 0
	}
	select {
	case <-time.After(w.maxDeliverGrace()):
	case <-ctx.Done():
		return 0
	}
	seqs, maxDeliver := givenUp(seqs)
	moved := 0
	for _, seq := range seqs {
		fail := func(step string, err error) {
			w.log.Error("worker: a message left in its lane past its last delivery could not be dead-lettered; it stays in the work stream",
				"job", id, "lane", l, "seq", seq, "step", step, "err", err)
		}
		if w.moveGivenUp(ctx, s, seq, uint64(maxDeliver), givenUpCause(maxDeliver), fail) {
			moved++
		}
	}
	if moved > 0 {
		w.log.Warn("worker: a job's batches given up by the server without a word were dead-lettered; 'sudoku dlq replay' puts them back",
			"job", id, "lane", l, "messages", moved)
	}
	return moved
}
