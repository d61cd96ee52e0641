package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness check: Name says what is checked ("nats",
// "redis"), and Func returns nil when it is ready, or why not. Func gets a
// context bounded by CheckTimeout.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// CheckTimeout bounds each readiness check of a /readyz request.
const CheckTimeout = 2 * time.Second

// Handler returns the HTTP handler of a worker's endpoints:
//
//	GET /metrics  the metrics of g, in Prometheus's text (or negotiated) format
//	GET /healthz  200 "ok" while the process serves HTTP at all (liveness)
//	GET /readyz   200 with one "name: ok" line per check when every check
//	              passes, else 503 with "name: reason" for each failing one
//
// Checks run one after the other on each /readyz request.
func Handler(g prometheus.Gatherer, checks ...Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		// A failing collector (the process collector without /proc) must
		// not hide every other metric.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		ready := true
		for _, c := range checks {
			ctx, cancel := context.WithTimeout(r.Context(), CheckTimeout)
			err := c.Func(ctx)
			cancel()
			if err != nil {
				ready = false
				fmt.Fprintf(&b, "%s: %v\n", c.Name, err)
			} else {
				fmt.Fprintf(&b, "%s: ok\n", c.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, b.String())
	})
	return mux
}

// ShutdownTimeout bounds how long Server.Run waits for requests in
// progress once its context is done.
const ShutdownTimeout = 5 * time.Second

// Server is an HTTP server for Handler, bound to its address by Listen
// and serving from Run.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr (host:port; port 0 picks a free one) for h, so that a
// busy or bad address fails at start-up rather than in the background.
// Call Run to serve.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return &Server{ln: ln, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}}, nil
}

// Addr returns the address the server listens on (with the port chosen
// when Listen was given port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx is done, then shuts the server down, waiting up to
// ShutdownTimeout for requests in progress. It returns nil after a clean
// shutdown, or the error that stopped the server.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve on %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("metrics: shut down %s: %w", s.Addr(), err)
	}
	return nil
}

// Serve listens on addr and serves the metrics of g and the checks (see
// Handler) until ctx is done, then shuts down gracefully. It logs the
// address it serves on.
func Serve(ctx context.Context, addr string, g prometheus.Gatherer, log *slog.Logger, checks ...Check) error {
	s, err := Listen(addr, Handler(g, checks...))
	if err != nil {
		return err
	}
	log.Info("metrics: serving /metrics, /healthz and /readyz", "addr", s.Addr())
	return s.Run(ctx)
}

// NATSCheck is the readiness check of a NATS connection: connected, and
// the server answers a round trip (a flush) in time.
func NATSCheck(nc *nats.Conn) Check {
	return Check{Name: "nats", Func: func(ctx context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("not connected (%s)", strings.ToLower(nc.Status().String()))
		}
		if err := nc.FlushWithContext(ctx); err != nil {
			return fmt.Errorf("no answer from %s: %w", nc.ConnectedUrlRedacted(), err)
		}
		return nil
	}}
}

// PingCheck is a readiness check named name that calls ping, such as a
// cache's Ping. (`sudoku worker` has none for Redis: it is only a cache,
// and a worker without it is ready, slower.)
func PingCheck(name string, ping func(ctx context.Context) error) Check {
	return Check{Name: name, Func: ping}
}
