package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// Status is a job's record and how far its results are.
type Status struct {
	job.Record
	// BatchesDone of Record.Batches have their results, holding LinesDone
	// lines; Counts are those results by status (repeats the results
	// could not resolve are counted as job.RepeatStatus). For a finished
	// job they come from the record.
	BatchesDone, LinesDone int64
	Counts                 job.Counts
}

// JobStatus returns the status of job id: its record, and for a job not
// finished yet, a tally of the results stored so far (read from the
// results' headers only). Errors: job.ErrNotFound for an unknown job.
func JobStatus(ctx context.Context, q *queue.Queue, id string) (Status, error) {
	rec, _, err := job.NewStore(q.JS, q.Jobs).Get(ctx, id)
	if err != nil {
		return Status{Record: rec}, err
	}
	if rec.Stale(time.Now()) {
		rec.FailStale()
	}
	s := Status{Record: rec, Counts: job.Counts{}}
	if rec.State == job.Finished {
		s.BatchesDone, s.LinesDone = rec.Batches, rec.Lines
		for st, n := range rec.Counts {
			s.Counts[st] = n
		}
		return s, nil
	}
	err = tally(ctx, q, &rec, func(c job.Counts) {
		s.BatchesDone++
		for st, n := range c {
			s.Counts[st] += n
			s.LinesDone += n
		}
	})
	return s, err
}

// tally calls fn with the counts of every results message of rec's job,
// read with a headers-only ordered consumer.
func tally(ctx context.Context, q *queue.Queue, rec *job.Record, fn func(job.Counts)) error {
	id := rec.ID
	cfg := resultsReader(q, rec)
	cfg.HeadersOnly = true
	c, err := q.Results.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("job %s: read results: %w", id, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("job %s: read results: %w", id, err)
	}
	left := info.NumPending
	for left > 0 {
		batch, err := c.Fetch(int(min(left, 1024)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("job %s: read results: %w", id, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if cs, err := job.ParseCounts(m.Headers().Get(queue.HdrCounts)); err == nil {
				fn(cs)
			}
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("job %s: read results: %w", id, err)
		}
		if got == 0 {
			return nil
		}
		left -= uint64(got)
	}
	return nil
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

// Remove removes job id: its work not yet done, its results, its record
// and its manifests. Workers dead-letter a batch of it that was in work
// (reason unknown_job). Errors: job.ErrNotFound for an unknown job.
func Remove(ctx context.Context, q *queue.Queue, id string) error {
	store := job.NewStore(q.JS, q.Jobs)
	if _, _, err := store.Get(ctx, id); err != nil {
		return err
	}
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	if err := work.Purge(ctx, jetstream.WithPurgeSubject(q.Opts.WorkSubject(id))); err != nil {
		return fmt.Errorf("job %s: remove its work: %w", id, err)
	}
	if err := q.Results.Purge(ctx, jetstream.WithPurgeSubject(q.Opts.ResultsFilter(id))); err != nil {
		return fmt.Errorf("job %s: remove its results: %w", id, err)
	}
	return store.Delete(ctx, id)
}

// Failures returns the number of results that are not a unique (or, in
// first-solution mode, any) solution.
func (s *Status) Failures() int64 {
	var n int64
	for st, c := range s.Counts {
		if st != result.StatusUnique && st != result.StatusSolved && st != job.RepeatStatus {
			n += c
		}
	}
	return n
}
