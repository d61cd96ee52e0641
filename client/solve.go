package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// SolveOptions tune Solve.
type SolveOptions struct {
	// First stops at the first solution (status Solved) instead of
	// proving it unique.
	First bool
	// NoCache goes straight to the workers, without looking the puzzle
	// up in the cache.
	NoCache bool
}

// Get returns the cached result of puzzle (text in any form a puzzle
// file takes: 81 characters, or a 9-line grid; or the puzzle's key, its
// 64 lower-case hex digits), checked as every answer is (a cached value
// that fails is a miss). Errors: ErrBadInput (a *solver.ParseError says
// what and where) for a puzzle that does not parse; ErrNotCached for a
// miss; ErrNotCached and ErrUnavailable when the cache did not answer.
func (c *Client) Get(ctx context.Context, puzzle string) (Result, error) {
	var g *solver.Grid
	key := puzzle
	if !solver.IsKey(puzzle) {
		pg, err := solver.Parse(puzzle)
		if err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		g, key = &pg, pg.Key()
	}
	r, answered := c.lookup(ctx, key, g, false)
	switch {
	case r != nil:
		return *r, nil
	case !answered:
		return Result{}, fmt.Errorf("puzzle %s: %w (%w: the cache did not answer)", key, ErrNotCached, ErrUnavailable)
	}
	return Result{}, fmt.Errorf("puzzle %s: %w", key, ErrNotCached)
}

// lookup returns the cached answer of the puzzle with key (g, if not nil,
// is the puzzle), if the cache has one that answers the mode asked
// (first) and passes the check; answered says the cache answered.
func (c *Client) lookup(ctx context.Context, key string, g *solver.Grid, first bool) (r *Result, answered bool) {
	k, err := job.ParseKey(key)
	if err != nil {
		return nil, false
	}
	hits, ok := c.conn.Cache.Lookup(ctx, []job.Key{k})
	if !ok || hits == nil || hits[0] == nil {
		return nil, ok
	}
	o := hits[0]
	if g != nil && o.Puzzle != *g || !o.Answers(first) {
		return nil, true
	}
	// The cache's guard Verified it (Unproven: unique and gave_up
	// confirmed by solving), and turned a value that fails into a miss.
	res := o.Result(0, key)
	res.Cached = true
	return &res, true
}

// Solve returns the result of one puzzle: from the cache when it holds
// it (unless o.NoCache), else from a worker's solve endpoint, ahead of
// any bulk job. Every answer is checked. A puzzle that does not parse is
// not an error: its result has status Invalid and says what and where.
// Errors: ErrNoWorker when no worker answers before ctx ends (give ctx a
// deadline); ErrUnavailable.
func (c *Client) Solve(ctx context.Context, puzzle string, o SolveOptions) (Result, error) {
	g, err := solver.Parse(puzzle)
	if err != nil {
		return result.Invalid(0, puzzle, err), nil
	}
	answered := false
	if !o.NoCache {
		var r *Result
		if r, answered = c.lookup(ctx, g.Key(), &g, o.First); r != nil {
			return *r, nil
		}
	}
	if !c.conn.NC.IsConnected() { // a request would wait for a reconnection
		return Result{}, fmt.Errorf("%w: NATS: %s", ErrUnavailable, c.conn.NC.Status())
	}
	// A lookup that answered (a miss) need not be made again by the worker.
	r, err := producer.Solve(ctx, c.conn.NC, c.conn.Queue.Opts, g.String(),
		producer.SolveOptions{First: o.First, NoLookup: o.NoCache || answered, Logger: c.log, Trust: c.conn.Trust})
	if err != nil && !errors.Is(err, ErrNoWorker) {
		err = wrap(err)
	}
	return r, err
}
