package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/monitor"
)

// Stats is the service at a glance, as the dashboard shows it: the
// answer of GET /v1/stats and the data of each "stats" event of
// /v1/events. Its figures (monitor.Figures) are the same for every
// caller; its jobs are the caller's.
type Stats struct {
	monitor.Figures
	// Jobs are the caller's newest jobs (every owner's for a caller whose
	// role reads others' jobs), newest first; absent, with JobsError
	// saying why, when JetStream does not answer.
	Jobs      []Job  `json:"jobs"`
	JobsError string `json:"jobs_error,omitempty"`
}

// QueueStats are the work consumer's figures.
type QueueStats = monitor.QueueStats

// CacheStats count the puzzles this API process looked up in the cache
// (POST /v1/solve, GET /v1/solutions, POST /v1/jobs) since it started.
type CacheStats = monitor.CacheStats

// dashboardJobs is how many jobs the dashboard lists.
const dashboardJobs = 10

// newMonitor starts the figures of s (monitor.New), whose snapshots for
// the /v1/events clients of an owner carry that owner's jobs.
func newMonitor(s *Server) (*monitor.Monitor, error) {
	return monitor.New(s.nc, s.q, s.cache, monitor.Options{
		Interval: s.opts.StatsInterval,
		History:  s.opts.StatsHistory,
		Lookups:  s.metrics.Lookups,
		Render: func(ctx context.Context, owners []string) [][]byte {
			shots := s.snapshots(ctx, false, owners)
			out := make([][]byte, len(shots))
			for i := range shots {
				out[i], _ = json.Marshal(&shots[i])
			}
			return out
		},
	})
}

// snapshot gathers the figures now, asking NATS within ctx, with owner's
// jobs ("": every owner's); withHistory adds the rate history.
func (s *Server) snapshot(ctx context.Context, withHistory bool, owner string) Stats {
	return s.snapshots(ctx, withHistory, []string{owner})[0]
}

// snapshots gathers the figures now, asking NATS within ctx: one Stats
// per owner of owners, alike but for the jobs, which are that owner's
// ("": every owner's); withHistory adds the rate history.
func (s *Server) snapshots(ctx context.Context, withHistory bool, owners []string) []Stats {
	var f monitor.Figures
	var wg sync.WaitGroup
	wg.Go(func() { f = s.stats.Figures(ctx, withHistory) })
	out := make([]Stats, len(owners))
	for i, owner := range owners {
		wg.Go(func() {
			jobs, err := s.jobViews(ctx, owner, dashboardJobs)
			if err != nil {
				out[i].JobsError = "JetStream is not answering: " + err.Error()
			} else {
				out[i].Jobs = jobs
			}
		})
	}
	wg.Wait()
	for i := range out {
		out[i].Figures = f
	}
	return out
}

// getStats answers GET /v1/stats: the figures now, with the rate history
// and the jobs GET /v1/jobs lists for the caller.
func (s *Server) getStats(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	st := s.snapshot(ctx, true, listOwner(callerOf(r)))
	writeJSON(w, http.StatusOK, &st)
	return nil
}

// getEvents answers GET /v1/events: server-sent events, one "stats" event
// (a Stats, the first with its History) per period, until the client goes
// away or the server shuts down. The jobs in them are those GET /v1/jobs
// lists for the caller.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) error {
	owner := listOwner(callerOf(r))
	ch, cancel := s.stats.Subscribe(owner)
	defer cancel()
	defer s.metrics.StreamStarted()()
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
	first := s.snapshot(ctx, true, owner)
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
