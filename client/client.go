// Package client is the Go client of sudoku-queue: what a program imports
// to submit bulk Sudoku jobs, follow their results, look jobs up, cancel
// and remove them, and solve one puzzle, against a deployment (NATS
// JetStream, workers, Redis) or an embedded one in the process.
//
// A Client is made with Dial from the same settings as the sudoku command
// (configs/sudoku.yaml's keys: a file, SUDOKU_* variables, or
// Options.Settings). Every call takes a context first and returns typed
// results; its errors match the package's sentinels with errors.Is
// (ErrNotFound, ErrForbidden, ErrQuota, ErrUnavailable, ErrBadInput,
// ErrNoWorker). Every answer a Client returns was checked as the sudoku
// readers check them: a solution against its puzzle's rules and givens,
// "none" and "multiple" by solving.
//
// The sudoku command's doors are adapters over it: its job commands and
// get dial a Client; sudoku serve's HTTP API and the workers' micro
// service hold one Client (New) and act for each caller through As. Who
// may touch which job, the quotas, the growth limit and "look up the
// cache, then solve" are decided here, once.
package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/service"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// The types a Client returns. They are the types every door of
// sudoku-queue encodes (the CLI's JSON, the HTTP API, the micro service),
// so a program sees the same fields under the same names.
type (
	// Result is the answer for one puzzle: its line, status, solution or
	// error.
	Result = result.Result
	// ResultStatus is a Result's outcome: unique, solved (first-solution
	// mode), none, multiple, invalid or gave_up.
	ResultStatus = result.Status
	// Status is where a job stands: its state, counts and times.
	Status = producer.Status
	// Submitted is what a submission did with each line of its input.
	Submitted = producer.Submitted
	// State is a job's state: publishing, published, finished, cancelled
	// or failed.
	State = job.State
	// Priority is a job's share of its owner's turns: low, normal or high.
	Priority = job.Priority
)

// The results' statuses.
const (
	Unique   = result.StatusUnique
	Solved   = result.StatusSolved
	None     = result.StatusNone
	Multiple = result.StatusMultiple
	Invalid  = result.StatusInvalid
	GaveUp   = result.StatusGaveUp
)

// The jobs' states.
const (
	Publishing = job.Publishing
	Published  = job.Published
	Finished   = job.Finished
	Cancelled  = job.Cancelled
	Failed     = job.Failed
)

// The priorities.
const (
	Low    = job.PriorityLow
	Normal = job.PriorityNormal
	High   = job.PriorityHigh
)

// Errors a Client's calls match with errors.Is.
var (
	// ErrNotFound: no such job (never submitted, removed, or expired).
	ErrNotFound = job.ErrNotFound
	// ErrForbidden: the job is another owner's, or the servers refused
	// the user the operation (its role does not allow it).
	ErrForbidden = producer.ErrForbidden
	// ErrQuota: the owner is over one of its quotas; the error names it
	// and its value.
	ErrQuota = job.ErrQuota
	// ErrUnavailable: NATS or JetStream did not answer (in time): retry
	// later.
	ErrUnavailable = errors.New("unavailable")
	// ErrBadInput: the input holds no puzzle, or would take too much room
	// for its size.
	ErrBadInput = errors.New("bad input")
	// ErrNoWorker: no worker answered a one-puzzle solve before its
	// context ended, or none is running.
	ErrNoWorker = producer.ErrNoAnswer
	// ErrNotCached: Get found no result for the puzzle in the cache.
	ErrNotCached = errors.New("not in the cache")
	// ErrJobFailed: Follow or Results on a job whose submission failed.
	ErrJobFailed = producer.ErrJobFailed
	// ErrCancelled: the job was cancelled; what was done before is
	// readable.
	ErrCancelled = job.ErrCancelled
)

