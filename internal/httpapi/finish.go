package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// A job's record is marked finished, with its counts by status, by the
// first reader that reads all its results (producer.Follow): GET
// /v1/jobs/{id}/results, or `sudoku job wait`. A job nobody reads would
// stay "published" at 100% for ever, its repeats uncounted. So when a view
// (GET /v1/jobs/{id}, GET /v1/jobs, the dashboard) finds a published job
// whose results are all in, the finisher reads them once in the
// background, which marks the job finished; the next view shows its final
// counts.
type finisher struct {
	s   *Server
	sem chan struct{} // bounds the jobs read at once

	mu    sync.Mutex
	tried map[string]time.Time // jobs read lately, or being read
	wg    sync.WaitGroup
}

const (
	// finishers bounds the jobs the finisher reads at once.
	finishers = 2
	// finishRetry is how long the finisher leaves a job alone after
	// trying it (a job it could not finish is tried again after that).
	finishRetry = time.Minute
	// finishTimeout bounds the reading of one job.
	finishTimeout = 5 * time.Minute
)

func newFinisher(s *Server) *finisher {
	return &finisher{s: s, sem: make(chan struct{}, finishers), tried: map[string]time.Time{}}
}

// complete reports whether every result of a published job is in.
func complete(st *producer.Status) bool {
	return st.Record.State == job.Published && st.BatchesDone >= st.Record.Batches
}

// maybe starts reading the job of st, if all its results are in and it
// was not tried lately and a reader is free; it does not wait.
func (f *finisher) maybe(st *producer.Status) {
	if !complete(st) {
		return
	}
	id := st.Record.ID
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.s.streams.Err() != nil {
		return // the server is closing: wait may be waiting
	}
	now := time.Now()
	if t, ok := f.tried[id]; ok && now.Sub(t) < finishRetry {
		return
	}
	select {
	case f.sem <- struct{}{}:
	default:
		return // busy: a later view tries again
	}
	if len(f.tried) >= 1024 {
		for k, t := range f.tried {
			if now.Sub(t) >= finishRetry {
				delete(f.tried, k)
			}
		}
	}
	f.tried[id] = now
	f.wg.Add(1)
	go func() {
		defer func() { <-f.sem; f.wg.Done() }()
		ctx, cancel := context.WithTimeout(f.s.streams, finishTimeout)
		defer cancel()
		_, err := producer.Follow(ctx, f.s.q, id, func(result.Result) error { return nil },
			producer.FollowOptions{Logger: f.s.log})
		if err != nil && ctx.Err() == nil && !errors.Is(err, job.ErrNotFound) {
			f.s.log.Warn("httpapi: cannot mark a job finished", "job", id, "err", err)
		}
	}()
}

// wait waits for the readers started; end the server's streams first
// (which stops them, and stops maybe from starting more).
func (f *finisher) wait() {
	f.mu.Lock() // held, so that no maybe is between its check and wg.Add
	defer f.mu.Unlock()
	f.wg.Wait()
}
