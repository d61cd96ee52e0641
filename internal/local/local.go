// Package local solves a file of puzzles in this process, on every core,
// and hands the results back in input order: `sudoku solve --local`, with
// no queue and no cache.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Options tune Run. The zero value uses every core and the solver's
// defaults.
type Options struct {
	// Workers is the number of solving goroutines; 0 or less means
	// runtime.GOMAXPROCS(0).
	Workers int
	// FirstSolution stops each search at its first solution (status
	// solved) instead of proving it unique.
	FirstSolution bool
	// MaxNodes is the node budget per puzzle, as solver.Options.MaxNodes:
	// 0 for solver.DefaultMaxNodes, negative for no bound.
	MaxNodes int64
	// Progress, when set, is called after each batch of results has been
	// passed to out, with the number of results passed so far. It is
	// called from the same goroutine as out and should return quickly.
	Progress func(done int)
}

// batchSize is the number of puzzles a worker takes at a time. A puzzle
// takes 5-10 us to solve; a channel hand-off takes well under a
// microsecond, so at 64 a batch the hand-offs cost less than 0.1%, while
// the reorder window stays small.
const batchSize = 64

// windowPerWorker is how many batches may be in flight (read, being
// solved, or solved and waiting for an earlier one) per worker. It bounds
// memory whatever the input size, and leaves room for one slow puzzle to
// hold back its batch while the other workers go on.
const windowPerWorker = 8

// batch is a run of consecutive puzzles of the input and, once solved,
// their results. Batches are recycled through Run's free list.
type batch struct {
	seq     int // position in the input, 0-based, in batches
	items   []input.Item
	results []result.Result
}

// Run reads every puzzle of in (a line, or a 9-line grid: see package
// input), solves them in parallel and calls out with each result in input
// order (invalid puzzles give StatusInvalid results with the line numbers
// where they start). Memory stays bounded: at most a few hundred
// puzzles per worker are held at a time.
//
// Run returns nil when every line was read and passed to out; out's first
// error (wrapped); a read error of in (wrapped, after every result before
// it has been passed to out); or, when ctx is done, an error matching
// ctx.Err(): out has then received the results of a prefix of the input,
// in order, and no result of a search cut short by ctx.
func Run(ctx context.Context, in *input.Reader, out func(result.Result) error, opts Options) error {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	window := workers * windowPerWorker
	sopts := solver.Options{FirstSolution: opts.FirstSolution, MaxNodes: opts.MaxNodes}

	// free holds the batches not in use; taking one is the reader's ticket
	// into the window, so the reader never runs more than window batches
	// ahead of out.
	free := make(chan *batch, window)
	for range window {
		free <- &batch{
			items:   make([]input.Item, 0, batchSize),
			results: make([]result.Result, 0, batchSize),
		}
	}
	todo := make(chan *batch, window)
	solved := make(chan *batch, window)

	g, gctx := errgroup.WithContext(ctx)

	// The reader keeps a read error to itself so that the results before
	// it still reach out; Run returns it at the end.
	var readErr error
	g.Go(func() error {
		defer close(todo)
		var err error
		readErr, err = read(gctx, in, free, todo)
		return err
	})

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		g.Go(func() error {
			defer wg.Done()
			return work(gctx, todo, solved, sopts)
		})
	}
	// Closes solved once no worker can send on it; ends with the workers.
	go func() {
		wg.Wait()
		close(solved)
	}()

	g.Go(func() error {
		return collect(gctx, solved, free, window, out, opts.Progress)
	})

	err := g.Wait()
	if ctxErr := ctx.Err(); ctxErr != nil {
		// Cancellation shows up in many places; report it once, as such.
		return fmt.Errorf("local: stopped: %w", ctxErr)
	}
	if err != nil {
		return err
	}
	return readErr
}

// read fills batches from in and sends them to todo, in order. It returns
// a read error of in as readErr, and ctx's error as err.
func read(ctx context.Context, in *input.Reader, free <-chan *batch, todo chan<- *batch) (readErr, err error) {
	for seq := 0; ; seq++ {
		var b *batch
		select {
		case b = <-free:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		b.seq = seq
		b.items = b.items[:0]
		for len(b.items) < batchSize {
			it, err := in.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = fmt.Errorf("local: %w", err)
				}
				if len(b.items) == 0 {
					return readErr, nil
				}
				break
			}
			b.items = append(b.items, it)
		}
		select {
		case todo <- b:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if len(b.items) < batchSize {
			return readErr, nil
		}
	}
}

// work solves the batches of todo and sends them to solved until todo is
// closed or ctx is done.
func work(ctx context.Context, todo <-chan *batch, solved chan<- *batch, sopts solver.Options) error {
	for b := range todo {
		if err := solveBatch(ctx, b, sopts); err != nil {
			return err
		}
		// A search cut short by ctx reports "gave up": drop the batch
		// rather than pass that on. ctx stays done once done, so a batch
		// that passes this check was solved in full.
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case solved <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// solveBatch parses and solves every item of b into b.results. A panic in
// the solver becomes an error naming the line, so that Run stops cleanly
// and the output so far is kept.
func solveBatch(ctx context.Context, b *batch, sopts solver.Options) (err error) {
	line := 0
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("local: line %d: solver panicked: %v", line, p)
		}
	}()
	b.results = b.results[:0]
	for _, it := range b.items {
		line = it.Line
		b.results = append(b.results, Solve(ctx, it, sopts))
	}
	return nil
}

// Solve parses and solves one input item and returns its result, with the
// item's line number. An item with an error, or text that does not parse,
// gives a StatusInvalid result. It is safe for concurrent use.
func Solve(ctx context.Context, it input.Item, opts solver.Options) result.Result {
	if it.Err != nil {
		return result.Invalid(it.Line, it.Text, it.Err)
	}
	g, err := solver.Parse(it.Text)
	if err != nil {
		return result.Invalid(it.Line, it.Text, err)
	}
	r, err := solver.Solve(ctx, &g, opts)
	res := result.FromSolve(&g, r, err)
	res.Line = it.Line
	return res
}

// collect passes the results of the batches arriving on solved to out in
// input order, holding back batches that arrive early, and returns each
// batch to free once passed on. At most window batches are ever in
// flight, so slot seq%window is free when batch seq arrives.
func collect(ctx context.Context, solved <-chan *batch, free chan<- *batch, window int,
	out func(result.Result) error, progress func(int)) error {
	pending := make([]*batch, window)
	next, done := 0, 0
	for b := range solved {
		if err := ctx.Err(); err != nil {
			return err
		}
		pending[b.seq%window] = b
		for {
			p := pending[next%window]
			if p == nil {
				break
			}
			pending[next%window] = nil
			for _, r := range p.results {
				if err := out(r); err != nil {
					return fmt.Errorf("local: %w", err)
				}
			}
			done += len(p.results)
			next++
			if progress != nil {
				progress(done)
			}
			free <- p // never blocks: free has room for every batch
		}
	}
	return ctx.Err()
}
