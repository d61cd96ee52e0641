// Package httpapi is the HTTP face of sudoku-queue, served by `sudoku
// serve`: a JSON API under /v1 for other programs (solve one puzzle,
// submit a job, follow it, stream its results, look up cached solutions),
// described by the OpenAPI document openapi.json served at
// /v1/openapi.json; a live dashboard at / for people, served from assets
// embedded in the binary; server-sent events with the service's figures
// at /v1/events; and the API's Prometheus metrics at /metrics.
//
// Each /v1 call is made for its caller (callers.go): the principal its
// bearer token names, else the server's own owner. A job is its
// submitter's: another caller may not read, follow or cancel it (403
// forbidden) unless its role acts for others, and GET /v1/jobs lists the
// caller's own jobs. A submission over one of its owner's quotas gets a
// 429 over_quota naming the quota.
//
// Errors are JSON, {"error":{"code":"...","message":"..."}}, with a
// stable code (see the Code constants): 4xx for the caller's mistakes,
// 503 with Retry-After when NATS is down (or, for a cache lookup, Redis),
// never a stack trace.
//
// A job's state and results live in JetStream; Redis is only a cache. So
// with Redis down every call but GET /v1/solutions (a cache lookup, which
// answers 503 cache_unavailable) goes on, slower: POST /v1/solve asks a
// worker, jobs are submitted and their results streamed as usual.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/metrics"
	"github.com/sudoku-queue/sudoku-queue/internal/monitor"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// Options tune a Server. The zero value works: no token, no other
// origin allowed (CORS off), the Host of the connection's address only, and
// the defaults of configs/sudoku.yaml, which internal/config takes from
// here (DefaultMaxBodyBytes, DefaultRequestTimeout) and from the producer
// (producer.DefaultBatchSize ...).
type Options struct {
	// Token, when not empty, is a bearer token of the server's own owner
	// (Producer.Owner). With a Token or Principals, every /v1 request
	// must carry one of their tokens (Authorization: Bearer TOKEN), and
	// is made for its principal. The dashboard page, its assets,
	// /v1/openapi.json, /metrics, /healthz and /readyz stay public.
	Token string
	// Principals are callers with a token each (ParseTokens reads them
	// from serve.token): a request with a principal's token is made for
	// it, the owner of the jobs it submits.
	Principals []Principal
	// OwnerHeader lets a request to a server without any token name its
	// caller in the X-Sudoku-Owner header (default: the server's own
	// owner). It is a name, not a proof: for roles off, on loopback or
	// behind a proxy that sets the header itself. A request that sends
	// the header to a server that does not take it gets a 400.
	OwnerHeader bool
	// AllowNoToken lets Serve listen on an address other than loopback
	// without a Token, which it otherwise refuses (see CheckExposed).
	AllowNoToken bool
	// Addr is the listen address as configured (serve.addr), such as
	// sudoku.example:8080: its host:port is a Host the server answers,
	// besides the address of each connection's own end (on loopback, in
	// its localhost forms too). Optional.
	Addr string
	// AllowedHosts are more Host header values the server answers: "name"
	// on any port, "name:port", or "*" for any. Requests with another
	// Host get a 403 host_not_allowed (against DNS rebinding), except
	// /healthz and /readyz (probes may name the server as they like).
	AllowedHosts []string
	// MaxBodyBytes bounds a request's body (default DefaultMaxBodyBytes);
	// larger ones get a 413.
	MaxBodyBytes int64
	// RequestTimeout bounds one request (default
	// DefaultRequestTimeout), the upload and
	// submission of a job included; the streams (job results, events) are
	// not bounded.
	RequestTimeout time.Duration
	// SolveTimeout bounds the wait for a worker in POST /v1/solve
	// (default 10s, at most RequestTimeout).
	SolveTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown of Serve (default 10s).
	ShutdownTimeout time.Duration
	// Producer are the settings of submitted jobs: batches, quotas
	// (Quota, and Usage to count an owner's open jobs), and Owner, the
	// server's own owner (default job.DefaultOwner), whose jobs callers
	// without a principal of their own submit. Each job's Owner is its
	// caller; its Logger is Logger.
	Producer producer.Options
	// Trust is the worker keys whose proofs vouch for answers (config
	// proof.trusted; producer.FollowOptions.Trust): nil trusts none, and
	// unique and gave_up answers are confirmed by solving.
	Trust *proof.Trust
	// AllowedOrigins are the origins of other sites whose pages may call
	// the API from a browser ("*" for any): they get CORS headers, and
	// their requests that may change something (POST...) are not refused.
	// Empty, the default, turns CORS off, and such requests from any
	// other origin get a 403 cross_origin, token or not.
	AllowedOrigins []string
	// HotCacheSize bounds the results kept in this process in front of the
	// cache for single-puzzle lookups (default 32768, about 15 MB; negative
	// turns it off). Only final results are kept (not gave_up): a puzzle's
	// answer never changes.
	HotCacheSize int
	// StatsInterval is the period of the dashboard's figures and events
	// (default 1s); StatsHistory how many periods the chart keeps (default
	// 300: five minutes).
	StatsInterval time.Duration
	StatsHistory  int
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
}

