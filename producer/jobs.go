package producer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Status is a job's status as every door shows it: `sudoku job status`
// and `job list`, GET /v1/jobs/{id} and the micro service's status and
// cancel replies all encode this one type, read from the job's record
// alone (O(1): no scan of its results). Its counts add up: Counts sum to
// Done, and Invalid + Cached + Repeated + Queued to Lines.
type Status struct {
	ID string `json:"id"`
	// State is "publishing" (batches are still being published; the
	// counts grow), "published" (every batch is out; results are coming
	// in), "finished" (every result is stored and counted: set by whoever
	// stored the last ones, whether or not anyone reads the job),
	// "cancelled" (its work not done left the queue; the results done stay
	// readable) or "failed" (Error says why; the job will never complete).
	State job.State `json:"state"`
	Error string    `json:"error,omitempty"`
	// Priority is the job's share of the workers (low, normal or high);
	// First, Force and JSONResults are what else the job was asked to do.
	Priority    job.Priority `json:"priority"`
	First       bool         `json:"first,omitempty"`
	Force       bool         `json:"force,omitempty"`
	JSONResults bool         `json:"json_results"`
	// Tally's Lines is the number of puzzle lines: the number of
	// results. Of them, Invalid are not puzzles, Cached were answered
	// from the cache, Repeated repeat an earlier line, and Queued went to
	// the workers, in Batches messages (growing while the job is
	// publishing).
	job.Tally
	// BatchesDone of Batches have their results, holding Done lines.
	BatchesDone int64 `json:"batches_done"`
	Done        int64 `json:"done"`
	// Counts are the results so far by status, summing to Done ("repeat":
	// a line that repeats a line of another batch, whose answer it has).
	// Unsolved of them are answers other than a unique (or, in
	// first-solution mode, any) solution: none, multiple, invalid or given
	// up. They are answers, not failures of the job.
	Counts   job.Counts `json:"counts"`
	Unsolved int64      `json:"unsolved"`
	// Complete is set once every batch of a published (or finished) job
	// has its results: a reader will find them all.
	Complete bool `json:"complete"`
	// Progress is Done/Lines, from 0 to 1 (1 once finished); Rate is Done
	// over the time since the job was created (until it ended), in lines
	// per second.
	Progress float64 `json:"progress"`
	Rate     float64 `json:"rate"`
	// Created is when the job was submitted; Finished when it reached its
	// final state (absent until then); Elapsed the seconds in between (or
	// until now).
	Created  time.Time  `json:"created"`
	Finished *time.Time `json:"finished,omitempty"`
	Elapsed  float64    `json:"elapsed_seconds"`
	// Results says where the job's results appear.
	Results queue.ResultsInfo `json:"results"`
}

// JobStatus returns the status of job id, read from its record alone.
// Errors: job.ErrNotFound for an unknown job.
func JobStatus(ctx context.Context, q *queue.Queue, id string) (Status, error) {
	rec, _, err := q.Store().Get(ctx, id)
	if err != nil {
		return Status{ID: id}, err
	}
	return StatusOf(q.Opts, rec, time.Now()), nil
}

// StatusOf returns the status rec holds as of now, with where its results
// are in the streams o names. A job whose producer stopped without a word
// is shown failed at once, before a worker's sweep writes it.
func StatusOf(o queue.Options, rec job.Record, now time.Time) Status {
	if rec.Stale(now) {
		rec.FailStale(now)
	}
	r := &rec
	form := queue.FormBinary
	if r.Options.JSONResults {
		form = queue.FormJSON
	}
	s := Status{ID: r.ID, State: r.State, Error: r.Error, Priority: r.Options.Priority.Or(),
		First: r.Options.FirstSolution, Force: r.Options.Force, JSONResults: r.Options.JSONResults,
		Tally:       r.Tally,
		BatchesDone: r.DoneBatches, Done: r.LinesDone(), Counts: make(job.Counts, len(r.Counts)),
		Unsolved: r.Unsolved(), Complete: r.Complete(), Created: r.Created,
		Results: o.ResultsOf(r.ID, form, r.ResultsFrom)}
	for st, n := range r.Counts {
		s.Counts[st] = n
	}
	end := now
	if !r.Finished.IsZero() {
		f := r.Finished
		s.Finished, end = &f, f
	}
	switch {
	case r.State == job.Finished:
		s.Progress = 1
	case r.Lines > 0:
		s.Progress = min(1, float64(s.Done)/float64(r.Lines))
	}
	if !r.Created.IsZero() {
		s.Elapsed = max(0, end.Sub(r.Created).Seconds())
		if s.Elapsed > 0 {
			s.Rate = float64(s.Done) / s.Elapsed
		}
	}
	return s
}

