// Package monitor keeps the figures of a sudoku-queue deployment as a
// dashboard shows them: the puzzles the workers complete (counted from
// their events) and their rate over the last periods, the work
// consumers' backlog, the workers online and the result cache's state.
// Each period it hands a snapshot to every subscriber. sudoku serve's
// GET /v1/stats and /v1/events are made of it.
package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Figures are the service at a glance, but for the jobs: what a
// dashboard shows every period.
type Figures struct {
	Time time.Time `json:"time"`
	// IntervalSeconds is the period of the figures and of the events.
	IntervalSeconds float64 `json:"interval_seconds"`
	// SolvedPerSecond is the rate of puzzles the workers completed (all
	// jobs, single puzzles included) over the last period; SolvedTotal
	// counts them since this server started. Both come from the workers'
	// events.
	SolvedPerSecond float64 `json:"solved_per_second"`
	SolvedTotal     int64   `json:"solved_total"`
	// History is SolvedPerSecond over the last periods, oldest first (up
	// to Options.History of them). Only GET /v1/stats and the first
	// event of a stream carry it; later events add one value each.
	History []float64 `json:"history,omitempty"`
	// Workers is the number of worker processes online: the instances of
	// the NATS micro service "sudoku" that answered within 250ms and serve
	// this queue's solve endpoint; absent when NATS does not answer.
	Workers *int `json:"workers"`
	// Queue describes the queue; absent, with QueueError saying why, when
	// NATS does not answer.
	Queue      *QueueStats `json:"queue"`
	QueueError string      `json:"queue_error,omitempty"`
	// Cache is the result cache's state and the hit ratio of the lookups
	// this API process made; CacheError, when set, says that the cache is
	// down (jobs and POST /v1/solve go on without it, slower).
	Cache      CacheStats `json:"cache"`
	CacheError string     `json:"cache_error,omitempty"`
}

// QueueStats are the work consumer's figures.
type QueueStats struct {
	// Pending is the number of batches (messages) waiting for a worker
	// (NumPending).
	Pending uint64 `json:"pending"`
	// AckPending is the number of batches delivered to workers and not yet
	// acknowledged: the batches in work (NumAckPending).
	AckPending int `json:"ack_pending"`
	// Redelivered is the number of batches delivered more than once and not
	// yet acknowledged (NumRedelivered): a worker died, timed out or
	// handed them back.
	Redelivered int `json:"redelivered"`
	// Waiting is the number of pull requests the workers have waiting
	// (NumWaiting).
	Waiting int `json:"waiting"`
}

// CacheStats count the puzzles this API process looked up in the cache
// (POST /v1/solve, GET /v1/solutions, POST /v1/jobs) since it started.
type CacheStats struct {
	// State is the cache as this process last found it: "up", "down"
	// (its lookups fail) or "none" (no cache configured).
	State  string `json:"state"`
	Hits   int64  `json:"hits"`
	Misses int64  `json:"misses"`
	// HitRatio is Hits / (Hits + Misses); absent before any lookup.
	HitRatio *float64 `json:"hit_ratio"`
}

// Options tune a Monitor.
type Options struct {
	// Interval is the period of the figures and of the snapshots
	// (default 1s); History how many periods of the rate are kept
	// (default 300: five minutes).
	Interval time.Duration
	History  int
	// Lookups returns the hits and misses of this process's cache
	// lookups (default: none).
	Lookups func() (hits, misses int64)
	// Render returns the snapshot (JSON) for the subscribers of each of
	// keys, made within ctx; it is called each period while some
	// subscriber is watching.
	Render func(ctx context.Context, keys []string) [][]byte
}

// Monitor counts the puzzles of the workers' events (queue.Event: one per
// batch done, one per puzzle of the solve endpoint), keeps their rate
// over the last periods, and sends a snapshot to every subscriber each
// period. It is safe for concurrent use.
type Monitor struct {
	nc     *nats.Conn
	q      *queue.Queue
	cache  *cache.Guard
	opts   Options
	subs   []*nats.Subscription
	solved atomic.Int64

	mu      sync.Mutex
	history []float64 // solved per second, oldest first
	last    float64   // the newest value of history
	// clients are the subscribers' channels, each with its key.
	clients map[chan []byte]string

	stop chan struct{}
	done chan struct{}
}

