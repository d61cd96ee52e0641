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
		addr         string
		embedded     bool
		noToken      bool
		origins      []string
		corsOrigins  []string
		allowedHosts []string
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
call need "Authorization: Bearer TOKEN". Without one, serve listens on a
loopback address only (127.0.0.1, localhost, ::1): on any other it refuses
to start unless told --insecure-no-token (serve.allow_no_token).

Every request must name the server in its Host header as it listens
(serve.addr, the address the client reached, or on loopback localhost,
127.0.0.1 and [::1] with the port) or as serve.allowed_hosts lists it
(--allowed-host; "name" for any port, "name:port", "*" for any); others get
a 403 host_not_allowed, against DNS rebinding (/healthz and /readyz answer
any). A POST from a browser page of another origin gets a 403 cross_origin,
token or not, unless serve.allowed_origins (--allowed-origin) lists that
origin, which also gets CORS headers. Programs that send no Origin (curl,
clients of the API) are not concerned.

serve.max_body_bytes bounds a request's body, serve.request_timeout its
handling. On SIGINT or SIGTERM it stops accepting, ends the streams and
finishes the requests in progress.`,
		Example: `  sudoku serve --embedded
  sudoku serve --addr 0.0.0.0:8080 --nats-url nats://nats:4222 --redis-addrs redis:6379   # with $SUDOKU_SERVE_TOKEN
  sudoku serve --addr 0.0.0.0:8080 --allowed-host sudoku.example,sudoku.example.com       # and the names clients use
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
			if noToken {
				cfg.Serve.AllowNoToken = true
			}
			if cmd.Flags().Changed("allowed-origin") || cmd.Flags().Changed("cors-origin") {
				cfg.Serve.AllowedOrigins = append(origins, corsOrigins...)
			}
			if cmd.Flags().Changed("allowed-host") {
				cfg.Serve.AllowedHosts = allowedHosts
			}
			for _, o := range cfg.Serve.AllowedOrigins {
				if err := httpapi.CheckAllowedOrigin(o); err != nil {
					return usageErrorf("serve.allowed_origins: %w", err)
				}
			}
			for _, h := range cfg.Serve.AllowedHosts {
				if err := httpapi.CheckAllowedHost(h); err != nil {
					return usageErrorf("serve.allowed_hosts: %w", err)
				}
			}
			// Before connecting to anything: a deployment mistake, said at once.
			if err := httpapi.CheckExposed(ctx, cfg.Serve.Addr, cfg.Serve.Token.Reveal(), cfg.Serve.AllowNoToken); err != nil {
				return usageErrorf("serve.addr: %w", err)
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
				AllowNoToken:   cfg.Serve.AllowNoToken,
				Addr:           cfg.Serve.Addr,
				AllowedHosts:   cfg.Serve.AllowedHosts,
				AllowedOrigins: cfg.Serve.AllowedOrigins,
				MaxBodyBytes:   cfg.Serve.MaxBodyBytes,
				RequestTimeout: cfg.Serve.RequestTimeout,
				Producer:       producerOptions(cfg, log, false, false),
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
	cmd.Flags().BoolVar(&noToken, "insecure-no-token", false,
		"listen on an address other than loopback without a token (serve.allow_no_token): anyone who reaches it may submit and cancel jobs")
	cmd.Flags().StringSliceVar(&origins, "allowed-origin", nil,
		"let pages of these `origins` (scheme://host[:port]; \"*\": any) call the API: CORS, and their POSTs (serve.allowed_origins)")
	cmd.Flags().StringSliceVar(&corsOrigins, "cors-origin", nil, "the former name of --allowed-origin")
	_ = cmd.Flags().MarkDeprecated("cors-origin", "use --allowed-origin")
	cmd.Flags().StringSliceVar(&allowedHosts, "allowed-host", nil,
		"answer requests whose Host is one of these `hosts` too (\"name\", \"name:port\", \"*\": any) (serve.allowed_hosts)")
	config.AddKeyFlags(cmd.Flags(), keyNATSURL, keyRedisAddrs, keyBatchSize, keyWorkerConcurrency)
	natsFlag := cmd.Flags().Lookup(config.FlagName(keyNATSURL))
	natsFlag.Usage = "without --embedded, " + natsFlag.Usage
	workersFlag := cmd.Flags().Lookup(config.FlagName(keyWorkerConcurrency))
	workersFlag.Usage = "with --embedded, " + workersFlag.Usage
	return cmd
}