// Jobs returns the status of the newest jobs of owner ("" for every
// owner's), newest first. Records that
// do not decode are skipped, with one warning to log (nil:
// slog.Default()) naming them.
func Jobs(ctx context.Context, q *queue.Queue, owner string, limit int, log *slog.Logger) ([]Status, error) {
	var bad []string
	var first error
	recs, err := q.Store().List(ctx, owner, limit, func(id string, err error) {
		bad = append(bad, id)
		first = cmp.Or(first, err)
	})
	if len(bad) > 0 {
		cmp.Or(log, slog.Default()).Warn("jobs: records that do not decode skipped", "bucket", q.Opts.JobsBucket(),
			"count", len(bad), "ids", strings.Join(bad, ","), "first_err", first)
	}
	now := time.Now()
	out := make([]Status, len(recs))
	for i, r := range recs {
		out[i] = StatusOf(q.Opts, r, now)
	}
	return out, err
}

// Cancel cancels job id: its record says cancelled, and its producer,
// if still publishing, stops at its next update; the workers drop its
// batches left in its lane as they come to them (a moment's work each:
// none is solved), and finish or drop those they hold; the results
// stored stay readable. It needs no right to purge the work stream: a
// producer may cancel its own jobs. It returns the job's status as
// cancelled; a job that has ended already is left as it is (and its
// status returned). Errors: job.ErrNotFound for an unknown job.
func Cancel(ctx context.Context, q *queue.Queue, id string) (Status, error) {
	rec, err := q.Store().ApplyConfirmed(ctx, id, func(r *job.Record) error {
		if !r.Cancel(time.Now()) {
			return job.ErrUnchanged
		}
		return nil
	}, func(r *job.Record) bool { return !r.State.Active() })
	if err != nil {
		return Status{ID: id}, err
	}
	return StatusOf(q.Opts, rec, time.Now()), nil
}

// Remove removes job id: it is cancelled first if it is running, then its
// work left in the work stream, its results, its record and its manifests
// go (an admin's right: it purges the streams). Errors: job.ErrNotFound for
// an unknown job.
func Remove(ctx context.Context, q *queue.Queue, id string) error {
	if _, err := Cancel(ctx, q, id); err != nil {
		return err
	}
	rec, _, err := q.Store().Get(ctx, id)
	if err != nil {
		return err
	}
	if err := q.EndWork(ctx, id, queue.LaneOf(&rec)); err != nil {
		return err
	}
	if err := q.ResultStore().Purge(ctx, q.Opts.ResultsFilter(id)); err != nil {
		return fmt.Errorf("job %s: remove its results: %w", id, err)
	}
	return q.Store().Delete(ctx, id)
}

// RemoveOwn removes job id as its owner may, without the right to purge
// the streams: it is cancelled first if it is running; once the workers
// have dropped its work left in its lane (they drop a cancelled job's
// batches as they come to them), its manifests and record are deleted,
// so that the job is gone for every reader. Its results, which nothing
// names any more, leave the results stream when its max age passes.
// Errors: job.ErrNotFound for an unknown job.
func RemoveOwn(ctx context.Context, q *queue.Queue, id string) error {
	if _, err := Cancel(ctx, q, id); err != nil {
		return err
	}
	store := q.Store()
	rec, _, err := store.Get(ctx, id)
	if err != nil {
		return err
	}
	lane := queue.LaneOf(&rec)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		n, err := q.WorkLeft(ctx, id, lane)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("job %s: %d of its batches still in its lane: %w", id, n, ctx.Err())
		}
	}
	manifests := rec.Batches
	if len(rec.Manifest) > 0 {
		manifests = 0 // a small job's, in its record
	}
	return store.DeleteKeys(ctx, id, manifests)
}