// The defaults of Options.MaxBodyBytes and RequestTimeout, and so of
// serve.max_body_bytes and serve.request_timeout.
const (
	DefaultMaxBodyBytes   = config.DefaultMaxBodyBytes
	DefaultRequestTimeout = config.DefaultRequestTimeout
)

func (o *Options) defaults() {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.SolveTimeout <= 0 {
		o.SolveTimeout = 10 * time.Second
	}
	o.SolveTimeout = min(o.SolveTimeout, o.RequestTimeout)
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
	if o.StatsInterval <= 0 {
		o.StatsInterval = time.Second
	}
	if o.StatsHistory <= 0 {
		o.StatsHistory = 300
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Producer.Logger = o.Logger
	if o.HotCacheSize == 0 {
		o.HotCacheSize = 1 << 15
	}
}

// Server serves the API and the dashboard for one queue and cache. Create
// it with New, serve Handler (or call Serve), and Close it. It is safe for
// concurrent use.
type Server struct {
	nc    *nats.Conn
	q     *queue.Queue
	cache *cache.Guard
	// client acts for each caller (client.Client.As): jobs, solving,
	// the cache.
	client  *client.Client
	opts    Options
	log     *slog.Logger
	metrics *metrics.API
	hot     *cache.Hot
	stats   *monitor.Monitor
	// jetstream is /readyz's probe of JetStream.
	jetstream *metrics.JetStreamProbe
	// hosts and origins guard every request (guard.go).
	hosts   *hostGuard
	origins *originGuard
	// callers says who makes each /v1 request (callers.go).
	callers *callers
	mux     *http.ServeMux
	handler http.Handler
	// patterns are the registered patterns, for the tests.
	patterns []string

	// streams ends the long-lived answers (job results, events) at
	// shutdown, which http.Server.Shutdown does not do.
	streams    context.Context
	endStreams context.CancelFunc
	closeOnce  sync.Once
}

// New returns a server for the queue q (set up with queue.Setup) and the
// cache c (nil for none), and starts its statistics: it subscribes to the
// workers' events. Close stops them.
func New(q *queue.Queue, c *cache.Guard, opts Options) (*Server, error) {
	opts.defaults()
	hosts, err := newHostGuard(opts.Addr, opts.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	origins, err := newOriginGuard(opts.AllowedOrigins)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	callers, err := newCallers(&opts)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	if c == nil {
		c = cache.NewGuard(nil, cache.GuardOptions{})
	}
	s := &Server{
		nc:        q.JS.Conn(),
		q:         q,
		cache:     c,
		client:    client.New(&app.Conn{NC: q.JS.Conn(), JS: q.JS, Queue: q, Cache: c, Trust: opts.Trust}, opts.Producer),
		opts:      opts,
		log:       opts.Logger,
		metrics:   metrics.NewAPI(),
		hot:       cache.NewHot(opts.HotCacheSize),
		jetstream: metrics.NewJetStreamProbe(q.JS, q.Opts.Stream),
		hosts:     hosts,
		origins:   origins,
		callers:   callers,
		mux:       http.NewServeMux(),
	}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	if s.stats, err = newMonitor(s); err != nil {
		s.endStreams()
		return nil, err
	}
	s.routes()
	s.handler = s.metrics.Instrument(s.mux)
	// With tracing on, a SERVER span a request, named after its route.
	s.handler = telemetry.HTTPHandler(s.handler, s.mux)
	return s, nil
}

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the registry of the API's metrics, served at /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.Registry() }

// Close ends the streams in progress and stops the statistics. It does
// not close the queue or the cache. It is safe to call twice.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.endStreams()
		s.stats.Close()
	})
}

