package cli

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/backlog"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/httpapi"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
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

Each call acts for its caller, the owner of the jobs it submits and the
only one (with the roles that act for others) who may read, follow or
cancel them. serve.token is one token, whose caller is serve's own owner
(job.owner, else nats.user, else anonymous), or lines "principal token",
one per caller (a token alone on its line: serve's own owner); '#' starts
a comment line. Without a token the caller is serve's own owner, or, with
roles off, the owner a request names in its X-Sudoku-Owner header (a name,
not a proof). A principal named as a role (admin, gateway, reader, or one
of them and '-'...) acts for others as that role: admin and gateway read
and cancel any job, reader reads any. With roles on and principals other
than its own owner, serve must connect as a gateway user (nats.user
gateway, or gateway-NAME), which NATS lets act for any owner.

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
			principals, ownerHeader, err := serveCallers(cfg)
			if err != nil {
				return err
			}
			// The workers' consumers are not serve's to change (and, with
			// roles on, not its user's): only an embedded worker's.
			oo := app.OpenOptions{Embedded: embedded, AllowMemoryCache: embedded, Drain: true, NoConsumer: !embedded}
			conn, err := app.Open(ctx, cfg, oo, log)
			if err != nil {
				return err
			}
			defer conn.Close()
			if embedded {
				stop := startLocalWorker(conn, cfg, app.WorkerOptions(cfg, log), log)
				defer stop()
			}
			ln, err := net.Listen("tcp", cfg.Serve.Addr)
			if err != nil {
				return listenError("serve.addr", cfg.Serve.Addr, err)
			}
			// The backlog, for the whole deployment and with no worker
			// running: the gauges KEDA scales the workers on, and each
			// owner's open jobs for the quotas without a read of its
			// records per submission.
			watch := backlog.New(conn.Queue, backlog.Options{Logger: log})
			wctx, stopWatch := context.WithCancel(ctx)
			defer stopWatch()
			go watch.Run(wctx)
			popts := app.ProducerOptions(cfg, log)
			popts.Usage = watch.Usage
			srv, err := httpapi.New(conn.Queue, conn.Cache, httpapi.Options{
				Principals:     principals,
				OwnerHeader:    ownerHeader,
				AllowNoToken:   cfg.Serve.AllowNoToken,
				Addr:           cfg.Serve.Addr,
				AllowedHosts:   cfg.Serve.AllowedHosts,
				AllowedOrigins: cfg.Serve.AllowedOrigins,
				MaxBodyBytes:   cfg.Serve.MaxBodyBytes,
				RequestTimeout: cfg.Serve.RequestTimeout,
				Producer:       popts,
				Trust:          conn.Trust,
				Logger:         log,
			})
			if err != nil {
				_ = ln.Close()
				return err
			}
			defer srv.Close()
			if err := srv.Registry().Register(watch); err != nil {
				return fmt.Errorf("serve: the backlog gauges: %w", err)
			}
			logStart(log, "sudoku serve starting", cfg, "embedded", embedded, "memory_cache", conn.MemoryCache,
				"auth", cfg.Serve.Token != "", "principals", principalNames(principals, cfg.Owner()),
				"owner", cfg.Owner(), "owner_header", ownerHeader)
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

// serveCallers returns the principals of serve.token (none without a
// token) and whether requests may name their owner in the X-Sudoku-Owner
// header: without a token, and with roles off (nats.user is not a role's
// user). With roles on, serve acts for its principals as its NATS user:
// principals other than serve's own owner need a user whose role may act
// for any owner (gateway, or admin), which is said before connecting.
func serveCallers(cfg *config.Config) ([]httpapi.Principal, bool, error) {
	role, rolesOn := roles.Of(cfg.NATS.User)
	text := cfg.Serve.Token.Reveal()
	if text == "" {
		return nil, !rolesOn, nil
	}
	ps, err := httpapi.ParseTokens(text)
	if err != nil {
		return nil, false, usageErrorf("serve.token: %w", err)
	}
	var others []string
	for _, p := range ps {
		if p.Name != "" && p.Name != cfg.Owner() && !slices.Contains(others, p.Name) {
			others = append(others, p.Name)
		}
	}
	if rolesOn && len(others) > 0 && role != roles.Gateway && role != roles.Admin {
		return nil, false, usageErrorf("serve.token names principals (%s) for whom serve submits, reads and cancels jobs as its NATS "+
			"user %s (role %s), whom NATS lets act only for itself: connect serve as a gateway user (nats.user gateway, or "+
			"gateway-NAME made with 'sudoku roles init --user gateway-NAME'), which may act for any owner",
			strings.Join(others, ", "), cfg.NATS.User, role)
	}
	return ps, false, nil
}

// principalNames lists the principals of ps for the log (a token alone
// is own's), without their tokens.
func principalNames(ps []httpapi.Principal, own string) string {
	var names []string
	for _, p := range ps {
		n := p.Name
		if n == "" {
			n = own
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return fmt.Sprint(names)
}
