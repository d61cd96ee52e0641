// Package producer is the submitting side of sudoku-queue: it reads a file
// of puzzles, validates each line, answers what it can from the cache,
// de-duplicates, publishes the rest in batches to JetStream and records the
// job; then it can wait for the job and write its results in input order.
package producer

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Store is the result store and job record a producer uses: *cache.Redis or
// *cache.Memory.
type Store interface {
	Get(ctx context.Context, keys []string) ([]*result.Result, error)
	Put(ctx context.Context, rs []result.Result) error
	CreateJob(ctx context.Context, id string, created time.Time) error
	AddToJob(ctx context.Context, id string, d cache.JobDelta) error
	SealJob(ctx context.Context, id string) (finished bool, err error)
	Job(ctx context.Context, id string) (cache.Job, error)
	Order(ctx context.Context, id string, from, n int64) ([]cache.OrderEntry, error)
}

// Options tune Submit. The zero value works.
type Options struct {
	// BatchSize is the number of puzzles per message (default 256).
	BatchSize int
	// MaxMessageBytes bounds a message's size (default 1 MiB); batches
	// are cut short to fit.
	MaxMessageBytes int
	// Force sends every puzzle to the workers, even those already cached.
	Force bool
	// FirstSolution asks the workers to stop at the first solution.
	FirstSolution bool
	// Progress, if set, is called after each chunk of input with the lines
	// read so far.
	Progress func(lines int)
}

// Producer submits jobs. It is safe for concurrent use.
type Producer struct {
	js    jetstream.JetStream
	q     queue.Options
	store Store
	opts  Options
}

// New returns a producer publishing to the queue described by q (set up
// with queue.Setup) through js, recording jobs in store.
func New(js jetstream.JetStream, q queue.Options, store Store, opts Options) *Producer {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 1 << 20
	}
	return &Producer{js: js, q: q, store: store, opts: opts}
}

// Submitted describes a job just submitted.
type Submitted struct {
	ID string
	// Lines is the number of puzzle lines read; Invalid, Cached and
	// Repeated of them needed no worker; Queued distinct puzzles went to
	// the workers in Batches messages.
	Lines, Invalid, Cached, Repeated, Queued, Batches int64
	// Finished is true when nothing needed a worker.
	Finished bool
	// InvalidLines are the first invalid lines' results, to report.
	InvalidLines []result.Result
}

// maxReported bounds Submitted.InvalidLines.
const maxReported = 100

// chunkLines is how many input lines are read, looked up and recorded
// together: one cache round trip and one job update per chunk.
const chunkLines = 4096

// NewJobID returns a new job id: sortable by time (milliseconds, base32)
// and unique (80 random bits).
func NewJobID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// Submit reads every line of in, records a job and publishes its batches.
// Memory use is bounded by the de-duplication set (32 bytes per distinct
// puzzle) and the publish window, whatever the input size. When ctx ends
// mid-way, the job is left unsealed (never reported finished) and the
// error says so.
func (p *Producer) Submit(ctx context.Context, in *input.Reader) (Submitted, error) {
	sub := Submitted{ID: NewJobID()}
	if err := p.store.CreateJob(ctx, sub.ID, time.Now()); err != nil {
		return sub, fmt.Errorf("producer: %w", err)
	}
	pub := newPublisher(p, sub.ID)
	seen := make(map[[32]byte]struct{})
	var (
		lines   []cache.OrderEntry
		invalid []result.Result
		fresh   []string // distinct keys new to this job, to look up
		puzzles = map[string]string{}
	)
	flush := func() error {
		d := cache.JobDelta{Lines: lines, Counts: map[result.Status]int64{}}
		if len(invalid) > 0 {
			d.Counts[result.StatusInvalid] = int64(len(invalid))
		}
		var hits []*result.Result
		if !p.opts.Force && len(fresh) > 0 {
			var err error
			if hits, err = p.store.Get(ctx, fresh); err != nil {
				return fmt.Errorf("producer: cache lookup: %w", err)
			}
		}
		var todo []string
		for i, k := range fresh {
			// A cached gave_up is no answer, only a search that ran out of
			// its budget: solve it again (perhaps with a larger one).
			if hits != nil && hits[i] != nil && hits[i].Status != result.StatusGaveUp {
				d.Counts[hits[i].Status]++
				sub.Cached++
				continue
			}
			todo = append(todo, puzzles[k])
		}
		sub.Queued += int64(len(todo))
		d.Queued = int64(len(todo))
		batches := pub.plan(todo)
		d.Batches = int64(len(batches))
		if err := p.store.Put(ctx, invalid); err != nil {
			return fmt.Errorf("producer: store invalid results: %w", err)
		}
		// The job record learns of the batches before any can complete.
		if err := p.store.AddToJob(ctx, sub.ID, d); err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		for i := range batches {
			if err := pub.publish(ctx, &batches[i]); err != nil {
				return err
			}
		}
		sub.Batches += int64(len(batches))
		lines, invalid, fresh = lines[:0], invalid[:0], fresh[:0]
		clear(puzzles)
		if p.opts.Progress != nil {
			p.opts.Progress(int(sub.Lines))
		}
		return nil
	}
	for {
		it, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sub, fmt.Errorf("producer: read: %w", err)
		}
		sub.Lines++
		var key string
		perr := it.Err // a line too long to read
		if perr == nil {
			var grid solver.Grid
			if grid, perr = solver.Parse(it.Text); perr == nil {
				key = grid.Key()
				var k [32]byte
				_, _ = hex.Decode(k[:], []byte(key))
				if _, dup := seen[k]; dup {
					sub.Repeated++
				} else {
					seen[k] = struct{}{}
					fresh = append(fresh, key)
					puzzles[key] = string(queue.PackGrid(nil, &grid))
				}
			}
		}
		if perr != nil {
			r := result.Invalid(it.Line, it.Text, perr)
			// A line too long to read keeps only its first bytes in Text:
			// its error, which gives its length, goes into its key too, or
			// two long lines that start alike would share one result.
			raw := r.Puzzle
			if it.Err != nil {
				raw += "\x00" + r.Error
			}
			r.Key = cache.InputKey(raw)
			key = r.Key
			sub.Invalid++
			if len(sub.InvalidLines) < maxReported {
				sub.InvalidLines = append(sub.InvalidLines, r)
			}
			invalid = append(invalid, r)
		}
		lines = append(lines, cache.OrderEntry{Line: it.Line, Key: key})
		if len(lines) >= chunkLines {
			if err := flush(); err != nil {
				return sub, err
			}
		}
		if ctx.Err() != nil {
			return sub, fmt.Errorf("producer: job %s interrupted after %d lines: %w", sub.ID, sub.Lines, ctx.Err())
		}
	}
	if err := flush(); err != nil {
		return sub, err
	}
	if err := pub.wait(ctx); err != nil {
		return sub, err
	}
	fin, err := p.store.SealJob(ctx, sub.ID)
	if err != nil {
		return sub, fmt.Errorf("producer: %w", err)
	}
	sub.Finished = fin
	return sub, nil
}