// routeKind says how a route is served.
type routeKind uint8

const (
	// apiRoute: a /v1 call bounded by RequestTimeout, behind the token,
	// made for its caller.
	apiRoute routeKind = iota
	// streamRoute: a /v1 stream, behind the token, made for its caller,
	// without a time bound.
	streamRoute
	// publicRoute: no token, bounded by RequestTimeout.
	publicRoute
	// probeRoute: a publicRoute that answers any Host (/healthz, /readyz:
	// probes name the server as they like, and learn nothing else).
	probeRoute
)

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// routes registers every route. openapi.json describes the /v1 ones; a
// test checks that the two agree.
func (s *Server) routes() {
	s.handle("POST /v1/solve", apiRoute, s.postSolve)
	s.handle("GET /v1/solutions/{key}", apiRoute, s.getSolutionByKey)
	s.handle("GET /v1/solutions", apiRoute, s.getSolutionByPuzzle)
	s.handle("POST /v1/jobs", apiRoute, s.postJobs)
	s.handle("GET /v1/jobs", apiRoute, s.listJobs)
	s.handle("GET /v1/jobs/{id}", apiRoute, s.getJob)
	s.handle("POST /v1/jobs/{id}/cancel", apiRoute, s.cancelJob)
	s.handle("GET /v1/jobs/{id}/results", streamRoute, s.getResults)
	s.handle("GET /v1/stats", apiRoute, s.getStats)
	s.handle("GET /v1/events", streamRoute, s.getEvents)
	s.handle("GET /v1/openapi.json", publicRoute, s.getOpenAPI)
	s.handle("/v1/", publicRoute, s.notFound)

	s.handle("GET /{$}", publicRoute, s.getIndex)
	s.handle("GET /static/", publicRoute, s.getStatic)
	s.handle("GET /healthz", probeRoute, s.getHealthz)
	s.handle("GET /readyz", probeRoute, s.getReadyz)
	s.mux.Handle("GET /metrics", s.guarded(s.metrics.Handler()))
}

// handle registers h for pattern with the common parts of every answer:
// CORS, the Host and Origin guards, the token and the caller (callerOf),
// the time bound, errors as JSON, panics as 500s.
func (s *Server) handle(pattern string, kind routeKind, h handlerFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.cors(w, r)
		if e := s.guard(r, kind == probeRoute); e != nil {
			s.log.Debug("httpapi: refused", "route", pattern, "code", e.Code, "host", r.Host, "origin", r.Header.Get("Origin"))
			e.write(w)
			return
		}
		if kind == apiRoute || kind == streamRoute {
			caller, e := s.callers.of(r)
			if e != nil {
				s.log.Debug("httpapi: refused", "route", pattern, "code", e.Code)
				e.write(w)
				return
			}
			r = withCaller(r, caller)
		}
		rc := http.NewResponseController(w)
		if kind != streamRoute {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
			deadline := time.Now().Add(s.opts.RequestTimeout)
			boundBody(r, rc, deadline)
			_ = rc.SetWriteDeadline(deadline.Add(time.Second))
		}
		_, ok := metrics.Status(w)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("httpapi: panic", "route", pattern, "panic", p, "stack", string(debug.Stack()))
				if status, _ := metrics.Status(w); ok && status == 0 {
					internalError(fmt.Errorf("panic: %v", p)).write(w)
					return
				}
				panic(http.ErrAbortHandler)
			}
		}()
		err := h(w, r)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			e = internalError(err)
		}
		switch {
		case e.Status >= 500:
			s.log.Warn("httpapi: request failed", "route", pattern, "code", e.Code, "err", err)
		default:
			s.log.Debug("httpapi: bad request", "route", pattern, "code", e.Code, "err", err)
		}
		if status, _ := metrics.Status(w); ok && status != 0 {
			// The answer has begun: the only way left to say it failed is to
			// cut it short, so the client does not take it for complete.
			panic(http.ErrAbortHandler)
		}
		e.write(w)
	})
}

