// Package app wires a sudoku process from its configuration: the NATS
// connection (or an embedded server), the JetStream queue, and the result
// store (Redis, or process memory where allowed). Commands in internal/cli
// and tests build on it.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/embedded"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Store is everything the commands need of a result store; *cache.Redis and
// *cache.Memory have it.
type Store = cache.Store

// NATSOptions turns the nats.* settings into client options: name,
// credentials, TLS and reconnection for ever (a worker outlives server
// restarts), with disconnects and reconnects logged once each.
func NATSOptions(c config.NATSConfig, log *slog.Logger) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.Timeout(c.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil { // nil: we are closing
				log.Warn("nats: disconnected; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", "server", nc.ConnectedUrlRedacted())
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
			return nil, fmt.Errorf("app: nats.nkey_file %q: %w", c.NKeyFile, err)
		}
		opts = append(opts, o)
	}
	tlsConf, err := c.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("app: nats.tls: %w", err)
	}
	if tlsConf != nil {
		opts = append(opts, nats.Secure(tlsConf))
	}
	return opts, nil
}

// QueueOptions turns the queue.* settings into queue.Options.
func QueueOptions(c config.QueueConfig) queue.Options {
	return queue.Options{
		Stream:        c.Stream,
		Prefix:        c.SubjectPrefix,
		Replicas:      c.Replicas,
		Memory:        c.Storage == "memory",
		MaxAge:        c.MaxAge,
		MaxMsgBytes:   int32(c.MaxMessageBytes),
		Consumer:      c.Consumer,
		AckWait:       c.AckWait,
		MaxDeliver:    c.MaxDeliver,
		MaxAckPending: c.MaxAckPending,
		DLQStream:     c.DLQStream,
	}
}

// RedisClient returns a go-redis UniversalClient for the redis.* settings:
// one address is a single server, several a Cluster, and a master name
// makes them Sentinels.
func RedisClient(c config.RedisConfig) (redis.UniversalClient, error) {
	tlsConf, err := c.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("app: redis.tls: %w", err)
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:       c.Addrs,
		MasterName:  c.MasterName,
		Username:    c.Username,
		Password:    c.Password.Reveal(),
		DB:          c.DB,
		TLSConfig:   tlsConf,
		DialTimeout: c.DialTimeout,
		PoolSize:    c.PoolSize,
	}), nil
}

// Conn is a process's connection to the queue and the store. Close releases
// everything in the reverse order of opening.
type Conn struct {
	NC       *nats.Conn
	JS       jetstream.JetStream
	Queue    *queue.Queue
	Store    Store
	Embedded *embedded.Server // nil unless nats.embedded or Open's embedded
	// MemoryStore is true when the store is the in-process one.
	MemoryStore bool

	closers []func()
	closed  atomic.Bool
}

// OpenOptions say what Open may fall back to.
type OpenOptions struct {
	// Embedded starts an in-process NATS server instead of connecting to
	// nats.url (as nats.embedded does).
	Embedded bool
	// AllowMemoryStore uses an in-process store when Redis cannot be
	// reached (and cache.memory_fallback is on), instead of failing.
	AllowMemoryStore bool
	// NoStore skips the store (for commands that only publish).
	NoStore bool
}

// Open connects to NATS (or starts the embedded server), sets the queue up
// and opens the store. Its errors say which service failed and where.
func Open(ctx context.Context, cfg *config.Config, oo OpenOptions, log *slog.Logger) (*Conn, error) {
	c := &Conn{}
	if err := c.open(ctx, cfg, oo, log); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) open(ctx context.Context, cfg *config.Config, oo OpenOptions, log *slog.Logger) error {
	nopts, err := NATSOptions(cfg.NATS, log)
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
			return fmt.Errorf("app: connect to NATS at %s: %w", redactURL(cfg.NATS.URL), err)
		}
	}
	nc := c.NC
	c.closers = append(c.closers, func() { _ = nc.Drain(); waitClosed(nc) })
	if c.JS, err = jetstream.New(c.NC, jetstream.WithPublishAsyncMaxPending(cfg.Queue.PublishMaxPending)); err != nil {
		return fmt.Errorf("app: jetstream: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if c.Queue, err = queue.Setup(sctx, c.JS, QueueOptions(cfg.Queue)); err != nil {
		return err
	}
	if oo.NoStore {
		return nil
	}
	rdb, err := RedisClient(cfg.Redis)
	if err != nil {
		return err
	}
	store := cache.NewRedis(rdb, cache.RedisOptions{Prefix: cfg.Redis.KeyPrefix, TTL: cfg.Cache.TTL})
	perr := store.Ping(sctx)
	if perr != nil && oo.AllowMemoryStore && cfg.Cache.MemoryFallback {
		_ = rdb.Close()
		log.Info("redis not reachable; using an in-process cache", "addrs", strings.Join(cfg.Redis.Addrs, ","), "err", perr)
		c.Store, c.MemoryStore = cache.NewMemory(), true
		return nil
	}
	if perr != nil {
		_ = rdb.Close()
		return fmt.Errorf("app: redis at %s: %w", strings.Join(cfg.Redis.Addrs, ","), perr)
	}
	c.Store = store
	c.closers = append(c.closers, func() { _ = store.Close() })
	return nil
}

// Close closes the store, drains the NATS connection and stops the
// embedded server, in that order. It is safe to call twice.
func (c *Conn) Close() {
	if c.closed.Swap(true) {
		return
	}
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

// waitClosed waits (up to 5s) for a draining connection to close.
func waitClosed(nc *nats.Conn) {
	deadline := time.Now().Add(5 * time.Second)
	for !nc.IsClosed() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	nc.Close()
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
