// Package app wires a sudoku process from its configuration: the NATS
// connection (or an embedded server), the JetStream queue, and the result
// cache (Redis, or process memory where allowed). Commands in internal/cli
// and tests build on it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/embedded"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
)

// NATSOptions turns the nats.* settings into client options: name,
// credentials, TLS and reconnection for ever (a worker outlives server
// restarts), with disconnects and reconnects logged once each.
func NATSOptions(c config.NATSConfig, log *slog.Logger) ([]nats.Option, error) {
	return natsOptions(c, log, roles.NewRefusals(c.User))
}

// natsOptions is NATSOptions, with the permission violations the server
// reports recorded in ref (and logged with the user and what was refused).
func natsOptions(c config.NATSConfig, log *slog.Logger, ref *roles.Refusals) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.Timeout(c.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil { // nil: we are closing
				log.Warn("NATS: disconnected; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS: reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		// Asynchronous errors (a slow consumer dropping messages, which
		// JetStream redelivers) in the process's log format, not printed
		// raw on stderr by the library's default handler. The library
		// reports a slow consumer once until it catches up.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if pe, ok := ref.Note(err); ok {
				// The operation refused fails later (often by a timeout):
				// say now who was refused what.
				log.Error("NATS: permission refused", "err", pe)
				return
			}
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("NATS: asynchronous error", "err", err, "subject", subject)
		}),
	}
	switch {
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password.Reveal()))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token.Reveal()))
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey_file %q: %w", c.NKeyFile, err)
		}
		opts = append(opts, o)
	}
	tlsConf, err := c.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("nats.tls: %w", err)
	}
	if tlsConf != nil {
		opts = append(opts, nats.Secure(tlsConf))
	}
	return opts, nil
}

// QueueOptions turns the queue.* settings, and job.result_ttl (how long a
// job's record and results are kept), into queue.Options.
func QueueOptions(c config.QueueConfig, retention time.Duration) queue.Options {
	return queue.Options{
		Stream:          c.Stream,
		Prefix:          c.SubjectPrefix,
		Replicas:        c.Replicas,
		Memory:          c.Storage == "memory",
		MaxAge:          c.MaxAge,
		Retention:       retention,
		MaxMsgBytes:     int32(c.MaxMessageBytes),
		Consumer:        c.Consumer,
		AckWait:         c.AckWait,
		MaxDeliver:      c.MaxDeliver,
		MaxAckPending:   c.MaxAckPending,
		DLQStream:       c.DLQStream,
		MaxBytes:        c.MaxBytes,
		ResultsMaxBytes: c.ResultsMaxBytes,
		JobsMaxBytes:    c.JobsMaxBytes,
		DLQMaxAge:       c.DLQMaxAge,
		DLQMaxBytes:     c.DLQMaxBytes,
	}
}

// RedisClient returns a go-redis UniversalClient for the redis.* settings:
// one address is a single server, several a Cluster, and a master name
// makes them Sentinels.
func RedisClient(c config.RedisConfig) (redis.UniversalClient, error) {
	tlsConf, err := c.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("redis.tls: %w", err)
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:       c.Addrs,
		MasterName:  c.MasterName,
		Username:    c.Username,
		Password:    c.Password.Reveal(),
		DB:          c.DB,
		TLSConfig:   tlsConf,
		DialTimeout: c.DialTimeout,
		PoolSize:    c.PoolSize,
	})
	// A command the user's ACL refuses (NOPERM) names the user and the
	// command.
	rdb.AddHook(roles.RedisHook(c.Username))
	return rdb, nil
}

// Conn is a process's connection to NATS (and its queue) and to the
// cache. Close releases everything in the reverse order of opening.
type Conn struct {
	NC       *nats.Conn // nil with OpenOptions.NoNATS
	JS       jetstream.JetStream
	Queue    *queue.Queue
	Embedded *embedded.Server // nil unless nats.embedded or Open's embedded
	// Cache is the result cache, best-effort; never nil, but without a
	// cache behind it (Cache.Enabled false) for OpenOptions.NoCache or
	// when no Redis was reachable and no fallback allowed.
	Cache *cache.Guard
	// MemoryCache is true when the cache is the in-process one.
	MemoryCache bool
	// Refusals are the permission violations NATS reported on NC
	// (roles.Refusals.Explain adds the latest to an error).
	Refusals *roles.Refusals
	// Signer signs what a worker produces (proof.key, or for a worker
	// with proof.default the default key; nil: none).
	Signer *proof.Signer
	// Trust is the worker keys a reader accepts proofs from
	// (proof.trusted, or with proof.default the default key's; nil:
	// none, and readers solve to confirm).
	Trust *proof.Trust

	closers []func()
	closed  atomic.Bool
}