// boundBody bounds the reading of r's body by deadline, if it has one.
// A request without a body gets no read deadline: net/http watches its
// connection for the client going away from the start, and a read
// deadline firing during that watch would cancel the context of every
// later request on the connection. (Once a body is read to its end,
// net/http lifts the deadline itself before it watches.)
func boundBody(r *http.Request, rc *http.ResponseController, deadline time.Time) {
	if r.Body != nil && r.Body != http.NoBody {
		_ = rc.SetReadDeadline(deadline)
	}
}

// cors sets the CORS headers for an allowed origin (preflight requests
// are answered by notFound). With no origins configured it does nothing:
// browsers then refuse other sites' calls.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if len(s.opts.AllowedOrigins) == 0 || origin == "" {
		return
	}
	allowed := false
	for _, o := range s.opts.AllowedOrigins {
		if o == "*" || o == origin {
			allowed = true
			break
		}
	}
	if !allowed {
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
}

// preflight answers a CORS preflight request (OPTIONS with
// Access-Control-Request-Method): with the allowed methods and headers
// when cors has allowed the origin, else without, which the browser takes
// as a refusal.
func (s *Server) preflight(w http.ResponseWriter) {
	h := w.Header()
	if h.Get("Access-Control-Allow-Origin") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, "+OwnerHeader)
		h.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}

// notFound answers what no /v1 route matches: a 405 with Allow when the
// path exists for other methods, a CORS preflight when it is one, else a
// 404.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if m == r.Method {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := s.mux.Handler(r2); p != "/v1/" && p != "" {
			allow = append(allow, m)
		}
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" &&
		len(s.opts.AllowedOrigins) > 0 && len(allow) > 0 {
		s.preflight(w)
		return nil
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		return errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s %s: method not allowed (allowed: %s)",
			r.Method, r.URL.Path, strings.Join(allow, ", "))
	}
	return errorf(http.StatusNotFound, CodeNotFound, "no such route: %s %s (see /v1/openapi.json)", r.Method, r.URL.Path)
}

// getHealthz says the process is up.
func (s *Server) getHealthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// getReadyz says whether the queue works: NATS connected, and JetStream
// answering for the work stream (a server without JetStream answers
// pings while every submit fails). Redis is only a cache: the API works
// without it, slower; the answer tells the cache's state too.
func (s *Server) getReadyz(w http.ResponseWriter, r *http.Request) error {
	if !s.nc.IsConnected() {
		return notReady(fmt.Errorf("NATS is not connected (%s)", strings.ToLower(s.nc.Status().String())))
	}
	if err := s.jetstream.Check(r.Context()); err != nil {
		return notReady(err)
	}
	state, _ := monitor.CacheState(s.cache)
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "cache": state})
	return nil
}

// Serve serves the API on ln until ctx is done, then shuts down
// gracefully: it stops accepting, ends the streams, and waits up to
// ShutdownTimeout for the requests in progress. It returns nil after a
// clean shutdown. Call it once: the streams of the server stay ended. It
// does not Close the server. It refuses, with an error wrapping
// ErrNoToken, a listener on an address other than loopback when the
// server has no Token, unless AllowNoToken.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.callers.open() && !s.opts.AllowNoToken && !listenerLoopback(ln) {
		return fmt.Errorf("httpapi: %w", exposedError(ln.Addr().String()))
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	hs.RegisterOnShutdown(s.endStreams)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.log.Info("sudoku serve: listening", "addr", "http://"+ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("httpapi: serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("sudoku serve: shutting down", "timeout", s.opts.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		_ = hs.Close()
		return fmt.Errorf("httpapi: shutdown: %w", err)
	}
	return nil
}
