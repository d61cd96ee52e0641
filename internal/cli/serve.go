package cli

import (
	"net"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/httpapi"
)

func init() { addCommand(newServeCmd) }

func newServeCmd() *cobra.Command {
	var (
		addr     string
		embedded bool
		cors     []string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API and the live web dashboard",
		Long: `Serve the JSON API under /v1 (described at /v1/openapi.json), the web
dashboard at /, and the API's Prometheus metrics at /metrics, on serve.addr
(default 127.0.0.1:8080; --addr overrides it).

It connects to NATS and Redis like 'sudoku submit', for workers started
elsewhere. With --embedded it runs alone like 'sudoku solve': an embedded
NATS server, a worker pool in this process, and Redis if it answers (else a
cache in memory).

serve.token (from $SUDOKU_SERVE_TOKEN or serve.token_file) makes every /v1
call need "Authorization: Bearer TOKEN". serve.max_body_bytes bounds a
request's body, serve.request_timeout its handling. On SIGINT or SIGTERM it
stops accepting, ends the streams and finishes the requests in progress.`,
		Example: `  sudoku serve --embedded
  sudoku serve --addr 0.0.0.0:8080 --nats-url nats://nats:4222 --redis-addrs redis:6379
  curl -s localhost:8080/v1/solve --data-binary @puzzle.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, log, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("addr") {
				if _, _, err := net.SplitHostPort(addr); err != nil {
					return usageErrorf("--addr %q: want host:port: %w", addr, err)
				}
				cfg.Serve.Addr = addr
			}
			oo := app.OpenOptions{Embedded: embedded, AllowMemoryCache: embedded, Drain: true}
			conn, err := app.Open(ctx, cfg, oo, log)
			if err != nil {
				return err
			}
			defer conn.Close()
			if embedded {
				stop := startLocalWorker(ctx, workerOptions(cfg, log), log, conn)
				defer stop()
			}
			ln, err := net.Listen("tcp", cfg.Serve.Addr)
			if err != nil {
				return listenError("serve.addr", cfg.Serve.Addr, err)
			}
			srv, err := httpapi.New(conn.Queue, conn.Cache, httpapi.Options{
				Token:          cfg.Serve.Token.Reveal(),
				MaxBodyBytes:   cfg.Serve.MaxBodyBytes,
				RequestTimeout: cfg.Serve.RequestTimeout,
				Producer:       producerOptions(cfg, log, false, false),
				AllowedOrigins: cors,
				Logger:         log,
			})
			if err != nil {
				_ = ln.Close()
				return err
			}
			defer srv.Close()
			logStart(log, "sudoku serve starting", cfg, "embedded", embedded, "memory_cache", conn.MemoryCache,
				"auth", cfg.Serve.Token != "")
			return srv.Serve(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", config.Default().Serve.Addr, "listen on this `host:port` (serve.addr, $SUDOKU_SERVE_ADDR)")
	cmd.Flags().BoolVar(&embedded, "embedded", false, "run alone: embedded NATS, in-process workers, Redis or memory")
	cmd.Flags().StringSliceVar(&cors, "cors-origin", nil, "allow browser calls from these `origins` (\"*\": any); default: CORS off")
	config.AddKeyFlags(cmd.Flags(), keyNATSURL, keyRedisAddrs, keyBatchSize, keyWorkerConcurrency)
	natsFlag := cmd.Flags().Lookup(config.FlagName(keyNATSURL))
	natsFlag.Usage = "without --embedded, " + natsFlag.Usage
	workersFlag := cmd.Flags().Lookup(config.FlagName(keyWorkerConcurrency))
	workersFlag.Usage = "with --embedded, " + workersFlag.Usage
	return cmd
}