// New subscribes to the workers' events of every job and of single
// puzzles of queue q on nc, and starts the periodic snapshot; c is the
// result cache (nil for none). The two are subscribed apart
// (P.events.*.> for jobs, whose ids are two tokens, and P.events.solve),
// not as P.events.>: with roles on, a user may follow the events of the
// owners it reads, which is every job's for a gateway, without being let
// see every subject under P.events. Close stops it.
func New(nc *nats.Conn, q *queue.Queue, c *cache.Guard, opts Options) (*Monitor, error) {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.History <= 0 {
		opts.History = 300
	}
	if opts.Lookups == nil {
		opts.Lookups = func() (int64, int64) { return 0, 0 }
	}
	if c == nil {
		c = cache.NewGuard(nil, cache.GuardOptions{})
	}
	m := &Monitor{nc: nc, q: q, cache: c, opts: opts, clients: map[chan []byte]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	count := func(msg *nats.Msg) {
		var ev queue.Event
		if json.Unmarshal(msg.Data, &ev) == nil && ev.N > 0 {
			m.solved.Add(int64(ev.N))
		}
	}
	for _, subject := range []string{q.Opts.EventSubject("*.>"), q.Opts.EventSubject("solve")} {
		sub, err := nc.Subscribe(subject, count)
		if err != nil {
			m.unsubscribe()
			return nil, fmt.Errorf("subscribe to the workers' events: %w", err)
		}
		m.subs = append(m.subs, sub)
	}
	go m.run()
	return m, nil
}

// unsubscribe ends the subscriptions to the workers' events.
func (m *Monitor) unsubscribe() {
	for _, sub := range m.subs {
		_ = sub.Unsubscribe()
	}
}

// Close stops the monitor.
func (m *Monitor) Close() {
	close(m.stop)
	<-m.done
	m.unsubscribe()
}

// run measures the rate each period and sends a snapshot to the
// subscribers.
func (m *Monitor) run() {
	defer close(m.done)
	interval := m.opts.Interval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	prev, prevT := m.solved.Load(), time.Now()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		n, now := m.solved.Load(), time.Now()
		rate := float64(n-prev) / max(now.Sub(prevT).Seconds(), 1e-9)
		prev, prevT = n, now
		m.mu.Lock()
		m.history = append(m.history, rate)
		if over := len(m.history) - m.opts.History; over > 0 {
			m.history = append(m.history[:0], m.history[over:]...)
		}
		m.last = rate
		watchers := map[string][]chan []byte{} // by key
		for ch, key := range m.clients {
			watchers[key] = append(watchers[key], ch)
		}
		m.mu.Unlock()
		if len(watchers) == 0 || m.opts.Render == nil {
			continue // nobody is watching: spare NATS the questions
		}
		keys := make([]string, 0, len(watchers))
		for k := range watchers {
			keys = append(keys, k)
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval*9/10)
		shots := m.opts.Render(ctx, keys)
		cancel()
		for i, k := range keys {
			if shots[i] != nil {
				m.broadcast(shots[i], watchers[k])
			}
		}
	}
}

// broadcast hands data to each subscriber of chs, replacing a snapshot a
// slow one has not taken yet: the newest figures are what matter.
func (m *Monitor) broadcast(data []byte, chs []chan []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ch := range chs {
		if _, ok := m.clients[ch]; !ok {
			continue // gone meanwhile
		}
		select {
		case ch <- data:
		default:
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- data:
			default:
			}
		}
	}
}

// Subscribe returns a channel of the snapshots Options.Render makes for
// key, one a period, and its cancellation.
func (m *Monitor) Subscribe(key string) (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	m.mu.Lock()
	m.clients[ch] = key
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.clients, ch)
		m.mu.Unlock()
	}
}

// Figures gathers the figures now, asking NATS within ctx; withHistory
// adds the rate history.
func (m *Monitor) Figures(ctx context.Context, withHistory bool) Figures {
	f := Figures{Time: time.Now().UTC(), IntervalSeconds: m.opts.Interval.Seconds(), SolvedTotal: m.solved.Load()}
	m.mu.Lock()
	f.SolvedPerSecond = m.last
	if withHistory {
		f.History = append([]float64{}, m.history...)
	}
	m.mu.Unlock()

	var since time.Time
	f.Cache.State, since = CacheState(m.cache)
	if f.Cache.State == "down" {
		f.CacheError = "the result cache (Redis) is not answering since " + since.Format("15:04:05") +
			": jobs and single puzzles go on without it, slower"
	}
	f.Cache.Hits, f.Cache.Misses = m.opts.Lookups()
	if n := f.Cache.Hits + f.Cache.Misses; n > 0 {
		r := float64(f.Cache.Hits) / float64(n)
		f.Cache.HitRatio = &r
	}
	qs, err := m.queueStats(ctx)
	if err != nil {
		f.QueueError = "NATS is not answering: " + err.Error()
		return f
	}
	f.Queue = qs
	if n, err := queue.Workers(ctx, m.nc, m.q.Opts, pingWait, 0); err == nil {
		f.Workers = &n
	}
	return f
}

// pingWait is how long Figures counts the workers' answers to its
// question.
const pingWait = 250 * time.Millisecond

// CacheState returns the state of c as this process last found it:
// "up", "down" (since when) or "none".
func CacheState(c *cache.Guard) (string, time.Time) {
	if !c.Enabled() {
		return "none", time.Time{}
	}
	if down, since := c.Down(); down {
		return "down", since
	}
	return "up", time.Time{}
}

// queueStats asks the jobs' work consumers for their figures.
func (m *Monitor) queueStats(ctx context.Context) (*QueueStats, error) {
	if !m.nc.IsConnected() {
		return nil, fmt.Errorf("NATS: %s", m.nc.Status())
	}
	b, err := m.q.Backlog(ctx)
	if err != nil {
		return nil, err
	}
	return &QueueStats{Pending: b.Pending, AckPending: int(b.AckPending), Redelivered: int(b.Redelivered),
		Waiting: int(b.Waiting)}, nil
}
