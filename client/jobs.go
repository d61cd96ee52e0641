package client

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/service"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// SubmitOptions say how a job is run. The zero value is a normal-priority
// job that proves each solution unique and answers from the cache what it
// can.
type SubmitOptions struct {
	// Priority is the job's share of its owner's turns (default Normal).
	// Turns are fair between owners first: an owner gains nothing by
	// splitting its work into more jobs.
	Priority Priority
	// First stops at the first solution of each puzzle (status Solved)
	// instead of proving it unique.
	First bool
	// Force solves every puzzle again, even those in the cache.
	Force bool
}

// Started is a job whose record exists and whose batches are being
// published: its ID may be followed at once; Wait returns what the
// submission did once every batch is out.
type Started = producer.Started

// producer returns a producer for the client's owner with o.
func (c *Client) producer(o SubmitOptions) *producer.Producer {
	return producer.New(c.conn.Queue, c.conn.Cache, c.producerOptions(o))
}

// producerOptions are the producer's options for a job of the client's
// owner with o.
func (c *Client) producerOptions(o SubmitOptions) producer.Options {
	opts := c.base
	opts.Force, opts.FirstSolution, opts.Priority, opts.Owner = o.Force, o.First, o.Priority, c.owner
	if c.acting && opts.MaxGrowth == 0 {
		opts.MaxGrowth = producer.DefaultMaxGrowth
	}
	return opts
}

// submitInput submits in as a job (the micro service's submit).
func (c *Client) submitInput(ctx context.Context, in *input.Reader, o service.JobOptions) (Submitted, error) {
	opts := c.producerOptions(SubmitOptions{Priority: o.Priority, First: o.First, Force: o.Force})
	opts.JSONResults = o.JSONResults
	s, err := producer.New(c.conn.Queue, c.conn.Cache, opts).Submit(ctx, in)
	return s, wrap(err)
}

// Submit reads every puzzle of in (one per line, or 9-line grids; blank
// lines and '#' comments skipped: the format of a puzzle file), records a
// job and publishes its work, and returns once every batch is out.
// Lines that are not puzzles get invalid results; Submitted says what
// became of each line. Memory stays bounded whatever the input's size.
//
// Errors: ErrBadInput when in holds no puzzle; ErrQuota (a
// *job.QuotaError naming the quota) when the owner is over one;
// ErrForbidden when the servers refuse the user; ErrUnavailable.
func (c *Client) Submit(ctx context.Context, in io.Reader, o SubmitOptions) (Submitted, error) {
	s, err := c.producer(o).Submit(ctx, input.NewReader(in))
	return s, wrap(err)
}

// Start is Submit that returns as soon as the job's record exists, its
// batches published meanwhile by a goroutine of its own: Results or
// Follow may read the job while it is submitted. Started.Wait returns
// Submit's result.
func (c *Client) Start(ctx context.Context, in io.Reader, o SubmitOptions) (*Started, error) {
	st, err := c.producer(o).Start(ctx, input.NewReader(in))
	return st, wrap(err)
}