// OpenOptions say what a command uses and what Open may fall back to.
type OpenOptions struct {
	// OnRefusal, if set, is called with each permission violation NATS
	// reports on the connection (roles.Refusals.OnNote): a one-shot
	// command cancels its work with it, so that a refusal is final at
	// once instead of a timeout later.
	OnRefusal func(*roles.PermissionError)
	// Embedded starts an in-process NATS server instead of connecting to
	// nats.url (as nats.embedded does).
	Embedded bool
	// NoNATS skips NATS (for commands that read only the cache).
	NoNATS bool
	// NoCache skips Redis (for commands that do not use the cache).
	NoCache bool
	// RequireCache fails when Redis does not answer at start-up, instead
	// of going on without the cache (for commands whose work is reading
	// it).
	RequireCache bool
	// AllowMemoryCache uses an in-process cache when Redis cannot be
	// reached at start-up (and cache.memory_fallback is on).
	AllowMemoryCache bool
	// MemoryCache uses an in-process cache and no Redis at all: for a
	// program that runs everything in itself (client.Options.MemoryCache).
	MemoryCache bool
	// Worker is set by workers: they refuse to start on streams or a
	// bucket whose settings differ from the configuration
	// (*queue.DifferencesError), which they never change. Other
	// commands, and an embedded server, use them as they are, logging
	// each difference.
	Worker bool
	// ApplyQueue brings the streams, bucket and consumer that exist to
	// the configuration (queue.Options.Update): 'sudoku setup --apply'
	// only.
	ApplyQueue bool
	// NoSetup connects to NATS and JetStream and leaves the queue alone
	// (Conn.Queue nil): 'sudoku setup' compares it first.
	NoSetup bool
	// NoConsumer leaves the workers' consumer out of the set-up
	// (queue.Options.NoConsumer): for commands that only submit work or
	// read jobs and dead letters.
	NoConsumer bool
	// Drain makes Close drain the NATS connection, so that what its
	// subscriptions received is handled before it closes: for servers
	// (workers, the HTTP API). Other commands have nothing in flight when
	// they close, and close at once after a flush: a drain costs tens of
	// milliseconds (the client polls its subscriptions every 10 ms).
	Drain bool
}

// Open connects to NATS (or starts the embedded server) and sets the queue
// up, then opens the cache. A Redis that does not answer at start-up is
// logged and the command goes on without it (it is only a cache), unless
// RequireCache. Its errors say which service failed and where.
func Open(ctx context.Context, cfg *config.Config, oo OpenOptions, log *slog.Logger) (*Conn, error) {
	c := &Conn{}
	if err := c.open(ctx, cfg, oo, log); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) open(ctx context.Context, cfg *config.Config, oo OpenOptions, log *slog.Logger) error {
	var err error
	if c.Signer, c.Trust, err = proofKeys(cfg.Proof, oo.Worker, log); err != nil {
		return err
	}
	if !oo.NoNATS {
		if err := c.openNATS(ctx, cfg, oo, log); err != nil {
			return err
		}
	}
	guardOpts := cache.GuardOptions{Logger: log}
	c.Cache = cache.NewGuard(nil, guardOpts)
	if oo.NoCache {
		return nil
	}
	if oo.MemoryCache {
		c.Cache, c.MemoryCache = cache.NewGuard(cache.NewMemory(0), guardOpts), true
		return nil
	}
	// go-redis logs every failed dial of its pool on stderr (several a
	// second while Redis is down); the Guard says what matters, once per
	// outage. Keep its lines for --log-level debug.
	redis.SetLogger(redisLogger{log})
	rdb, err := RedisClient(cfg.Redis)
	if err != nil {
		return err
	}
	rc := cache.NewRedis(rdb, cache.RedisOptions{Prefix: cfg.Redis.KeyPrefix, TTL: cfg.Cache.TTL})
	pctx, cancel := context.WithTimeout(ctx, cfg.Redis.DialTimeout+time.Second)
	defer cancel()
	perr := rc.Ping(pctx)
	switch {
	case perr == nil:
	case oo.RequireCache:
		_ = rdb.Close()
		return redisError(cfg.Redis, perr)
	case isAuthError(perr):
		// Wrong credentials do not heal by waiting: say so now.
		_ = rdb.Close()
		return redisError(cfg.Redis, perr)
	case oo.AllowMemoryCache && cfg.Cache.MemoryFallback:
		_ = rdb.Close()
		log.Info("Redis not reachable; using an in-process cache", "addrs", strings.Join(cfg.Redis.Addrs, ","), "err", perr)
		c.Cache, c.MemoryCache = cache.NewGuard(cache.NewMemory(0), guardOpts), true
		return nil
	default:
		log.Warn("Redis not reachable; going on without the cache until it answers",
			"addrs", strings.Join(cfg.Redis.Addrs, ","), "err", perr)
		guardOpts.Down = true // said once here, not again by the first lookup
	}
	c.Cache = cache.NewGuard(rc, guardOpts)
	c.closers = append(c.closers, func() { _ = rc.Close() })
	return nil
}

