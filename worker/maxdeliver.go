package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// A message whose every delivery ends without an ack, a nak or a term (its
// workers were killed, or hung, while holding it) is never delivered again
// once it has been delivered MaxDeliver times: the server leaves it in the
// work stream and says so only with an advisory. Without a listener the
// message would be lost in plain sight and its job never finish; so every
// worker listens, in a queue group so that one handles each advisory, and
// moves the message to the dead-letter stream (reason "max_deliver"),
// where `sudoku dlq list` shows it and `sudoku dlq replay` puts it back.
//
// The server checks for such messages when it has a pull request to serve,
// that is while some worker is pulling, and so listening.
//
// Anyone who may publish on $JS.EVENT.> can forge such an advisory, so the
// worker moves a message only once the queue confirms it
// (confirmMaxDelivered): delivered, never acknowledged, and so for a
// while; work not delivered yet is never moved.

// maxDeliveriesAdvisory is the part of the server's advisory
// (io.nats.jetstream.advisory.v1.max_deliver) used here.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// watchMaxDeliveries subscribes to the max-deliveries advisories of the
// work stream's consumers.
func (w *Worker) watchMaxDeliveries() (*nats.Subscription, error) {
	subject := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + w.q.Opts.Stream + ".*"
	sub, err := w.nc.QueueSubscribe(subject, w.q.Opts.Consumer+"-max-deliveries", func(m *nats.Msg) {
		// Confirmed over a wait (see confirmMaxDelivered): not in the
		// subscription's goroutine.
		go w.maxDelivered(m.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("worker: subscribe to %s: %w", subject, err)
	}
	return sub, nil
}

// maxDelivered moves the message an advisory names from the work stream to
// the dead-letter stream, once confirmMaxDelivered confirms it: copy
// first, then delete, so that a failure leaves it where it was (and says
// so) rather than nowhere. It reports whether it moved it.
func (w *Worker) maxDelivered(data []byte) bool {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(data, &adv); err != nil || adv.Stream != w.q.Opts.Stream || adv.StreamSeq == 0 {
		return false
	}
	grace := w.maxDeliverGrace()
	ctx, cancel := context.WithTimeout(context.Background(), grace+20*time.Second)
	defer cancel()
	fail := func(what string, err error) {
		w.log.Error("worker: a message was given up after its last delivery and could not be dead-lettered; it stays in the work stream",
			"stream", adv.Stream, "seq", adv.StreamSeq, "consumer", adv.Consumer, "deliveries", adv.Deliveries, "step", what, "err", err)
	}
	s, err := w.q.JS.Stream(ctx, adv.Stream)
	if err != nil {
		fail("stream", err)
		return false
	}
	if why := w.confirmMaxDelivered(ctx, s, &adv, grace); why != "" {
		w.log.Warn("worker: a max-deliveries advisory that the queue does not confirm; ignored (anyone who may publish on "+
			"$JS.EVENT.> can forge one)", "stream", adv.Stream, "seq", adv.StreamSeq, "consumer", adv.Consumer, "why", why)
		return false
	}
	cause := fmt.Errorf("delivered %d times without an answer: every worker that held it died or timed out", adv.Deliveries)
	return w.moveGivenUp(ctx, s, adv.StreamSeq, adv.Deliveries, cause, fail)
}

// moveGivenUp moves message seq of the work stream s, which the server
// gave up after deliveries deliveries, to the dead-letter stream (reason
// "max_deliver", error cause): copy first, then delete, so that a
// failure leaves it where it was (and says so through fail) rather than
// nowhere. It reports whether it moved it: not when it is gone already
// (acked after all), or when another worker's copy was there first (the
// copy's id is the message's: one dead letter, one log line).
func (w *Worker) moveGivenUp(ctx context.Context, s jetstream.Stream, seq, deliveries uint64, cause error,
	fail func(step string, err error)) bool {
	raw, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false // acked after all, or moved already
	}
	if err != nil {
		fail("get", err)
		return false
	}
	dl := w.q.Opts.DeadLetterMsg(raw.Subject, raw.Header, raw.Data, queue.ReasonMaxDeliver, cause, deliveries)
	// The copy's own id makes a second move of the same message (by
	// another worker's advisory or sweep) harmless.
	dl.Header.Set(nats.MsgIdHdr, w.q.Opts.Stream+"."+strconv.FormatUint(seq, 10)+".max_deliver")
	ack, err := w.q.JS.PublishMsg(ctx, dl)
	if err != nil {
		fail("dead-letter", err)
		return false
	}
	if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		fail("delete", err)
		return false
	}
	if ack.Duplicate {
		return false // copied by another worker first
	}
	w.log.Warn("worker: message moved to the dead-letter stream", "reason", queue.ReasonMaxDeliver, "err", cause,
		"subject", raw.Subject, "deliveries", deliveries, "dlq", w.q.Opts.DLQStream)
	return true
}

// maxDeliverGrace is how long an advisory's message must stay delivered
// and unacknowledged before it is taken for given up: two ack waits (a
// worker that holds it acks or extends it within one) and the longest
// delay before a redelivery.
func (w *Worker) maxDeliverGrace() time.Duration {
	return 2*w.q.Opts.AckWait + slices.Max(w.opts.NakDelays)
}

// confirmMaxDelivered checks what an advisory says against the queue, for
// anyone allowed to publish on $JS.EVENT.> can forge one (the
// deployment's permissions should allow only the server): the consumer it
// names exists on the work stream, it gave the message its last delivery,
// the message was delivered and is not acknowledged, and it stays so for
// grace, where a message in work would be acknowledged or delivered
// again. It returns why the advisory is not confirmed, or "".
//
// A message never delivered (work waiting its turn: what a forged
// advisory moved before) is never taken. One in work whose worker holds
// it past grace could be: its results are published all the same, and
// only a needless dead letter is left.
func (w *Worker) confirmMaxDelivered(ctx context.Context, s jetstream.Stream, adv *maxDeliveriesAdvisory, grace time.Duration) string {
	check := func() string {
		c, err := w.q.JS.Consumer(ctx, adv.Stream, adv.Consumer)
		if err != nil {
			return fmt.Sprintf("consumer %q: %v", adv.Consumer, err)
		}
		info := c.CachedInfo()
		switch {
		case info.Config.MaxDeliver > 0 && adv.Deliveries < uint64(info.Config.MaxDeliver):
			return fmt.Sprintf("%d deliveries, the consumer allows %d", adv.Deliveries, info.Config.MaxDeliver)
		case adv.StreamSeq > info.Delivered.Stream:
			return "the consumer has not delivered it yet"
		case adv.StreamSeq <= info.AckFloor.Stream:
			return "acknowledged"
		}
		if _, err := s.GetMsg(ctx, adv.StreamSeq); err != nil {
			return fmt.Sprintf("not in the stream: %v", err)
		}
		return ""
	}
	if why := check(); why != "" {
		return why
	}
	select {
	case <-time.After(grace):
	case <-ctx.Done():
		return ctx.Err().Error()
	}
	return check()
}
