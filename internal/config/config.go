// Package config holds the settings of every sudoku process (worker,
// producer, HTTP API) and loads them with viper. It is the only package
// that imports viper: the others receive a *Config.
//
// Every setting has a key (for example "queue.batch_size"), a default, an
// environment variable (SUDOKU_ + the key in upper case with '.' as '_':
// SUDOKU_QUEUE_BATCH_SIZE) and an entry in the documented reference file
// configs/sudoku.yaml. Any key but a secret can also be a flag, named
// after the key with '.' and '_' as '-' (--queue-batch-size): every
// command has the flags of AddGlobalFlags (--config, --log-level,
// --log-format), and each defines with AddKeyFlags those of the keys it
// uses. Precedence, highest first: flags, environment, configuration file,
// defaults.
//
// Load layers them the viper way, with one viper instance per call:
// SetDefault for every key from Default, AutomaticEnv for the SUDOKU_
// variables, BindPFlag for the flags named after keys, ReadConfig for the
// file; then Unmarshal into Config with decode hooks that parse durations
// ("30s") and comma-separated lists, and refuse a value of the wrong type
// rather than guess. A key or section of the file left without a value
// keeps its default.
//
// Secrets (nats.password, nats.token, redis.password, serve.token) are
// never taken from flags, which other users can read from the process
// table. Set them through the environment or, better, through a file:
// each secret key X has a key X_file (nats.password_file,
// SUDOKU_NATS_PASSWORD_FILE, ...) naming a file whose content, with
// surrounding white space trimmed, is the secret. Secrets have the type
// Secret, which prints as "[redacted]"; they never appear in logs or
// error messages.
package config

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// Config is the whole configuration of a sudoku process. Each field's
// mapstructure tag is its key's last element; nested structs are the
// sections ("nats", "redis", ...). The zero Config is not useful: start
// from Default or Load.
type Config struct {
	NATS    NATSConfig    `mapstructure:"nats"`
	Redis   RedisConfig   `mapstructure:"redis"`
	Cache   CacheConfig   `mapstructure:"cache"`
	Queue   QueueConfig   `mapstructure:"queue"`
	Worker  WorkerConfig  `mapstructure:"worker"`
	Metrics MetricsConfig `mapstructure:"metrics"`
	Log     LogConfig     `mapstructure:"log"`
	Serve   ServeConfig   `mapstructure:"serve"`
	Job     JobConfig     `mapstructure:"job"`
	Quota   QuotaConfig   `mapstructure:"quota"`
	Proof   ProofConfig   `mapstructure:"proof"`
}

// ProofConfig names the keys of the proofs that an answer came from a
// worker (keys proof.*; internal/proof). A worker signs with Key; a
// reader (submit, job wait, get, serve, the Go client) takes a unique or
// gave_up answer at its word only with a proof by a key in Trusted, and
// without trusted keys confirms each by solving it again. `sudoku roles
// init` writes both files. With neither set, Default makes a worker and
// a reader of one user on one host agree with no set-up.
type ProofConfig struct {
	// Key is the worker's ed25519 private key, a PEM "PRIVATE KEY" file
	// (PKCS #8). Empty: the default key (Default), or nothing signed.
	Key string `mapstructure:"key"`
	// Trusted is a PEM file of the workers' public keys ("PUBLIC KEY"
	// blocks) whose proofs readers accept. An answer without a proof by
	// one of them has its unique or gave_up confirmed by solving. Empty:
	// the default key's (Default), or none.
	Trusted string `mapstructure:"trusted"`
	// Default, on, stands the default key (proof.DefaultKeyPath: the
	// user's configuration directory's sudoku-queue/proof_key.pem) in
	// for an empty Key or Trusted: a worker signs with it, making it on
	// first use, and a reader trusts its public key once it exists. Off,
	// no key file is read or written: an empty Key signs nothing and an
	// empty Trusted trusts none.
	Default bool `mapstructure:"default"`
}

// QuotaConfig bounds what one owner may have queued (keys quota.*).
// Workers enforce them on every owner's jobs (a job over a quota is
// failed, saying which); the doors (submit, the HTTP API, the micro
// service) refuse a submission over them at once. 0 is no bound.
type QuotaConfig struct {
	// JobsOpen bounds an owner's jobs publishing or published at once.
	JobsOpen int `mapstructure:"jobs_open"`
	// LinesPending bounds an owner's lines without a result yet, over
	// its open jobs.
	LinesPending int64 `mapstructure:"lines_pending"`
	// RequestBytes bounds the bytes one submission may store (its work
	// and its results, as estimated while its batches are cut).
	RequestBytes int64 `mapstructure:"request_bytes"`
}