// SubmitPuzzles submits puzzles as one job, each puzzle one line (81
// characters, or any one-line form a puzzle file takes): the result of
// puzzles[i] has Line i+1. An element holding a line break is refused
// (ErrBadInput), before anything is submitted.
func (c *Client) SubmitPuzzles(ctx context.Context, puzzles []string, o SubmitOptions) (Submitted, error) {
	for i, p := range puzzles {
		if strings.ContainsAny(p, "\r\n") {
			return Submitted{}, fmt.Errorf("%w: puzzle %d (line %d) holds a line break: give each puzzle on one line",
				ErrBadInput, i, i+1)
		}
	}
	pr, pw := io.Pipe()
	go func() {
		var err error
		for _, p := range puzzles {
			if _, err = io.WriteString(pw, p+"\n"); err != nil {
				break
			}
		}
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	return c.Submit(ctx, pr, o)
}

// SubmitChan submits the puzzles received from puzzles, until it is
// closed, as one job (the result of the n-th puzzle received has Line
// n), and returns once every batch is out. Puzzles holding a line break
// are given invalid results.
func (c *Client) SubmitChan(ctx context.Context, puzzles <-chan string, o SubmitOptions) (Submitted, error) {
	pr, pw := io.Pipe()
	go func() {
		var err error
		for {
			select {
			case p, ok := <-puzzles:
				if !ok {
					pw.Close()
					return
				}
				p = strings.NewReplacer("\r", " ", "\n", " ").Replace(p)
				if _, err = io.WriteString(pw, p+"\n"); err != nil {
					return
				}
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return
			}
		}
	}()
	defer pr.Close()
	return c.Submit(ctx, pr, o)
}

// Follow passes every result of job id to fn, in input order, as they
// arrive, and returns the job's status once all are passed on. It reads
// from the start of the job's results: any client may follow any job it
// may read, while it runs or long after. Every result was checked (a
// batch that fails its job's manifest is refused and the right one
// awaited).
//
// Errors: ErrNotFound; ErrForbidden (another owner's job); ErrJobFailed;
// ErrCancelled once what was done is passed on; fn's error; ctx's.
func (c *Client) Follow(ctx context.Context, id string, fn func(Result) error) (Status, error) {
	return c.FollowWith(ctx, id, fn, FollowOptions{})
}

// Progress is where a Follow stands: the job's record as last read, the
// lines and batches passed on, and what it waits for besides the workers.
type Progress = producer.Progress

// FollowOptions tune FollowWith.
type FollowOptions struct {
	// Progress, if set, is called after each batch passed on, and when
	// the job's record or the waiting state changes: to show progress,
	// or flush what was written.
	Progress func(Progress)
	// Brief leaves each Result's Puzzle and Key empty (they cost a
	// SHA-256 a puzzle): for an output of solutions and errors alone.
	Brief bool
}

// FollowWith is Follow with o.
func (c *Client) FollowWith(ctx context.Context, id string, fn func(Result) error, o FollowOptions) (Status, error) {
	if err := c.mayTouch(id, false); err != nil {
		return Status{}, err
	}
	rec, err := producer.Follow(ctx, c.conn.Queue, id, fn,
		producer.FollowOptions{Full: !o.Brief, Progress: o.Progress, Logger: c.log, Trust: c.conn.Trust})
	if err != nil {
		return Status{}, wrap(err)
	}
	return producer.StatusOf(c.conn.Queue.Opts, rec, time.Now()), nil
}

// Results returns job id's results in input order, as an iterator: each
// result with a nil error, then, if the job cannot be read to its end,
// one zero Result with the error (as Follow's). Breaking out of the loop
// stops reading.
func (c *Client) Results(ctx context.Context, id string) iter.Seq2[Result, error] {
	return func(yield func(Result, error) bool) {
		stopped := fmt.Errorf("stopped")
		_, err := c.Follow(ctx, id, func(r Result) error {
			if !yield(r, nil) {
				return stopped
			}
			return nil
		})
		if err != nil && err != stopped {
			yield(Result{}, err)
		}
	}
}

// Status returns job id's status, read from its record alone.
func (c *Client) Status(ctx context.Context, id string) (Status, error) {
	if err := c.mayTouch(id, false); err != nil {
		return Status{}, err
	}
	st, err := producer.JobStatus(ctx, c.conn.Queue, id)
	return st, wrap(err)
}

// Wait returns job id's status once it has ended (finished, cancelled or
// failed), or ctx's error. It reads the record alone, less often as the
// job goes on (at most every second); Follow reads the results too.
func (c *Client) Wait(ctx context.Context, id string) (Status, error) {
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		st, err := c.Status(ctx, id)
		if err != nil {
			return st, err
		}
		if st.State.Ended() {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, context.Cause(ctx)
		case <-time.After(pause):
		}
	}
}

// ListOptions select the jobs List returns.
type ListOptions struct {
	// All lists every owner's jobs: for a producer, if the servers let
	// it read others' (roles init --shared-reads). Without it, a
	// producer's client lists its owner's jobs, and every other client
	// (an admin's, a reader's, a gateway's, one without roles) every
	// owner's.
	All bool
	// Limit is the most jobs returned, newest first (default 100).
	Limit int
}

// List returns the status of the newest jobs, newest first.
func (c *Client) List(ctx context.Context, o ListOptions) ([]Status, error) {
	owner := ""
	if r, ok := roles.Of(c.user); ok && !r.ActsForOthers() && !o.All {
		owner = c.owner // the servers let a producer read no other's
	}
	if r, ok := roles.Of(c.owner); c.acting && !(ok && r.ActsForOthers()) {
		owner = c.owner // a door's caller lists its own
	}
	sts, err := producer.Jobs(ctx, c.conn.Queue, owner, cmp.Or(max(o.Limit, 0), 100), c.log)
	return sts, wrap(err)
}

// Cancel cancels job id: its work not yet done leaves the queue; what
// was done stays readable. Only the job's owner (or an admin) may.
// Cancelling an ended job leaves it as it is and returns its status.
func (c *Client) Cancel(ctx context.Context, id string) (Status, error) {
	if err := c.mayTouch(id, true); err != nil {
		return Status{}, err
	}
	st, err := producer.Cancel(ctx, c.conn.Queue, id)
	return st, wrap(err)
}

// Remove removes job id (cancelled first if it is running): its record,
// manifests and work go; an admin's client purges its results too,
// another owner's leaves them to expire with job.result_ttl. Only the
// job's owner (or an admin) may.
func (c *Client) Remove(ctx context.Context, id string) error {
	if err := c.mayTouch(id, true); err != nil {
		return err
	}
	remove := producer.Remove
	if !c.PurgesResults() {
		remove = producer.RemoveOwn
	}
	return wrap(remove(ctx, c.conn.Queue, id))
}

// PurgesResults reports whether Remove purges a job's results at once:
// for an admin's client, and one without roles (no NATS user). Another
// user may not purge the streams: its Remove leaves the results, which
// nothing names any more, to expire with job.result_ttl.
func (c *Client) PurgesResults() bool {
	r, ok := roles.Of(c.owner)
	return (ok && r == roles.Admin) || c.user == ""
}

// mayTouch returns nil when the client may read (write false) or change
// job id: ErrNotFound for what cannot be a job id, ErrForbidden for
// another owner's job, unless the client's role acts for others.
func (c *Client) mayTouch(id string, write bool) error {
	if !job.ValidID(id) {
		return fmt.Errorf("%q is not a job id (owner.serial): %w", id, ErrNotFound)
	}
	if err := producer.MayTouch(c.owner, id, write); err != nil || !c.acting || c.actsForOthers() {
		return err
	}
	return producer.MayTouch(c.base.Owner, id, write)
}
