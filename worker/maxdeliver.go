package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
		w.maxDelivered(m.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("worker: subscribe to %s: %w", subject, err)
	}
	return sub, nil
}

// maxDelivered moves the message an advisory names from the work stream to
// the dead-letter stream: copy first, then delete, so that a failure leaves
// it where it was (and says so) rather than nowhere.
func (w *Worker) maxDelivered(data []byte) {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(data, &adv); err != nil || adv.Stream != w.q.Opts.Stream || adv.StreamSeq == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fail := func(what string, err error) {
		w.log.Error("worker: a message was given up after its last delivery and could not be dead-lettered; it stays in the work stream",
			"stream", adv.Stream, "seq", adv.StreamSeq, "consumer", adv.Consumer, "deliveries", adv.Deliveries, "step", what, "err", err)
	}
	s, err := w.q.JS.Stream(ctx, adv.Stream)
	if err != nil {
		fail("stream", err)
		return
	}
	raw, err := s.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return // acked after all, or moved already
	}
	if err != nil {
		fail("get", err)
		return
	}
	cause := fmt.Errorf("delivered %d times without an answer: every worker that held it died or timed out", adv.Deliveries)
	dl := w.q.Opts.DeadLetterMsg(raw.Subject, raw.Header, raw.Data, queue.ReasonMaxDeliver, cause, adv.Deliveries)
	// The copy's own id makes a second advisory for the same message (none
	// is expected) harmless.
	dl.Header.Set(nats.MsgIdHdr, adv.Stream+"."+strconv.FormatUint(adv.StreamSeq, 10)+".max_deliver")
	if _, err := w.q.JS.PublishMsg(ctx, dl); err != nil {
		fail("dead-letter", err)
		return
	}
	if err := s.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		fail("delete", err)
		return
	}
	w.log.Warn("worker: message moved to the dead-letter stream", "reason", queue.ReasonMaxDeliver, "err", cause,
		"subject", raw.Subject, "deliveries", adv.Deliveries, "dlq", w.q.Opts.DLQStream)
}
