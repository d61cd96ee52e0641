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
// file takes: 81 characters, or a 9-line grid), checked as every answer
// is (a cached value that fails is a miss). Errors: ErrBadInput (a
// *solver.ParseError says what and where) for a puzzle that does not
// parse; ErrNotCached for a miss, or when Redis does not answer.
func (c *Client) Get(ctx context.Context, puzzle string) (Result, error) {
	g, err := solver.Parse(puzzle)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	if r, ok := c.lookup(ctx, &g, false); ok {
		return r, nil
	}
	return Result{}, fmt.Errorf("puzzle %s: %w", g.Key(), ErrNotCached)
}

// lookup returns puzzle g's cached answer, if the cache has one that
// answers the mode asked (first) and passes the check.
func (c *Client) lookup(ctx context.Context, g *solver.Grid, first bool) (Result, bool) {
	key := g.Key()
	k, err := job.ParseKey(key)
	if err != nil {
		return Result{}, false
	}
	hits, ok := c.conn.Cache.Lookup(ctx, []job.Key{k})
	if !ok || hits == nil || hits[0] == nil {
		return Result{}, false
	}
	o := hits[0]
	if o.Puzzle != *g || !o.Answers(first) {
		return Result{}, false
	}
	// The cache's guard Verified it (Unproven: unique and gave_up
	// confirmed by solving), and turned a value that fails into a miss.
	r := o.Result(0, key)
	r.Cached = true
	return r, true
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
	if !o.NoCache {
		if r, ok := c.lookup(ctx, &g, o.First); ok {
			return r, nil
		}
	}
	r, err := producer.Solve(ctx, c.conn.NC, c.conn.Queue.Opts, g.String(),
		producer.SolveOptions{First: o.First, NoLookup: true, Logger: c.log, Trust: c.conn.Trust})
	if err != nil && !errors.Is(err, ErrNoWorker) {
		err = wrap(err)
	}
	return r, err
}