// proofKeys returns a process's signer and trusted keys: the files
// proof.key and proof.trusted name, or, for those unset and with
// proof.default, the default key (proof.DefaultKeyPath), which a worker
// makes on first use and a reader trusts once it exists. A worker that
// cannot make it logs why and signs nothing: its readers confirm by
// solving, as with no key.
func proofKeys(pc config.ProofConfig, worker bool, log *slog.Logger) (*proof.Signer, *proof.Trust, error) {
	signer, err := proof.LoadSigner(pc.Key)
	if err != nil {
		return nil, nil, err
	}
	trust, err := proof.LoadTrust(pc.Trusted)
	if err != nil {
		return nil, nil, err
	}
	if !pc.Default || (pc.Key != "" && pc.Trusted != "") || (pc.Trusted != "" && !worker) {
		return signer, trust, nil
	}
	path, err := proof.DefaultKeyPath()
	if err != nil {
		if worker && pc.Key == "" {
			log.Warn("proof: no default key; signing nothing (set proof.key)", "err", err)
		}
		return signer, trust, nil
	}
	if worker && pc.Key == "" {
		s, made, err := proof.LoadOrCreateKey(path)
		switch {
		case err != nil:
			log.Warn("proof: cannot use the default key; signing nothing (set proof.key)", "path", path, "err", err)
		case made:
			signer = s
			log.Info("proof: made the default key; readers of this user on this host trust it", "path", path, "key", proof.IDOf(s.PublicKey()))
		default:
			signer = s
			log.Debug("proof: signing with the default key", "path", path, "key", proof.IDOf(s.PublicKey()))
		}
	}
	if pc.Trusted == "" {
		trust = proof.DefaultTrust(path)
	}
	return signer, trust, nil
}

// openNATS connects to NATS, or starts the embedded server, and sets the
// queue up.
func (c *Conn) openNATS(ctx context.Context, cfg *config.Config, oo OpenOptions, log *slog.Logger) error {
	c.Refusals = roles.NewRefusals(cfg.NATS.User)
	c.Refusals.OnNote(oo.OnRefusal)
	nopts, err := natsOptions(cfg.NATS, log, c.Refusals)
	if err != nil {
		return err
	}
	if oo.Embedded || cfg.NATS.Embedded {
		srv, err := embedded.Start(embedded.Options{DataDir: cfg.NATS.DataDir})
		if err != nil {
			return err
		}
		c.Embedded = srv
		c.closers = append(c.closers, srv.Shutdown)
		if c.NC, err = srv.Connect(nopts...); err != nil {
			return err
		}
	} else {
		if c.NC, err = nats.Connect(cfg.NATS.URL, nopts...); err != nil {
			return natsConnectError(cfg.NATS.URL, err)
		}
	}
	nc := c.NC
	if oo.Drain {
		c.closers = append(c.closers, func() { drain(nc) })
	} else {
		c.closers = append(c.closers, func() { _ = nc.FlushTimeout(time.Second); nc.Close() })
	}
	if c.JS, err = jetstream.New(c.NC, jetstream.WithPublishAsyncMaxPending(cfg.Queue.PublishMaxPending)); err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	if oo.NoSetup {
		return nil
	}
	qo := QueueOptions(cfg.Queue, cfg.Job.ResultTTL)
	qo.Update = oo.ApplyQueue
	qo.NoConsumer = oo.NoConsumer
	if oo.Worker {
		// Compared before anything is created: a worker whose settings
		// differ must not create its consumer either.
		pctx, cancel := context.WithTimeout(ctx, setupAttemptTimeout)
		diffs, err := queue.Plan(pctx, c.JS, qo)
		cancel()
		if err == nil {
			diffs = slices.DeleteFunc(diffs, func(d queue.Difference) bool { return d.Setting == "exists" })
			if len(diffs) > 0 {
				return &queue.DifferencesError{Differences: diffs}
			}
		}
		// An error here (a cluster electing its leader) is met again,
		// and waited out, by setupQueue.
	}
	c.Queue, err = setupQueue(ctx, c.JS, qo, c.Refusals, log)
	if err != nil {
		return jetStreamError(cfg.NATS.URL, c.Refusals.Explain(err))
	}
	c.Queue.Refusals = c.Refusals
	if d := c.Queue.Differences; len(d) > 0 && !oo.ApplyQueue {
		if oo.Worker {
			return &queue.DifferencesError{Differences: d}
		}
		for _, d := range d {
			log.Warn("the queue's settings differ from this process's; using them as they are ('sudoku setup' shows them all)",
				"difference", d.String())
		}
	}
	return nil
}

