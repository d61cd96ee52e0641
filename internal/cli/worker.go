package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/metrics"
)

func init() { addCommand(newWorkerCmd) }

func newWorkerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: pull batches from NATS JetStream, solve, store the results",
		Long: `Run one worker process. Any number of workers, on any number of
machines, share the work of one durable JetStream consumer. Each batch is
checked against its job's manifest, its puzzles looked up in the Redis
cache (unless the producer did), the misses solved, the batch's results
published to the results stream, and only then is the message
acknowledged; the new solutions then go to Redis. Redis is only a cache:
while it is down or full the worker solves without it. The worker also
serves the NATS micro service "sudoku": solve one puzzle, submit a bulk
job, a job's status (docs/protocol.md).

With metrics.addr set (--metrics-addr, SUDOKU_METRICS_ADDR), the worker
serves Prometheus metrics on /metrics, liveness on /healthz and readiness
(NATS connected, and JetStream answering for the work stream) on /readyz at
that address.

On SIGINT or SIGTERM the worker stops pulling, finishes the batches in work
within worker.shutdown_timeout (what is left is redelivered to others),
closes its connections and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, conn, err := openConn(cmd, app.OpenOptions{Worker: true, Drain: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			logStart(log, "sudoku worker starting", cfg, "version", app.ServiceVersion(), "stream", cfg.Queue.Stream,
				"concurrency", cfg.WorkerConcurrency(), "nice", cfg.Worker.Nice)
			ctx := cmd.Context()

			var m *metrics.Worker
			var srv *metrics.Server
			if cfg.Metrics.Addr != "" {
				m = metrics.NewWorker()
				conn.Cache.SetOnError(m.CacheError)
				m.SetCacheUp(func() bool { down, _ := conn.Cache.Down(); return conn.Cache.Enabled() && !down })
				stopping := metrics.Check{Name: "worker", Func: func(context.Context) error {
					if ctx.Err() != nil {
						return errors.New("shutting down")
					}
					return nil
				}}
				h := metrics.Handler(m.Registry(), stopping, metrics.NATSCheck(conn.NC),
					metrics.JetStreamCheck(conn.Queue.JS, conn.Queue.Opts.Stream))
				// Bind before working, so a busy address fails the start.
				if srv, err = metrics.Listen(cfg.Metrics.Addr, h); err != nil {
					return listenError("metrics.addr", cfg.Metrics.Addr, err)
				}
				log.Info("metrics: serving /metrics, /healthz and /readyz", "addr", srv.Addr())
			}
			opts := app.WorkerOptions(cfg, log)
			opts.Signer = conn.Signer
			if m != nil {
				opts.Observer = m
			}
			w := client.NewWorker(conn, opts, app.ProducerOptions(cfg, log))
			if srv == nil {
				return w.Run(ctx)
			}
			m.SetInFlight(w.InFlight)
			// The endpoints outlive the worker's shutdown, so the last
			// batches show in the metrics and /readyz says "shutting
			// down" meanwhile; they stop once the worker has.
			srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
			srvDone := make(chan struct{})
			go func() {
				defer close(srvDone)
				if err := srv.Run(srvCtx); err != nil {
					log.Error("metrics: server stopped; the worker goes on without it", "err", err)
				}
			}()
			err = w.Run(ctx)
			stopSrv()
			<-srvDone
			return err
		},
	}
	config.AddKeyFlags(cmd.Flags(), keyNATSURL, keyRedisAddrs, keyWorkerConcurrency, keyMetricsAddr)
	cmd.AddCommand(newWorkerHealthCmd())
	return cmd
}

func newWorkerHealthCmd() *cobra.Command {
	var ready bool
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Probe a running worker's /healthz (or /readyz): exit 0 if it answers 200",
		Long: `Ask the worker serving on metrics.addr (--metrics-addr,
SUDOKU_METRICS_ADDR, or the configuration file) whether it is alive
(/healthz) or, with --ready, ready (/readyz: NATS connected, JetStream
answering), print the answer and exit 0 on 200, 1 otherwise. A wildcard
host (0.0.0.0, ::) is asked on 127.0.0.1. It is the health check of the
container image, which has no curl or wget.`,
		Example: `  sudoku worker health --metrics-addr 127.0.0.1:9090
  SUDOKU_CONFIG=/etc/sudoku/cluster.yaml sudoku worker health --ready`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if cfg.Metrics.Addr == "" {
				return usageErrorf("metrics.addr is not set: there is no worker endpoint to probe")
			}
			path := "/healthz"
			if ready {
				path = "/readyz"
			}
			url, err := probeURL(cfg.Metrics.Addr, path)
			if err != nil {
				return usageErrorf("metrics.addr %q: %w", cfg.Metrics.Addr, err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				why := innermost(err).Error() // "connection refused"
				if ctx.Err() != nil && cmd.Context().Err() == nil {
					why = "no answer within 3s"
				}
				return &messageError{fmt.Sprintf("no worker answers on metrics.addr %s (GET %s: %s)", cfg.Metrics.Addr, url, why), err}
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			if err != nil {
				return fmt.Errorf("GET %s: %w", url, err)
			}
			if resp.StatusCode != http.StatusOK {
				// The first line: the reason, not a whole page.
				first, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
				if len(first) > 200 {
					first = first[:200] + "..."
				}
				return fmt.Errorf("GET %s: %s: %s", url, resp.Status, first)
			}
			_, err = cmd.OutOrStdout().Write(body)
			return err
		},
	}
	cmd.Flags().BoolVar(&ready, "ready", false, "probe /readyz (NATS connected) instead of /healthz")
	config.AddKeyFlags(cmd.Flags(), keyMetricsAddr)
	cmd.Flags().Lookup(config.FlagName(keyMetricsAddr)).Usage = "the worker's `host:port` to probe ($SUDOKU_METRICS_ADDR)"
	return cmd
}

// listenError says that listening on addr, the value of the setting key,
// failed, and the system's reason ("address already in use").
func listenError(key, addr string, err error) error {
	return &messageError{fmt.Sprintf("cannot listen on %s %s: %v", key, addr, innermost(err)), err}
}

// innermost returns the error at the end of err's chain: the system's
// reason, without the Go calls that led to it.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// probeURL returns the URL of path on the endpoint listening on addr,
// asking a wildcard or empty host on the loopback address.
func probeURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