// NATSConfig is how to reach NATS (keys nats.*).
type NATSConfig struct {
	// URL is one server URL or a comma-separated list of a cluster's
	// (nats://, tls://, ws://, wss:// or a bare host:port). Prefer User and
	// Password over credentials in the URL: the URL is logged with its
	// user information redacted, but it is a plain string elsewhere.
	URL string `mapstructure:"url"`
	// Name is the client name the server shows in its monitoring.
	Name string `mapstructure:"name"`
	// User and Password authenticate with a user name and password.
	User     string `mapstructure:"user"`
	Password Secret `mapstructure:"password"`
	// PasswordFile names a file holding Password; Load reads it.
	PasswordFile string `mapstructure:"password_file"`
	// Token authenticates with a token instead of user and password.
	Token Secret `mapstructure:"token"`
	// TokenFile names a file holding Token; Load reads it.
	TokenFile string `mapstructure:"token_file"`
	// CredsFile is a credentials file (JWT and nkey seed, as made by nsc).
	CredsFile string `mapstructure:"creds_file"`
	// NKeyFile is a file holding an nkey seed (without a JWT).
	NKeyFile string `mapstructure:"nkey_file"`
	// TLS configures TLS to the servers.
	TLS TLSConfig `mapstructure:"tls"`
	// ConnectTimeout bounds each attempt to connect to a server.
	ConnectTimeout time.Duration `mapstructure:"connect_timeout"`
	// Embedded makes the process start an in-process NATS server with
	// JetStream and connect to it, instead of to URL: for tests and
	// single-machine use without a separate nats-server.
	Embedded bool `mapstructure:"embedded"`
	// DataDir is the embedded server's JetStream directory; "" means a
	// new temporary directory, removed at exit.
	DataDir string `mapstructure:"data_dir"`
}

// RedisConfig is how to reach the Redis result cache (keys redis.*). It
// maps onto go-redis's UniversalOptions: one address is a single server,
// several are a Redis Cluster, and MasterName makes them Sentinels.
type RedisConfig struct {
	// Addrs are the servers' host:port addresses.
	Addrs []string `mapstructure:"addrs"`
	// MasterName is the Sentinel master's name; "" means no Sentinel.
	MasterName string `mapstructure:"master_name"`
	// Username and Password authenticate (Redis 6 ACL user name; an
	// empty Username with a Password is the legacy requirepass).
	Username string `mapstructure:"username"`
	Password Secret `mapstructure:"password"`
	// PasswordFile names a file holding Password; Load reads it.
	PasswordFile string `mapstructure:"password_file"`
	// DB is the database number (a Redis Cluster has only 0).
	DB int `mapstructure:"db"`
	// TLS configures TLS to the servers.
	TLS TLSConfig `mapstructure:"tls"`
	// KeyPrefix starts every key the service writes.
	KeyPrefix string `mapstructure:"key_prefix"`
	// DialTimeout bounds each attempt to connect.
	DialTimeout time.Duration `mapstructure:"dial_timeout"`
	// PoolSize is the connection pool size per server; 0 means go-redis's
	// default (10 per GOMAXPROCS).
	PoolSize int `mapstructure:"pool_size"`
}

