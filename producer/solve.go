package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// ErrNoAnswer is matched by the error of Solve when no worker answered
// before its context ended, or none is running.
var ErrNoAnswer = errors.New("no worker answered (is one running?)")

// SolveOptions are the options of a Solve request.
type SolveOptions struct {
	// First stops at the first solution instead of proving it unique.
	First bool
	// NoLookup says the caller looked the puzzle up in the cache and
	// missed: the worker goes straight to solving (queue.HdrNoLookup).
	NoLookup bool
}

// Solve asks the workers' solve endpoint (the micro service's, on
// q.SolveSubject) for one puzzle's result, ahead of any bulk job. The
// puzzle is text in any format solver.Parse takes. A worker answers from
// the cache (unless opts.NoLookup) or solves it, and caches what it
// solved.
//
// Its errors: ErrNoAnswer (wrapping the cause) when no worker answers
// before ctx ends; a *queue.ServiceError when the worker refused the
// request (queue.CodeInvalidPuzzle for a puzzle that does not parse: its
// Description says what and where); a wrapped NATS error otherwise. It is
// safe for concurrent use.
func Solve(ctx context.Context, nc *nats.Conn, q queue.Options, puzzle string, opts SolveOptions) (result.Result, error) {
	data, err := json.Marshal(queue.SolveRequest{Puzzle: puzzle, First: opts.First})
	if err != nil {
		return result.Result{}, err
	}
	req := nats.NewMsg(q.SolveSubject())
	req.Data = data
	if opts.NoLookup {
		req.Header.Set(queue.HdrNoLookup, "1")
	}
	m, err := nc.RequestMsgWithContext(ctx, req)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, nats.ErrNoResponders) {
			return result.Result{}, fmt.Errorf("%w: %w", ErrNoAnswer, err)
		}
		return result.Result{}, fmt.Errorf("solve request: %w", err)
	}
	if se := queue.ServiceErrorOf(m); se != nil {
		return result.Result{}, se
	}
	var r result.Result
	if err := json.Unmarshal(m.Data, &r); err != nil || !r.Status.Valid() {
		return result.Result{}, fmt.Errorf("solve request: a worker answered %q", m.Data)
	}
	return r, nil
}
