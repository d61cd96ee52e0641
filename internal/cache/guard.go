package cache

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// GuardOptions tune NewGuard.
type GuardOptions struct {
	// Name is what the logs call the cache (default "Redis").
	Name string
	// Timeout bounds each call (default 2s): a cache that hangs costs a
	// job at most this, once per backoff.
	Timeout time.Duration
	// MaxBackoff bounds the wait between probes of a cache that is down
	// (default 5s); the first wait is 250ms, doubling.
	MaxBackoff time.Duration
	// Logger receives one line when an outage starts and one when it
	// ends (default slog.Default()).
	Logger *slog.Logger
	// OnError, if set, is called with "get" or "put" and the error of
	// every failed call, for metrics.
	OnError func(op string, err error)
	// Down starts the guard in an outage (the caller found the cache
	// down and said so): the first calls probe it, and its recovery is
	// logged.
	Down bool
}

// Guard makes a cache best-effort, for callers that must never wait on
// it: a failed lookup is a miss, a failed write is dropped, and after a
// failure the cache is not called again until a backoff has passed (then
// one call probes it). Reads and writes are watched apart: a Redis that
// is full (noeviction) still answers lookups. A Guard on a nil cache is
// always empty. It is safe for concurrent use.
type Guard struct {
	c           Cache
	opts        GuardOptions
	read, write health
}

// health is the state of one kind of call.
type health struct {
	down    atomic.Bool
	since   atomic.Int64 // unix nanoseconds the outage began
	retryAt atomic.Int64 // unix nanoseconds of the next probe
	backoff atomic.Int64
}

// NewGuard wraps c (nil for no cache).
func NewGuard(c Cache, opts GuardOptions) *Guard {
	if opts.Name == "" {
		opts.Name = "Redis"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &Guard{c: c, opts: opts}
	if opts.Down && c != nil {
		now := time.Now()
		for _, h := range []*health{&g.read, &g.write} {
			h.down.Store(true)
			h.since.Store(now.UnixNano())
			h.backoff.Store(int64(250 * time.Millisecond))
		}
	}
	return g
}

// SetOnError sets GuardOptions.OnError; call it before using g.
func (g *Guard) SetOnError(f func(op string, err error)) { g.opts.OnError = f }

// Enabled reports whether there is a cache at all.
func (g *Guard) Enabled() bool { return g != nil && g.c != nil }

// Cache returns the wrapped cache (nil for none).
func (g *Guard) Cache() Cache {
	if g == nil {
		return nil
	}
	return g.c
}

// Down reports whether lookups are failing, and since when.
func (g *Guard) Down() (bool, time.Time) {
	if !g.Enabled() || !g.read.down.Load() {
		return false, time.Time{}
	}
	return true, time.Unix(0, g.read.since.Load())
}

// Get looks keys up; it returns nil (all misses) when there is no cache,
// while it is down, or when the lookup fails.
func (g *Guard) Get(ctx context.Context, keys []job.Key) []*job.Outcome {
	out, _ := g.Lookup(ctx, keys)
	return out
}

// SampleSize is how many keys of a batch LookupBatch looks up before the
// rest: a batch with a tenth of its puzzles cached is found so with a
// chance of 29 in 30, one with a fifth 1,250 in 1,251.
const SampleSize = 32

// LookupBatch is Lookup for the keys of a batch that may well have none
// cached (a new job's): it looks up SampleSize of them first, evenly
// spread, and the rest only when one of those is cached. A new batch
// then costs the cache SampleSize lookups instead of one a key (in Redis,
// a lookup costs a third of a write); the price is that a batch with few
// puzzles cached may have those solved again.
func (g *Guard) LookupBatch(ctx context.Context, keys []job.Key) ([]*job.Outcome, bool) {
	if len(keys) <= 2*SampleSize {
		return g.Lookup(ctx, keys)
	}
	stride := len(keys) / SampleSize
	sample := make([]job.Key, SampleSize)
	for i := range sample {
		sample[i] = keys[i*stride]
	}
	hits, ok := g.Lookup(ctx, sample)
	if !ok || !slices.ContainsFunc(hits, func(o *job.Outcome) bool { return o != nil }) {
		return nil, ok
	}
	return g.Lookup(ctx, keys)
}

// Lookup is Get, and reports whether the cache was asked and answered.
func (g *Guard) Lookup(ctx context.Context, keys []job.Key) ([]*job.Outcome, bool) {
	if !g.Enabled() || !g.read.allow() {
		return nil, false
	}
	if len(keys) == 0 {
		return nil, true
	}
	cctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	out, err := g.c.Get(cctx, keys)
	if err != nil {
		if ctx.Err() == nil {
			g.failed(&g.read, "get", "lookups", err)
		}
		return nil, false
	}
	g.ok(&g.read, "lookups")
	g.verify(ctx, keys, out)
	return out, true
}

// verify turns each hit that is not its key's right answer into a miss,
// with a warning: whoever can write the cache can store a well-formed
// value that lies (none, multiple, or a unique solution against the
// rules, under a solvable puzzle's key, or unique for a puzzle with
// several solutions). A solution is checked, and none, multiple and
// unique confirmed by solving (job.Outcome.Verify, Unproven: a
// cache value carries no worker's proof; the solver is fast, and the
// answer is then solved again and stored over the bad one).
// A value stored under another puzzle's key is a miss already (the
// cache's Get compares the keys).
func (g *Guard) verify(ctx context.Context, keys []job.Key, out []*job.Outcome) {
	for i, o := range out {
		if o == nil {
			continue
		}
		if err := o.Verify(ctx, true, job.Unproven); err != nil {
			out[i] = nil
			g.opts.Logger.Warn("cache: a value is not its puzzle's answer; ignored", "cache", g.opts.Name,
				"key", keys[i].String(), "status", o.Status, "err", err)
		}
	}
}

// Put stores entries, or drops them when there is no cache, while it is
// down, or when the write fails.
func (g *Guard) Put(ctx context.Context, entries []Entry) {
	if !g.Enabled() || len(entries) == 0 || !g.write.allow() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	if err := g.c.Put(cctx, entries); err != nil {
		if ctx.Err() == nil {
			g.failed(&g.write, "put", "writes", err)
		}
		return
	}
	g.ok(&g.write, "writes")
}

// allow reports whether a call may go ahead: always while up; while
// down, once per backoff (that call is the probe).
func (h *health) allow() bool {
	if !h.down.Load() {
		return true
	}
	now := time.Now().UnixNano()
	at := h.retryAt.Load()
	if now < at {
		return false
	}
	b := h.backoff.Load()
	return h.retryAt.CompareAndSwap(at, now+b)
}

func (g *Guard) failed(h *health, op, what string, err error) {
	if g.opts.OnError != nil {
		g.opts.OnError(op, err)
	}
	if !h.down.Swap(true) {
		now := time.Now()
		h.since.Store(now.UnixNano())
		h.backoff.Store(int64(250 * time.Millisecond))
		h.retryAt.Store(now.Add(250 * time.Millisecond).UnixNano())
		g.opts.Logger.Warn("cache: "+g.opts.Name+" "+what+" failing; going on without the cache until it recovers",
			"err", err)
		return
	}
	h.backoff.Store(min(2*h.backoff.Load(), int64(g.opts.MaxBackoff)))
}

func (g *Guard) ok(h *health, what string) {
	if h.down.Swap(false) {
		g.opts.Logger.Info("cache: "+g.opts.Name+" "+what+" are back",
			"outage", time.Since(time.Unix(0, h.since.Load())).Round(time.Millisecond))
	}
}
