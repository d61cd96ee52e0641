package producer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Status is a job's record and how far its results are.
type Status struct {
	job.Record
	// BatchesDone of Record.Batches have their results, holding LinesDone
	// lines; Counts are those results by status (lines repeating a line
	// of another batch are counted as job.RepeatStatus). All come from the
	// record, which whoever stores a batch's results updates.
	BatchesDone, LinesDone int64
	Counts                 job.Counts
}

// JobStatus returns the status of job id, read from its record alone.
// Errors: job.ErrNotFound for an unknown job.
func JobStatus(ctx context.Context, q *queue.Queue, id string) (Status, error) {
	rec, _, err := job.NewStore(q.JS, q.Jobs).Get(ctx, id)
	if err != nil {
		return Status{Record: rec}, err
	}
	return StatusOf(rec), nil
}

// StatusOf returns the status a record holds.
func StatusOf(rec job.Record) Status {
	if rec.Stale(time.Now()) {
		rec.FailStale()
	}
	s := Status{Record: rec, Counts: job.Counts{}, BatchesDone: rec.DoneBatches, LinesDone: rec.LinesDone()}
	for st, n := range rec.Counts {
		s.Counts[st] = n
	}
	return s
}

// Jobs returns the records of the newest jobs, newest first. Records that
// do not decode are skipped, with one warning to log (nil:
// slog.Default()) naming them.
func Jobs(ctx context.Context, q *queue.Queue, limit int, log *slog.Logger) ([]job.Record, error) {
	var bad []string
	var first error
	recs, err := job.NewStore(q.JS, q.Jobs).List(ctx, limit, func(id string, err error) {
		bad = append(bad, id)
		first = cmp.Or(first, err)
	})
	if len(bad) > 0 {
		cmp.Or(log, slog.Default()).Warn("jobs: records that do not decode skipped", "bucket", q.Opts.JobsBucket(),
			"count", len(bad), "ids", strings.Join(bad, ","), "first_err", first)
	}
	return recs, err
}

// Cancel cancels job id: its record says cancelled (its producer stops
// publishing at its next update) and its consumer goes, so that no worker
// takes another batch of it; the workers drop its batches left in the
// work stream (stray work of an ended job) and finish or drop those they
// hold; the results stored stay readable. It needs no right to purge the
// work stream: a producer may cancel. It returns the record as
// cancelled; a job that has ended already is left as it is (and
// returned). Errors: job.ErrNotFound for an unknown job.
func Cancel(ctx context.Context, q *queue.Queue, id string) (job.Record, error) {
	rec, err := job.NewStore(q.JS, q.Jobs).ApplyConfirmed(ctx, id, func(r *job.Record) error {
		if !r.Cancel(time.Now()) {
			return job.ErrUnchanged
		}
		return nil
	}, func(r *job.Record) bool { return !r.State.Active() })
	if err != nil {
		return rec, err
	}
	if rec.State == job.Cancelled {
		if err := q.DropJobWork(ctx, id); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// Remove removes job id: it is cancelled first if it is running, then its
// work left in the work stream, its results, its record and its manifests
// go (an admin's right: it purges the streams). Errors: job.ErrNotFound for
// an unknown job.
func Remove(ctx context.Context, q *queue.Queue, id string) error {
	if _, err := Cancel(ctx, q, id); err != nil {
		return err
	}
	if err := q.EndWork(ctx, id); err != nil {
		return err
	}
	if err := q.Results.Purge(ctx, jetstream.WithPurgeSubject(q.Opts.ResultsFilter(id))); err != nil {
		return fmt.Errorf("job %s: remove its results: %w", id, err)
	}
	return job.NewStore(q.JS, q.Jobs).Delete(ctx, id)
}

// Unsolved returns the number of results that are not a unique (or, in
// first-solution mode, any) solution, repeats apart: none, multiple,
// invalid or given up. They are answers, not failures of the job.
func (s *Status) Unsolved() int64 { return s.Record.Unsolved() }
