package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Stats is the service at a glance, as the dashboard shows it: the
// answer of GET /v1/stats and the data of each "stats" event of
// /v1/events.
type Stats struct {
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
	// to Options.StatsHistory of them). Only GET /v1/stats and the first
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
	// Jobs are the caller's newest jobs (every owner's for a caller whose
	// role reads others' jobs), newest first; absent, with JobsError
	// saying why, when JetStream does not answer.
	Jobs      []Job  `json:"jobs"`
	JobsError string `json:"jobs_error,omitempty"`
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

// dashboardJobs is how many jobs the dashboard lists.
const dashboardJobs = 10

// statsHub keeps the figures of the service: it counts the puzzles of the
// workers' events (queue.Event: one per batch done, one per puzzle of the
// solve endpoint), keeps their rate over the last periods, and
// sends a snapshot to every /v1/events client each period.
type statsHub struct {
	s      *Server
	subs   []*nats.Subscription
	solved atomic.Int64

	mu      sync.Mutex
	history []float64 // solved per second, oldest first
	last    float64   // the newest value of history
	// clients are the /v1/events clients' channels, each with the owner
	// whose jobs it sees ("": every owner's, listOwner).
	clients map[chan []byte]string

	stop chan struct{}
	done chan struct{}
}

// newStatsHub subscribes to the workers' events of every job and of
// single puzzles, and starts the periodic snapshot. The two are
// subscribed apart (P.events.*.> for jobs, whose ids are two tokens, and
// P.events.solve), not as P.events.>: with roles on, a user may follow
// the events of the owners it reads, which is every job's for a gateway,
// without being let see every subject under P.events.
func newStatsHub(s *Server) (*statsHub, error) {
	h := &statsHub{s: s, clients: map[chan []byte]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	count := func(m *nats.Msg) {
		var ev queue.Event
		if json.Unmarshal(m.Data, &ev) == nil && ev.N > 0 {
			h.solved.Add(int64(ev.N))
		}
	}
	for _, subject := range []string{s.q.Opts.EventSubject("*.>"), s.q.Opts.EventSubject("solve")} {
		sub, err := s.nc.Subscribe(subject, count)
		if err != nil {
			h.unsubscribe()
			return nil, fmt.Errorf("subscribe to the workers' events: %w", err)
		}
		h.subs = append(h.subs, sub)
	}
	go h.run()
	return h, nil
}

// unsubscribe ends the subscriptions to the workers' events.
func (h *statsHub) unsubscribe() {
	for _, sub := range h.subs {
		_ = sub.Unsubscribe()
	}
}

// close stops the hub.
func (h *statsHub) close() {
	close(h.stop)
	<-h.done
	h.unsubscribe()
}

// run measures the rate each period and sends a snapshot to the clients.
func (h *statsHub) run() {
	defer close(h.done)
	interval := h.s.opts.StatsInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	prev, prevT := h.solved.Load(), time.Now()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
		n, now := h.solved.Load(), time.Now()
		rate := float64(n-prev) / max(now.Sub(prevT).Seconds(), 1e-9)
		prev, prevT = n, now
		h.mu.Lock()
		h.history = append(h.history, rate)
		if over := len(h.history) - h.s.opts.StatsHistory; over > 0 {
			h.history = append(h.history[:0], h.history[over:]...)
		}
		h.last = rate
		watchers := map[string][]chan []byte{} // by the owner whose jobs they see
		for ch, owner := range h.clients {
			watchers[owner] = append(watchers[owner], ch)
		}
		h.mu.Unlock()
		if len(watchers) == 0 {
			continue // nobody is watching: spare NATS the questions
		}
		owners := make([]string, 0, len(watchers))
		for o := range watchers {
			owners = append(owners, o)
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval*9/10)
		shots := h.snapshots(ctx, false, owners)
		cancel()
		for i, o := range owners {
			data, err := json.Marshal(&shots[i])
			if err != nil {
				continue
			}
			h.broadcast(data, watchers[o])
		}
	}
}

// broadcast hands data to each client of chs, replacing an event a slow
// client has not taken yet: the newest figures are what matter.
func (h *statsHub) broadcast(data []byte, chs []chan []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range chs {
		if _, ok := h.clients[ch]; !ok {
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

// subscribe returns a channel of snapshots (JSON) with owner's jobs (""
// for every owner's) and its cancellation.
func (h *statsHub) subscribe(owner string) (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	h.mu.Lock()
	h.clients[ch] = owner
	h.mu.Unlock()
	h.s.metrics.streams.Inc()
	return ch, func() {
		h.mu.Lock()
		delete(h.clients, ch)
		h.mu.Unlock()
		h.s.metrics.streams.Dec()
	}
}

// snapshot gathers the figures now, asking NATS within ctx, with owner's
// jobs ("": every owner's); withHistory adds the rate history.
func (h *statsHub) snapshot(ctx context.Context, withHistory bool, owner string) Stats {
	return h.snapshots(ctx, withHistory, []string{owner})[0]
}

// snapshots gathers the figures now, asking NATS within ctx: one Stats
// per owner of owners, alike but for the jobs, which are that owner's
// ("": every owner's); withHistory adds the rate history.
func (h *statsHub) snapshots(ctx context.Context, withHistory bool, owners []string) []Stats {
	st := Stats{Time: time.Now().UTC(), IntervalSeconds: h.s.opts.StatsInterval.Seconds(), SolvedTotal: h.solved.Load()}
	h.mu.Lock()
	st.SolvedPerSecond = h.last
	if withHistory {
		st.History = append([]float64{}, h.history...)
	}
	h.mu.Unlock()

	m := h.s.metrics
	var since time.Time
	st.Cache.State, since = h.s.cacheState()
	if st.Cache.State == "down" {
		st.CacheError = "the result cache (Redis) is not answering since " + since.Format("15:04:05") +
			": jobs and single puzzles go on without it, slower"
	}
	st.Cache.Hits, st.Cache.Misses = m.hitCount.Load(), m.missCount.Load()
	if n := st.Cache.Hits + st.Cache.Misses; n > 0 {
		r := float64(st.Cache.Hits) / float64(n)
		st.Cache.HitRatio = &r
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		qs, err := h.queueStats(ctx)
		if err != nil {
			st.QueueError = "NATS is not answering: " + err.Error()
			return
		}
		st.Queue = qs
		n, err := h.workers(ctx)
		if err == nil {
			st.Workers = &n
		}
	}()
	out := make([]Stats, len(owners))
	for i, owner := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jobs, err := h.s.jobViews(ctx, owner, dashboardJobs)
			if err != nil {
				out[i].JobsError = "JetStream is not answering: " + err.Error()
			} else {
				out[i].Jobs = jobs
			}
		}()
	}
	wg.Wait()
	for i := range out {
		jobs, jobsErr := out[i].Jobs, out[i].JobsError
		out[i] = st
		out[i].Jobs, out[i].JobsError = jobs, jobsErr
	}
	return out
}

// cacheState returns the cache's state as this process last found it:
// "up", "down" (since when) or "none".
func (s *Server) cacheState() (string, time.Time) {
	if !s.cache.Enabled() {
		return "none", time.Time{}
	}
	if down, since := s.cache.Down(); down {
		return "down", since
	}
	return "up", time.Time{}
}

// queueStats asks the jobs' work consumers for their figures.
func (h *statsHub) queueStats(ctx context.Context) (*QueueStats, error) {
	if !h.s.nc.IsConnected() {
		return nil, fmt.Errorf("NATS: %s", h.s.nc.Status())
	}
	b, err := h.s.q.Backlog(ctx)
	if err != nil {
		return nil, err
	}
	return &QueueStats{Pending: b.Pending, AckPending: int(b.AckPending), Redelivered: int(b.Redelivered),
		Waiting: int(b.Waiting)}, nil
}

// pingWait is how long workers counts the answers to its question.
const pingWait = 250 * time.Millisecond

// workers counts the worker processes of this queue online
// (queue.Workers).
func (h *statsHub) workers(ctx context.Context) (int, error) {
	return queue.Workers(ctx, h.s.nc, h.s.q.Opts, pingWait, 0)
}

// getStats answers GET /v1/stats: the figures now, with the rate history
// and the jobs GET /v1/jobs lists for the caller.
func (s *Server) getStats(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	st := s.stats.snapshot(ctx, true, listOwner(callerOf(r)))
	writeJSON(w, http.StatusOK, &st)
	return nil
}

// getEvents answers GET /v1/events: server-sent events, one "stats" event
// (a Stats, the first with its History) per period, until the client goes
// away or the server shuts down. The jobs in them are those GET /v1/jobs
// lists for the caller.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) error {
	owner := listOwner(callerOf(r))
	ch, cancel := s.stats.subscribe(owner)
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // tell proxies not to buffer the stream
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(data []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := fmt.Fprintf(w, "event: stats\ndata: %s\n\n", data); err != nil {
			return err
		}
		return rc.Flush()
	}
	ctx, stop := context.WithTimeout(r.Context(), 2*time.Second)
	first := s.stats.snapshot(ctx, true, owner)
	stop()
	data, err := json.Marshal(&first)
	if err != nil {
		return internalError(err)
	}
	if _, err := fmt.Fprint(w, "retry: 2000\n"); err != nil {
		return nil
	}
	if err := send(data); err != nil {
		return nil
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.streams.Done():
			return nil
		case data := <-ch:
			if err := send(data); err != nil {
				return nil
			}
		}
	}
}