// Options say where a Client connects and as whom. The zero value reads
// the configuration the sudoku command would: $SUDOKU_CONFIG and the
// SUDOKU_* variables.
type Options struct {
	// ConfigFile is a configuration file in configs/sudoku.yaml's format;
	// empty: $SUDOKU_CONFIG, else none.
	ConfigFile string
	// Settings set configuration keys ("nats.url", "job.owner",
	// "redis.key_prefix"...), above the environment and the file.
	Settings map[string]string
	// NoEnv ignores the process's SUDOKU_* variables (Settings and the
	// file still apply): for programs that configure the client alone.
	NoEnv bool
	// Embedded starts an in-process NATS server (JetStream in a
	// temporary directory, removed on Close) instead of connecting to
	// nats.url, with LocalWorkers workers in the process: one command,
	// nothing else to run. The cache falls back to the process's memory
	// when Redis does not answer.
	Embedded bool
	// MemoryCache keeps the results cache in the process's memory
	// instead of Redis (lost on Close): for a program that runs
	// everything in itself, with Embedded.
	MemoryCache bool
	// LocalWorkers is the number of solving goroutines of a worker run in
	// this process: 0 is none, unless Embedded, where it is the
	// worker.concurrency setting; below 0 is none. Other workers on the
	// queue share the work.
	LocalWorkers int
	// Logger receives the client's warnings (default: discarded).
	Logger *slog.Logger
	// Flags, if set, are command-line flags named after configuration
	// keys (--nats-url for nats.url, --config for the file), above
	// Settings and the environment: for a command built on the client,
	// as the sudoku command is.
	Flags *pflag.FlagSet
	// NoCache leaves Redis alone: for a program that only looks at jobs
	// (Status, List, Wait, Cancel, Remove, Follow) and needs no cache.
	NoCache bool
	// CacheOnly connects to Redis alone, and Dial fails when it does not
	// answer: for a program that only calls Get.
	CacheOnly bool
	// OnRefusal, if set, is called at once with each request NATS
	// refuses the client's user (the error names the server, the user,
	// its role and what was refused): a one-shot program stops there
	// rather than waiting out its retries.
	OnRefusal func(error)
}

// Client submits and follows jobs. It is safe for concurrent use; Close
// it when done.
type Client struct {
	cfg  *config.Config // nil for New's
	conn *app.Conn
	// ownsConn says Close closes conn (Dial's, not New's).
	ownsConn bool
	log      *slog.Logger
	// base are the settings of the jobs submitted: batches, quota and
	// usage; Owner is the connection's own owner.
	base producer.Options
	// user is the NATS user ("": roles off).
	user  string
	owner string
	// acting says the client is a view made by As, acting for a caller
	// of a door (the HTTP API, the micro service).
	acting     bool
	stopWorker func()
}

// Dial loads the settings (Options), connects to NATS and Redis (or
// starts an embedded NATS server) and returns a Client acting for the
// configured owner (job.owner, else nats.user, else "anonymous").
// A Redis that does not answer is logged and the client goes on without
// the cache: it is only a cache.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := config.Load(config.LoadOptions{File: opts.ConfigFile, Env: envOf(opts), Flags: opts.Flags})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	workers := opts.LocalWorkers
	if workers == 0 && opts.Embedded {
		workers = cfg.WorkerConcurrency()
	}
	oo := app.OpenOptions{NoConsumer: workers <= 0, Embedded: opts.Embedded, AllowMemoryCache: opts.Embedded,
		MemoryCache: opts.MemoryCache, NoCache: opts.NoCache, NoNATS: opts.CacheOnly, RequireCache: opts.CacheOnly}
	if opts.OnRefusal != nil {
		oo.OnRefusal = func(pe *roles.PermissionError) { opts.OnRefusal(pe) }
	}
	conn, err := app.Open(ctx, cfg, oo, log)
	if err != nil {
		return nil, wrap(err)
	}
	c := &Client{cfg: cfg, conn: conn, ownsConn: true, log: log, base: app.ProducerOptions(cfg, log), user: cfg.NATS.User,
		owner: cfg.Owner(), stopWorker: func() {}}
	if workers > 0 {
		ready := make(chan struct{})
		c.stopWorker = c.startWorker(workers, ready)
		select { // its solve endpoint answers once Dial returns
		case <-ready:
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("client: the in-process worker did not start: %w", context.Cause(ctx))
		}
	}
	return c, nil
}

