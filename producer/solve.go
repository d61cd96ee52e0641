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

// Solve asks the workers' solve endpoint (the micro service's, on
// q.SolveSubject) for one puzzle's result, ahead of any bulk job. The
// puzzle is text in any format solver.Parse takes. A worker answers from
// the cache or solves it, and caches what it solved.
//
// Its errors: ErrNoAnswer (wrapping the cause) when no worker answers
// before ctx ends; a *queue.ServiceError when the worker refused the
// request (queue.CodeInvalidPuzzle for a puzzle that does not parse: its
// Description says what and where); a wrapped NATS error otherwise. It is
// safe for concurrent use.
func Solve(ctx context.Context, nc *nats.Conn, q queue.Options, puzzle string, first bool) (result.Result, error) {
	req, err := json.Marshal(queue.SolveRequest{Puzzle: puzzle, First: first})
	if err != nil {
		return result.Result{}, err
	}
	m, err := nc.RequestWithContext(ctx, q.SolveSubject(), req)
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
