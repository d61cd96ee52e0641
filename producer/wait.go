package producer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// pollEvery is how often Wait reads the job record when no completion
// event arrives (events are not stored: one missed during a reconnect must
// not leave a waiter hanging).
const pollEvery = time.Second

// Wait blocks until job id is finished or ctx is done. It wakes on the
// workers' completion events (when nc is not nil) and polls the job record
// besides. progress, if set, is called with each new state of the job.
func Wait(ctx context.Context, store Store, nc *nats.Conn, q queue.Options, id string, progress func(cache.Job)) (cache.Job, error) {
	// wake is signalled by every completion event, finished by the one
	// that says the job is done.
	wake := make(chan struct{}, 1)
	finished := make(chan struct{})
	var once sync.Once
	if nc != nil {
		sub, err := nc.Subscribe(q.EventSubject(id), func(m *nats.Msg) {
			if bytes.Contains(m.Data, []byte(`"finished":true`)) {
				once.Do(func() { close(finished) })
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		if err == nil {
			defer func() { _ = sub.Unsubscribe() }()
		}
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last cache.Job
	for {
		j, err := store.Job(ctx, id)
		switch {
		case errors.Is(err, cache.ErrJobNotFound):
			return j, err
		case err != nil && ctx.Err() == nil:
			// The store may be restarting: keep waiting, it is polled again.
		case err == nil:
			if progress != nil && (j.Done != last.Done || j.Sealed != last.Sealed || j.IsFinished()) {
				progress(j)
			}
			last = j
			if j.IsFinished() {
				return j, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("producer: waiting for job %s: %w", id, ctx.Err())
		case <-finished:
		case <-wake:
			// Events come in bursts: read the record at most every 50ms,
			// unless the job finishes meanwhile.
			select {
			case <-finished:
			case <-time.After(50 * time.Millisecond):
			}
		case <-tick.C:
		}
	}
}

// resultChunk is how many lines Results reads per round trip.
const resultChunk = 1024

// ErrMissing is matched by the error of a result that is not in the cache
// though the job is finished (evicted by TTL or memory pressure).
var ErrMissing = errors.New("result missing from the cache (expired or evicted); submit the puzzle again")

// Results passes the result of every line of job id to out, in input
// order, with its line number. A result missing from the cache is passed as
// a StatusGaveUp result whose Error says so (matching ErrMissing's text).
func Results(ctx context.Context, store Store, id string, out func(result.Result) error) error {
	for from := int64(0); ; from += resultChunk {
		order, err := store.Order(ctx, id, from, resultChunk)
		if err != nil {
			return fmt.Errorf("producer: results of job %s: %w", id, err)
		}
		if len(order) == 0 {
			return nil
		}
		keys := make([]string, len(order))
		for i, e := range order {
			keys[i] = e.Key
		}
		rs, err := store.Get(ctx, keys)
		if err != nil {
			return fmt.Errorf("producer: results of job %s: %w", id, err)
		}
		for i, r := range rs {
			var res result.Result
			if r != nil {
				res = *r
			} else {
				res = result.Result{Key: keys[i], Status: result.StatusGaveUp, Error: ErrMissing.Error()}
			}
			res.Line = order[i].Line
			if res.Status == result.StatusInvalid {
				res.Key = "" // stored under a hash of its text, but it has no puzzle key
			}
			if err := out(res); err != nil {
				return err
			}
		}
		if len(order) < resultChunk {
			return nil
		}
	}
}