// New returns a Client over conn, a connection already open (its NC,
// Queue set up with queue.Setup, and Cache: a nil one is set to none). Jobs are
// submitted with opts (batches, quota, usage; opts.Owner is the client's
// owner, default job.DefaultOwner). Close leaves conn open.
//
// It is for the sudoku command's own doors (sudoku serve's HTTP API, the
// workers' micro service, the commands that follow a job they publish),
// which open their connection with options of their own (a worker's
// consumer, draining, an embedded server) and hold one Client for every
// caller (As); its argument is of an internal package, so another module
// cannot call it: Dial is the way in.
func New(conn *app.Conn, opts producer.Options) *Client {
	if conn.Cache == nil {
		conn.Cache = cache.NewGuard(nil, cache.GuardOptions{})
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Owner = cmp.Or(opts.Owner, job.DefaultOwner)
	return &Client{conn: conn, log: opts.Logger, base: opts, user: conn.NC.Opts.User, owner: opts.Owner,
		stopWorker: func() {}}
}

// As returns a view of c acting for caller: the jobs it submits are
// caller's, and it reads, follows, cancels and lists jobs as caller may
// (producer.MayTouch: its own, or any for a caller whose role acts for
// others). Its submissions are bounded in growth (producer.DefaultMaxGrowth)
// as a door's must be. It shares c's connection: Close c, not the view.
//
// A door acts for its callers under one NATS user: one that may act for
// any owner (gateway, admin, worker), or any with roles off. Over another
// user, a view's calls on jobs that user's owner may not touch return
// ErrForbidden too, before asking the servers.
func (c *Client) As(caller string) *Client {
	v := *c
	v.owner, v.acting, v.ownsConn, v.stopWorker = caller, true, false, func() {}
	return &v
}

// actsForOthers reports whether the client's NATS user may act for
// other owners: roles off, or a gateway, admin or worker user.
func (c *Client) actsForOthers() bool {
	r, ok := roles.Of(c.user)
	return c.user == "" || !ok || r.Writes() || r == roles.Worker
}

// envOf is the environment Load reads: Options.Settings as SUDOKU_*
// variables, then (unless NoEnv) the process's.
func envOf(opts Options) func(string) (string, bool) {
	set := make(map[string]string, len(opts.Settings))
	for k, v := range opts.Settings {
		set[config.EnvPrefix+strings.ToUpper(strings.ReplaceAll(k, ".", "_"))] = v
	}
	return func(name string) (string, bool) {
		if v, ok := set[name]; ok {
			return v, true
		}
		if opts.NoEnv {
			return "", false
		}
		return os.LookupEnv(name)
	}
}

// startWorker runs a worker of n solving goroutines on the client's
// connection (StartWorker) until the returned stop is called; ready is
// closed once it serves (or has stopped). The client's own submissions
// count their owner's usage on it, as its endpoints' do.
func (c *Client) startWorker(n int, ready chan<- struct{}) (stop func()) {
	opts := app.WorkerOptions(c.cfg, c.log)
	opts.Concurrency = n
	w, stopRun := StartWorker(c.conn, opts, c.base)
	c.base.Usage = w.Usage
	stopped := make(chan struct{})
	go func() {
		select {
		case <-w.Ready():
		case <-stopped:
		}
		close(ready)
	}()
	return func() {
		close(stopped)
		stopRun()
	}
}

// ServiceEndpoints returns the submit, status and cancel endpoints of the
// micro service "sudoku" (docs/protocol.md), each request made through
// the client acting for its caller (As): for worker.Options.Endpoints of
// a worker run beside the client, as the sudoku worker does.
func (c *Client) ServiceEndpoints() []worker.Endpoint {
	return service.Endpoints(c.conn.Queue.Opts, func(caller string) service.Caller {
		v := c.As(caller)
		return service.Caller{Submit: v.submitInput, Status: v.Status, Cancel: v.Cancel}
	}, c.log)
}

// Owner returns the owner the client acts for: its jobs are submitted
// under this name, and only they (or an admin) may cancel or remove them.
func (c *Client) Owner() string { return c.owner }

// Close stops the in-process worker, if any, then closes the connections
// (and stops an embedded server). It is safe to call twice.
func (c *Client) Close() error {
	c.stopWorker()
	c.stopWorker = func() {}
	if c.ownsConn {
		c.conn.Close()
	}
	return nil
}

// wrap makes err match the package's sentinels, its message unchanged:
// ErrUnavailable for NATS or JetStream not answering, ErrBadInput for
// input refused as such.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	switch producer.KindOf(err) {
	case producer.KindUnavailable:
		if !errors.Is(err, ErrUnavailable) {
			return &sentinelError{ErrUnavailable, err}
		}
	case producer.KindBadRequest:
		if !errors.Is(err, ErrBadInput) {
			return &sentinelError{ErrBadInput, err}
		}
	}
	return err
}

// sentinelError is err that matches a sentinel too, with err's message.
type sentinelError struct{ sentinel, err error }

func (e *sentinelError) Error() string   { return e.err.Error() }
func (e *sentinelError) Unwrap() []error { return []error{e.sentinel, e.err} }
