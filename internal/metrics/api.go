package metrics

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// API are the Prometheus metrics of sudoku serve's HTTP API, on a
// registry of their own (with the Go runtime's and the process's
// collectors):
//
//	sudoku_api_requests_total{route,code}        requests answered, by route pattern and status code
//	sudoku_api_request_duration_seconds{route}   histogram of the time to answer (streams: their whole life)
//	sudoku_api_requests_in_flight                requests being answered now
//	sudoku_api_cache_lookups_total{result}       puzzles looked up in the cache by the API: hit or miss
//	sudoku_api_event_streams                     dashboards (or others) following /v1/events
//
// The route is the pattern that matched ("GET /v1/jobs/{id}"), so ids do
// not make new series; requests no route matched count as "unmatched".
type API struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	inFlight  prometheus.Gauge
	lookups   *prometheus.CounterVec
	hits      prometheus.Counter
	misses    prometheus.Counter
	streams   prometheus.Gauge
	hitCount  atomic.Int64 // the same as hits and misses, readable cheaply for the dashboard
	missCount atomic.Int64
}

// NewAPI returns the API's metrics, at zero.
func NewAPI() *API {
	m := &API{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sudoku", Subsystem: "api", Name: "requests_total",
		Help: "HTTP requests answered, by route pattern and status code.",
	}, []string{"route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sudoku", Subsystem: "api", Name: "request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route pattern (streams count their whole life).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "sudoku", Subsystem: "api", Name: "requests_in_flight",
		Help: "HTTP requests being answered now.",
	})
	m.lookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sudoku", Subsystem: "api", Name: "cache_lookups_total",
		Help: "Puzzles the API looked up in the result cache (solve, solutions, jobs), by result: hit or miss.",
	}, []string{"result"})
	m.hits, m.misses = m.lookups.WithLabelValues("hit"), m.lookups.WithLabelValues("miss")
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "sudoku", Subsystem: "api", Name: "event_streams",
		Help: "Clients following /v1/events now.",
	})
	m.reg.MustRegister(m.requests, m.duration, m.inFlight, m.lookups, m.streams,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// CacheLookups counts lookups in the cache: hits and misses.
func (m *API) CacheLookups(hits, misses int64) {
	if hits > 0 {
		m.hits.Add(float64(hits))
		m.hitCount.Add(hits)
	}
	if misses > 0 {
		m.misses.Add(float64(misses))
		m.missCount.Add(misses)
	}
}

// Lookups returns the hits and misses CacheLookups counted.
func (m *API) Lookups() (hits, misses int64) { return m.hitCount.Load(), m.missCount.Load() }

// StreamStarted counts a client following /v1/events until the returned
// done is called.
func (m *API) StreamStarted() (done func()) {
	m.streams.Inc()
	return m.streams.Dec
}

// Registry returns the registry of the metrics.
func (m *API) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *API) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Instrument counts and times every request through next (a ServeMux,
// which sets Request.Pattern on the request it is given). The writer
// next is given tells Status the status of its answer.
func (m *API) Instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			if p := recover(); p != nil {
				// An answer cut short (http.ErrAbortHandler) or a panic the
				// handler did not catch: count it, and let net/http handle it.
				m.requests.WithLabelValues(route, "aborted").Inc()
				m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
				panic(p)
			}
			m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
			m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// Status returns the status of the answer begun on w, a writer
// Instrument gave (ok false for another): 0 while none is begun.
func Status(w http.ResponseWriter) (status int, ok bool) {
	sw, ok := w.(*statusWriter)
	if !ok {
		return 0, false
	}
	return sw.status, true
}

// statusWriter remembers the status of an answer. It passes Flush,
// Hijack and (through Unwrap) the deadlines of http.ResponseController
// on to the writer it wraps.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered to the client.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack lets net/http take the connection over (not used by the API).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("metrics: the response writer cannot be hijacked")
	}
	return h.Hijack()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
