package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// ErrNoAnswer is matched by the error of SolveInteractive when no worker
// answered before its context ended.
var ErrNoAnswer = errors.New("no worker answered in time (is one running?)")

// ErrBadEvent is matched by the error of SolveInteractive when the
// completion event a worker sent does not carry exactly one result.
var ErrBadEvent = errors.New("bad event from a worker")

// SolveInteractive sends one canonical puzzle (solver.Grid.String) to the
// workers on the interactive subject of q, ahead of any bulk job, and
// waits for its result, carried by the completion event. It is a
// one-puzzle job without a job record; the worker caches the result as
// usual.
//
// Its errors: ErrNoAnswer (wrapping ctx's error) when ctx ends first, a
// wrapped NATS error when the request cannot be published, ErrBadEvent for
// an event it cannot read. It is safe for concurrent use.
func SolveInteractive(ctx context.Context, js jetstream.JetStream, q queue.Options, puzzle string) (result.Result, error) {
	id := NewJobID()
	nc := js.Conn()
	sub, err := nc.SubscribeSync(q.EventSubject(id))
	if err != nil {
		return result.Result{}, fmt.Errorf("producer: interactive: subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	b := queue.Batch{JobID: id, Items: []queue.Item{{Puzzle: puzzle}}}
	m := nats.NewMsg(q.InteractiveSubject())
	m.Data = b.Append(nil)
	m.Header.Set(nats.MsgIdHdr, b.MsgID())
	if _, err := js.PublishMsg(ctx, m); err != nil {
		if ctx.Err() != nil {
			return result.Result{}, fmt.Errorf("producer: interactive: publish: %w: %w", ErrNoAnswer, err)
		}
		return result.Result{}, fmt.Errorf("producer: interactive: publish: %w", err)
	}
	msg, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return result.Result{}, fmt.Errorf("producer: interactive: %w: %w", ErrNoAnswer, err)
		}
		return result.Result{}, fmt.Errorf("producer: interactive: %w", err)
	}
	var ev struct {
		Results []result.Result `json:"results"`
	}
	if err := json.Unmarshal(msg.Data, &ev); err != nil || len(ev.Results) != 1 {
		return result.Result{}, fmt.Errorf("producer: interactive: %w: %q", ErrBadEvent, msg.Data)
	}
	return ev.Results[0], nil
}