// Bounds of setupQueue: each attempt, and all of them.
const (
	setupAttemptTimeout = 5 * time.Second
	setupTimeout        = 30 * time.Second
)

// setupQueue sets the queue up (queue.Setup), trying again for up to
// setupTimeout while JetStream is not ready: a cluster that is electing
// its leader, when it starts or after losing a server, answers "temporarily
// unavailable" or not at all for a few seconds, and a single request lost
// then would otherwise hang for the whole timeout. Other errors (a stream
// of the same name with other subjects, more replicas than servers on a
// single server) fail at once, and so does a request the server refused
// (ref: the user's role does not allow it; it times out).
func setupQueue(ctx context.Context, js jetstream.JetStream, o queue.Options, ref *roles.Refusals, log *slog.Logger) (*queue.Queue, error) {
	refused := ref.Count()
	deadline := time.Now().Add(setupTimeout)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, setupAttemptTimeout)
		q, err := queue.Setup(actx, js, o)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || !jetStreamNotReady(err) || ref.Count() > refused {
			return q, err
		}
		log.Warn("JetStream not ready; trying again", "attempt", attempt, "err", err)
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("setting up the streams: %w", ctx.Err())
		}
	}
}

// jetStreamNotReady reports whether err is one a JetStream cluster gives
// while it has no leader, or not yet enough servers for the replicas.
func jetStreamNotReady(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 503: JetStream temporarily unavailable; 10023: insufficient
		// resources (the peers are not all known yet).
		return apiErr.Code == 503 || apiErr.ErrorCode == 10023
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// natsConnectError says that connecting to the NATS servers at urls
// failed and, when the servers refused the credentials, which settings
// hold them (never their values).
func natsConnectError(urls string, err error) error {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return fmt.Errorf("NATS at %s refused the credentials (authorization failed; check nats.user and "+
			"nats.password, nats.token, nats.creds_file or nats.nkey_file): %w", redactURL(urls), err)
	}
	if errors.Is(err, nats.ErrNoServers) {
		return fmt.Errorf("cannot connect to NATS at %s: no server answered (is nats-server running? set nats.url, "+
			"$SUDOKU_NATS_URL or --nats-url): %w", redactURL(urls), err)
	}
	return fmt.Errorf("cannot connect to NATS at %s: %w", redactURL(urls), err)
}

// isAuthError reports whether Redis refused the credentials.
func isAuthError(err error) bool {
	return redis.HasErrorPrefix(err, "WRONGPASS") || redis.HasErrorPrefix(err, "NOAUTH") ||
		redis.HasErrorPrefix(err, "AUTH") || redis.HasErrorPrefix(err, "NOPERM")
}

// redisError says that Redis did not answer a ping and, when it refused
// the credentials, which settings hold them (never their values).
func redisError(c config.RedisConfig, err error) error {
	where := strings.Join(c.Addrs, ",")
	if c.MasterName != "" {
		where = fmt.Sprintf("master %q of the Sentinels %s", c.MasterName, where)
	}
	if isAuthError(err) {
		return fmt.Errorf("Redis at %s refused the credentials (authentication failed; check redis.username "+
			"and redis.password): %w", where, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("Redis at %s did not answer within %s: %w", where, c.DialTimeout+time.Second, err)
	}
	return fmt.Errorf("Redis at %s: %w", where, err)
}

// jetStreamError explains a failed queue set-up: above all a server
// without JetStream, which answers its API with "no responders".
func jetStreamError(url string, err error) error {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("NATS at %s does not have JetStream enabled: start nats-server with -js "+
			"(or put \"jetstream {}\" in its configuration file), or enable it for this account: %w", redactURL(url), err)
	}
	return fmt.Errorf("NATS at %s: setting up the streams: %w", redactURL(url), err)
}

// Close closes the cache, drains the NATS connection and stops the
// embedded server, in that order. It is safe to call twice.
func (c *Conn) Close() {
	if c.closed.Swap(true) {
		return
	}
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

// drain drains nc and waits (up to 5s) for it to close.
func drain(nc *nats.Conn) {
	closed := make(chan struct{})
	prev := nc.ClosedHandler()
	nc.SetClosedHandler(func(nc *nats.Conn) {
		close(closed)
		if prev != nil {
			prev(nc)
		}
	})
	if err := nc.Drain(); err == nil {
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
		}
	}
	nc.Close()
}

// redisLogger passes go-redis's own log lines to a slog.Logger at debug
// level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// redactURL hides passwords in a list of URLs.
func redactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			if s := strings.Index(p, "://"); s >= 0 && s < at {
				parts[i] = p[:s+3] + "[redacted]" + p[at:]
			}
		}
	}
	return strings.Join(parts, ",")
}