// TLSConfig configures a TLS client (keys nats.tls.* and redis.tls.*).
type TLSConfig struct {
	// Enabled turns TLS on with the system's roots when no file is set.
	// Setting any file turns TLS on too (see On).
	Enabled bool `mapstructure:"enabled"`
	// CAFile is a PEM file of the certificate authorities to trust
	// instead of the system's.
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that verify clients. Set both or neither.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// InsecureSkipVerify skips the verification of the server's
	// certificate: for tests only.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// CacheConfig is about the cached results (keys cache.*).
type CacheConfig struct {
	// TTL is how long a result stays in Redis; 0 keeps it until Redis
	// evicts it.
	TTL time.Duration `mapstructure:"ttl"`
	// MemoryFallback lets `sudoku solve` use an in-process cache when
	// Redis cannot be reached, instead of failing.
	MemoryFallback bool `mapstructure:"memory_fallback"`
}

// QueueConfig defines the JetStream stream, its consumer and the messages
// (keys queue.*).
type QueueConfig struct {
	// Stream is the work-queue stream's name.
	Stream string `mapstructure:"stream"`
	// SubjectPrefix starts the subjects of every message the service
	// publishes ("sudoku" gives sudoku.>).
	SubjectPrefix string `mapstructure:"subject_prefix"`
	// Replicas is the stream's replica count: 1 on one server, 3 in a
	// three-server cluster.
	Replicas int `mapstructure:"replicas"`
	// Storage is "file" or "memory".
	Storage string `mapstructure:"storage"`
	// MaxAge discards messages older than this; 0 keeps them until acked.
	MaxAge time.Duration `mapstructure:"max_age"`
	// MaxBytes bounds the work stream's size; when full it refuses new
	// work (a submit fails) rather than lose any. 0: no bound.
	MaxBytes int64 `mapstructure:"max_bytes"`
	// ResultsMaxBytes bounds the results stream's size; when full it
	// refuses new results (their batches are retried, then
	// dead-lettered) rather than drop stored ones. Their age is bounded
	// by job.result_ttl. 0: no bound.
	ResultsMaxBytes int64 `mapstructure:"results_max_bytes"`
	// JobsMaxBytes bounds the jobs bucket (records and manifests); when
	// full it refuses new jobs rather than lose a record. Each value is
	// bounded too (queue.MaxRecordBytes). 0: no bound.
	JobsMaxBytes int64 `mapstructure:"jobs_max_bytes"`
	// Consumer is the base name of the lanes' durable pull consumers
	// (<consumer>-<owner>-<priority>-<slot>).
	Consumer string `mapstructure:"consumer"`
	// AckWait is how long a delivered message may stay unacknowledged
	// before the server redelivers it; workers send progress heartbeats
	// (Worker.Heartbeat) while they work on a long batch.
	AckWait time.Duration `mapstructure:"ack_wait"`
	// MaxDeliver is how many times a message is delivered before it is
	// given up (and dead-lettered).
	MaxDeliver int `mapstructure:"max_deliver"`
	// Backoff are the delays before the 1st, 2nd, ... redelivery (the
	// last one repeats); fewer entries than MaxDeliver.
	Backoff []time.Duration `mapstructure:"backoff"`
	// MaxAckPending bounds the messages delivered and not yet
	// acknowledged across all workers: at least the fleet's total fetch.
	MaxAckPending int `mapstructure:"max_ack_pending"`
	// BatchSize is the most puzzles per message.
	BatchSize int `mapstructure:"batch_size"`
	// FirstBatchSize is how many puzzles a job's first message holds;
	// each next one holds twice as many, up to BatchSize.
	FirstBatchSize int `mapstructure:"first_batch_size"`
	// MaxMessageBytes bounds a message's payload, checked by publishers
	// and workers (the server's max_payload must be at least this).
	MaxMessageBytes int `mapstructure:"max_message_bytes"`
	// DLQStream is the stream that keeps messages that could not be
	// processed, for inspection.
	DLQStream string `mapstructure:"dlq_stream"`
	// DLQMaxAge drops dead letters older than this; 0 keeps them until
	// replayed.
	DLQMaxAge time.Duration `mapstructure:"dlq_max_age"`
	// DLQMaxBytes bounds the dead-letter stream's size; when full, the
	// oldest dead letters go first. 0: no bound.
	DLQMaxBytes int64 `mapstructure:"dlq_max_bytes"`
	// PublishMaxPending bounds the asynchronous publishes in flight.
	PublishMaxPending int `mapstructure:"publish_max_pending"`
}

// WorkerConfig tunes a worker process (keys worker.*).
type WorkerConfig struct {
	// Concurrency is the number of solving goroutines; 0 means
	// GOMAXPROCS (see Config.WorkerConcurrency).
	Concurrency int `mapstructure:"concurrency"`
	// ShutdownTimeout bounds how long a stopping worker finishes its
	// in-flight batches; what is left is redelivered to others.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// MaxNodes is the solver's node budget per puzzle (solver
	// Options.MaxNodes: 0 means the solver's default, negative no bound).
	MaxNodes int64 `mapstructure:"max_nodes"`
	// Heartbeat is the interval of progress heartbeats on a batch being
	// worked on; 0 means a third of Queue.AckWait (see
	// Config.WorkerHeartbeat).
	Heartbeat time.Duration `mapstructure:"heartbeat"`
	// Nice is the CPU priority (0 to 19; 0: as the process runs) of a
	// worker's batch handlers' threads, on Linux: their bulk solving then
	// yields the cores to the servers and clients beside it, and to the
	// worker's own endpoints (see package nice).
	Nice int `mapstructure:"nice"`
}

// MetricsConfig is about the Prometheus and health endpoints (keys
// metrics.*).
type MetricsConfig struct {
	// Addr is the host:port to serve /metrics, /healthz and /readyz on;
	// "" turns them off.
	Addr string `mapstructure:"addr"`
}

// LogConfig is about the process's log (keys log.*).
type LogConfig struct {
	// Level is the minimum level: debug, info, warn or error (slog's
	// syntax, so "info+2" works too).
	Level string `mapstructure:"level"`
	// Format is "text" or "json".
	Format string `mapstructure:"format"`
}

// ServeConfig is about the HTTP API (keys serve.*).
type ServeConfig struct {
	// Addr is the host:port the API listens on.
	Addr string `mapstructure:"addr"`
	// Token, when set, is the bearer token every request must carry: one
	// token, whose caller is the process's own owner (Owner), or lines
	// "principal token", one per caller (httpapi.ParseTokens reads it).
	Token Secret `mapstructure:"token"`
	// TokenFile names a file holding Token; Load reads it.
	TokenFile string `mapstructure:"token_file"`
	// MaxBodyBytes bounds a request's body.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// RequestTimeout bounds the handling of one request.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
	// AllowNoToken lets serve listen on an address other than loopback
	// without a token, which it otherwise refuses: anyone who reaches it
	// could submit and cancel jobs.
	AllowNoToken bool `mapstructure:"allow_no_token"`
	// AllowedHosts are more Host header values the API answers ("name"
	// for any port, "name:port", "*" for any), besides the listen address
	// (and its localhost forms when it is loopback); others get a 403,
	// against DNS rebinding.
	AllowedHosts []string `mapstructure:"allowed_hosts"`
	// AllowedOrigins are the origins of other sites whose pages may call
	// the API ("*" for any): they get CORS headers, and their POSTs are
	// not refused as cross-origin.
	AllowedOrigins []string `mapstructure:"allowed_origins"`
}

// JobConfig is about jobs (keys job.*).
type JobConfig struct {
	// WaitTimeout bounds how long 'sudoku submit --wait' and 'sudoku job
	// wait' wait for a job's results; when it passes they stop waiting
	// and exit with status 124, and the job goes on. 0 waits as long as
	// it takes.
	WaitTimeout time.Duration `mapstructure:"wait_timeout"`
	// ResultTTL is how long a job's record and results are kept in
	// JetStream: the results stream's MaxAge and the jobs bucket's TTL,
	// so each is counted from when it was written (a batch's results
	// from when it was solved, the record from its last change, such as
	// the job's finish). 0 keeps them until 'sudoku job rm'. Workers
	// bring existing streams to it when they start; other commands use
	// it only to create the streams when they are missing.
	ResultTTL time.Duration `mapstructure:"result_ttl"`
	// Owner owns the jobs this process submits (a tenant's name:
	// letters, digits, '_' and '-'); "" makes it nats.user, or, without
	// one, "anonymous". Workers take turns between owners; only an owner
	// (or an admin) may cancel or remove its jobs. With roles on, the
	// servers let a user submit only as itself: leave it empty.
	Owner string `mapstructure:"owner"`
}

// Owner returns the owner of the jobs this process submits: job.owner,
// else nats.user, else job.DefaultOwner.
func (c *Config) Owner() string {
	return cmp.Or(c.Job.Owner, c.NATS.User, job.DefaultOwner)
}

// Default returns the configuration used when nothing is set: every key's
// default, as documented in configs/sudoku.yaml. It is the one table of
// defaults (Load gives it to viper, key by key, with SetDefault); a
// default that belongs to another package is taken from it (queue's
// names and limits, the producer's batch sizes, the worker's delays...),
// not stated again. Each call returns a new Config.
func Default() *Config {
	q := queue.DefaultOptions()
	return &Config{
		NATS: NATSConfig{
			URL:            "nats://127.0.0.1:4222",
			Name:           "sudoku",
			ConnectTimeout: 5 * time.Second,
		},
		Redis: RedisConfig{
			Addrs:       []string{"127.0.0.1:6379"},
			KeyPrefix:   "sudoku:",
			DialTimeout: 2 * time.Second,
		},
		Cache: CacheConfig{
			MemoryFallback: true,
		},
		Queue: QueueConfig{
			Stream:            q.Stream,
			SubjectPrefix:     q.Prefix,
			Replicas:          q.Replicas,
			Storage:           "file",
			Consumer:          q.Consumer,
			AckWait:           q.AckWait,
			MaxDeliver:        q.MaxDeliver,
			Backoff:           worker.DefaultNakDelays(),
			MaxAckPending:     q.MaxAckPending,
			BatchSize:         producer.DefaultBatchSize,
			FirstBatchSize:    producer.DefaultFirstBatch,
			MaxMessageBytes:   producer.DefaultMaxMessageBytes,
			DLQStream:         q.DLQStream,
			MaxBytes:          1 << 30,
			ResultsMaxBytes:   4 << 30,
			JobsMaxBytes:      256 << 20,
			DLQMaxAge:         7 * 24 * time.Hour,
			DLQMaxBytes:       1 << 30,
			PublishMaxPending: 256,
		},
		Worker: WorkerConfig{
			ShutdownTimeout: worker.DefaultShutdownTimeout,
			MaxNodes:        solver.DefaultMaxNodes,
			Nice:            DefaultNice,
		},
		Log: LogConfig{
			Level:  "info",
			Format: "text",
		},
		Serve: ServeConfig{
			Addr:           "127.0.0.1:8080",
			MaxBodyBytes:   DefaultMaxBodyBytes,
			RequestTimeout: DefaultRequestTimeout,
			AllowedHosts:   []string{},
			AllowedOrigins: []string{},
		},
		Job: JobConfig{
			ResultTTL: 7 * 24 * time.Hour,
		},
		Quota: QuotaConfig{
			JobsOpen:     DefaultJobsOpen,
			LinesPending: DefaultLinesPending,
			RequestBytes: DefaultRequestBytes,
		},
		Proof: ProofConfig{
			Default: true,
		},
	}
}

// The quotas' defaults: generous for one person or program, bounded for
// a shared service (a million-puzzle job is well within them).
const (
	DefaultJobsOpen     = 10_000
	DefaultLinesPending = 20_000_000
	DefaultRequestBytes = 1 << 30
)

// DefaultNice is worker.nice's default: the nice command's own, a
// priority well below the servers' and clients', so that a worker sharing
// a machine with them leaves them the cores they ask for.
const DefaultNice = 10

// WorkerConcurrency returns the number of solving goroutines a worker
// runs: Worker.Concurrency, or GOMAXPROCS when that is 0.
func (c Config) WorkerConcurrency() int {
	if c.Worker.Concurrency > 0 {
		return c.Worker.Concurrency
	}
	return runtime.GOMAXPROCS(0)
}

// WorkerHeartbeat returns the interval of a worker's progress heartbeats:
// Worker.Heartbeat, or a third of Queue.AckWait when that is 0, so two
// heartbeats may be lost before the server redelivers.
func (c Config) WorkerHeartbeat() time.Duration {
	if c.Worker.Heartbeat > 0 {
		return c.Worker.Heartbeat
	}
	return c.Queue.AckWait / 3
}

// Secret is a string that must not be shown: its String, GoString,
// MarshalText and LogValue give "[redacted]" (or "" when it is empty), so
// printing or logging a Config by mistake does not leak it. Reveal gives
// the value itself.
type Secret string

// redacted is what a non-empty secret shows.
const redacted = "[redacted]"

// Reveal returns the secret's value, for handing it to a client library.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString returns the redacted form for %#v.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// MarshalText returns the redacted form, for encoders such as
// encoding/json.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue returns the redacted form for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// On reports whether TLS is to be used: Enabled, or any file set.
func (t TLSConfig) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != ""
}

// ClientConfig returns the *tls.Config these settings describe, reading
// the files, or nil when TLS is off (see On). Its errors name the file
// by its key within the section (ca_file, cert_file, key_file): the caller
// adds the section ("nats.tls: ").
func (t TLSConfig) ClientConfig() (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	conf := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as test-only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file %q: %w", t.CAFile, pathless(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %q: no PEM certificate in it", t.CAFile)
		}
		conf.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file %q, key_file %q: %w", t.CertFile, t.KeyFile, pathless(err))
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// SlogLevel returns Level as a slog.Level, or slog.LevelInfo if it does
// not parse (Validate rejects that).
func (l LogConfig) SlogLevel() slog.Level {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.Level)); err != nil {
		return slog.LevelInfo
	}
	return lvl
}

// Handler returns a slog.Handler writing to w in Format ("json", else
// text) at Level.
func (l LogConfig) Handler(w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: l.SlogLevel()}
	if l.Format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// The defaults of serve.max_body_bytes and serve.request_timeout (and so
// of httpapi.Options).
const (
	DefaultMaxBodyBytes   = 64 << 20
	DefaultRequestTimeout = 30 * time.Second
)
