package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/nice"
)

// ErrUnknownKey is wrapped by the *Error for a key in the configuration
// file that is no setting (a typo, or a key of another version), and for
// a removed key (worker.fetch) set in the file or the environment.
var ErrUnknownKey = errors.New("unknown key")

// Error is a bad setting. It names the key, the value as given (empty for
// a secret, whose value is never shown) and where the value came from,
// and prints as
//
//	config: worker.concurrency = -1 (from $SUDOKU_WORKER_CONCURRENCY): must be >= 0
type Error struct {
	Key    string // the key, such as "worker.concurrency"
	Value  string // the value, formatted (strings quoted); "" for a secret
	Source string // a file name, "$SUDOKU_...", "--flag", or "" for a default
	Err    error  // what is wrong with it
}

// Error returns the message described on the type.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	b.WriteString(e.Key)
	if e.Value != "" {
		b.WriteString(" = ")
		b.WriteString(e.Value)
	}
	if e.Source != "" {
		b.WriteString(" (from ")
		b.WriteString(e.Source)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// sortErrors sorts *Errors by key.
func sortErrors(errs []error) {
	slices.SortStableFunc(errs, func(a, b error) int {
		var ea, eb *Error
		errors.As(a, &ea)
		errors.As(b, &eb)
		if ea == nil || eb == nil {
			return 0
		}
		return strings.Compare(ea.Key, eb.Key)
	})
}

// maxBatchSize bounds queue.batch_size: beyond it one message costs more
// memory than it saves in messaging.
const maxBatchSize = 100_000

// maxMessageBytes is the largest payload a NATS server accepts.
const maxMessageBytes = 64 << 20

// Validate checks every setting and returns nil, or all the problems
// joined (errors.Join), each an *Error naming the key and the bad value.
// Load calls it; call it again after changing a loaded Config.
func (c Config) Validate() error {
	return errors.Join(c.problems()...)
}

// problems returns one *Error per bad setting.
func (c Config) problems() []error {
	var p problems

	// nats
	n := c.NATS
	if strings.TrimSpace(n.URL) == "" {
		p.add("nats.url", n.URL, "must not be empty")
	}
	for entry := range strings.SplitSeq(n.URL, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" && strings.TrimSpace(n.URL) != "" {
			p.add("nats.url", redactURLs(n.URL), "has an empty entry")
			continue
		}
		if err := checkNATSURL(entry); err != nil && entry != "" {
			p.add("nats.url", redactURLs(entry), err.Error())
		}
	}
	if n.Password != "" && n.User == "" {
		p.addSecret("nats.password", "is set but nats.user is empty")
	}
	if n.User != "" && n.Password == "" {
		p.add("nats.user", n.User, "is set but nats.password is empty")
	}
	if n.Token != "" && n.User != "" {
		p.addSecret("nats.token", "is set together with nats.user; use one of them")
	}
	if n.CredsFile != "" && n.NKeyFile != "" {
		p.add("nats.nkey_file", n.NKeyFile, "is set together with nats.creds_file; use one of them")
	}
	p.tls("nats.tls", n.TLS)
	p.positive("nats.connect_timeout", n.ConnectTimeout)

	// redis
	r := c.Redis
	if len(r.Addrs) == 0 {
		p.add("redis.addrs", r.Addrs, "must name at least one host:port")
	}
	for _, addr := range r.Addrs {
		if err := checkHostPort(addr, true, false); err != nil {
			p.add("redis.addrs", addr, err.Error())
		}
	}
	if r.DB < 0 {
		p.add("redis.db", r.DB, "must be >= 0")
	}
	if r.DB != 0 && len(r.Addrs) > 1 && r.MasterName == "" {
		p.add("redis.db", r.DB, "must be 0 for a Redis Cluster (several redis.addrs without redis.master_name)")
	}
	p.tls("redis.tls", r.TLS)
	p.positive("redis.dial_timeout", r.DialTimeout)
	p.atLeast("redis.pool_size", r.PoolSize, 0)

	// cache
	p.nonNegative("cache.ttl", c.Cache.TTL)

	// queue
	q := c.Queue
	p.name("queue.stream", q.Stream)
	p.name("queue.dlq_stream", q.DLQStream)
	if q.DLQStream == q.Stream && q.Stream != "" {
		p.add("queue.dlq_stream", q.DLQStream, "must differ from queue.stream")
	}
	p.name("queue.consumer", q.Consumer)
	if err := checkSubjectPrefix(q.SubjectPrefix); err != nil {
		p.add("queue.subject_prefix", q.SubjectPrefix, err.Error())
	}
	if q.Replicas < 1 || q.Replicas > 5 {
		p.add("queue.replicas", q.Replicas, "must be between 1 and 5")
	}
	if q.Storage != "file" && q.Storage != "memory" {
		p.add("queue.storage", q.Storage, `must be "file" or "memory"`)
	}
	p.nonNegative("queue.max_age", q.MaxAge)
	p.nonNegative("queue.dlq_max_age", q.DLQMaxAge)
	for key, v := range map[string]int64{"queue.max_bytes": q.MaxBytes, "queue.results_max_bytes": q.ResultsMaxBytes,
		"queue.dlq_max_bytes": q.DLQMaxBytes} {
		if v < 0 {
			p.add(key, v, "must be 0 (no bound) or more")
		}
	}
	p.positive("queue.ack_wait", q.AckWait)
	p.atLeast("queue.max_deliver", q.MaxDeliver, 1)
	for _, d := range q.Backoff {
		if d <= 0 {
			p.add("queue.backoff", q.Backoff, "entries must be > 0")
			break
		}
	}
	if q.MaxDeliver >= 1 && len(q.Backoff) >= q.MaxDeliver {
		p.add("queue.backoff", q.Backoff, fmt.Sprintf(
			"has %d entries; it needs fewer than queue.max_deliver = %d", len(q.Backoff), q.MaxDeliver))
	}
	p.atLeast("queue.max_ack_pending", q.MaxAckPending, 1)
	if q.BatchSize < 1 || q.BatchSize > maxBatchSize {
		p.add("queue.batch_size", q.BatchSize, fmt.Sprintf("must be between 1 and %d", maxBatchSize))
	}
	if q.FirstBatchSize < 1 || q.FirstBatchSize > maxBatchSize {
		p.add("queue.first_batch_size", q.FirstBatchSize, fmt.Sprintf("must be between 1 and %d", maxBatchSize))
	}
	if q.MaxMessageBytes < 1 || q.MaxMessageBytes > maxMessageBytes {
		p.add("queue.max_message_bytes", q.MaxMessageBytes, fmt.Sprintf("must be between 1 and %d (64 MiB)", maxMessageBytes))
	}
	p.atLeast("queue.publish_max_pending", q.PublishMaxPending, 1)

	// worker
	w := c.Worker
	p.atLeast("worker.concurrency", w.Concurrency, 0)
	p.nonNegative("worker.shutdown_timeout", w.ShutdownTimeout)
	p.nonNegative("worker.heartbeat", w.Heartbeat)
	if w.Nice < 0 || w.Nice > nice.Max {
		p.add("worker.nice", w.Nice, fmt.Sprintf("must be between 0 and %d", nice.Max))
	}
	if w.Heartbeat > 0 && q.AckWait > 0 && w.Heartbeat >= q.AckWait {
		p.add("worker.heartbeat", w.Heartbeat, fmt.Sprintf("must be shorter than queue.ack_wait = %s", q.AckWait))
	}

	// metrics
	if c.Metrics.Addr != "" {
		if err := checkHostPort(c.Metrics.Addr, false, true); err != nil {
			p.add("metrics.addr", c.Metrics.Addr, err.Error())
		}
	}

	// log
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Log.Level)); err != nil {
		p.add("log.level", c.Log.Level, "must be debug, info, warn or error")
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		p.add("log.format", c.Log.Format, `must be "text" or "json"`)
	}

	// serve
	s := c.Serve
	if err := checkHostPort(s.Addr, false, true); err != nil {
		p.add("serve.addr", s.Addr, err.Error())
	}
	if s.MaxBodyBytes < 1 {
		p.add("serve.max_body_bytes", s.MaxBodyBytes, "must be > 0")
	}
	p.positive("serve.request_timeout", s.RequestTimeout)
	for _, h := range s.AllowedHosts {
		if err := CheckAllowedHost(h); err != nil {
			p.add("serve.allowed_hosts", h, err.Error())
		}
	}
	for _, o := range s.AllowedOrigins {
		if err := CheckAllowedOrigin(o); err != nil {
			p.add("serve.allowed_origins", o, err.Error())
		}
	}

	// job
	p.nonNegative("job.wait_timeout", c.Job.WaitTimeout)
	p.nonNegative("job.result_ttl", c.Job.ResultTTL)
	if c.Job.Owner != "" {
		if err := job.CheckOwner(c.Job.Owner); err != nil {
			p.add("job.owner", c.Job.Owner, err.Error())
		}
	}

	// quota
	if c.Quota.JobsOpen < 0 {
		p.add("quota.jobs_open", c.Quota.JobsOpen, "must be >= 0 (0: no bound)")
	}
	if c.Quota.LinesPending < 0 {
		p.add("quota.lines_pending", c.Quota.LinesPending, "must be >= 0 (0: no bound)")
	}
	if c.Quota.RequestBytes < 0 {
		p.add("quota.request_bytes", c.Quota.RequestBytes, "must be >= 0 (0: no bound)")
	}

	return p.errs
}

// problems collects *Errors.
type problems struct{ errs []error }

// add records that key's value is wrong for reason.
func (p *problems) add(key string, value any, reason string) {
	p.errs = append(p.errs, &Error{Key: key, Value: formatValue(value), Err: errors.New(reason)})
}

// addSecret records that a secret key is wrong, without its value.
func (p *problems) addSecret(key, reason string) {
	p.errs = append(p.errs, &Error{Key: key, Err: errors.New(reason)})
}

func (p *problems) positive(key string, d time.Duration) {
	if d <= 0 {
		p.add(key, d, "must be > 0")
	}
}

func (p *problems) nonNegative(key string, d time.Duration) {
	if d < 0 {
		p.add(key, d, "must be >= 0")
	}
}

func (p *problems) atLeast(key string, n, least int) {
	if n < least {
		p.add(key, n, fmt.Sprintf("must be >= %d", least))
	}
}

// name checks a JetStream stream or consumer name.
func (p *problems) name(key, name string) {
	switch {
	case name == "":
		p.add(key, name, "must not be empty")
	case strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r == 0x7f || strings.ContainsRune(".*>/\\", r)
	}):
		p.add(key, name, `must not contain white space, ".", "*", ">", "/" or "\"`)
	}
}

// tls checks a TLS section: a client certificate needs its key.
func (p *problems) tls(prefix string, t TLSConfig) {
	if t.CertFile != "" && t.KeyFile == "" {
		p.add(prefix+".key_file", t.KeyFile, prefix+".cert_file is set; set its key too")
	}
	if t.KeyFile != "" && t.CertFile == "" {
		p.add(prefix+".cert_file", t.CertFile, prefix+".key_file is set; set its certificate too")
	}
}

// formatValue formats a setting's value for an error message.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []string:
		return formatRaw(x)
	case []time.Duration:
		parts := make([]string, len(x))
		for i, d := range x {
			parts[i] = d.String()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// checkNATSURL checks one entry of nats.url: a URL with scheme nats, tls,
// ws or wss and a host, or a bare host:port. Its errors do not quote the
// entry, which may hold a password.
func checkNATSURL(entry string) error {
	if !strings.Contains(entry, "://") {
		return checkHostPort(entry, true, false)
	}
	u, err := url.Parse(entry)
	if err != nil {
		return errors.New("is not a valid URL")
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Errorf("scheme %q must be nats, tls, ws or wss", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("has no host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return errors.New("port must be between 1 and 65535")
		}
	}
	return nil
}

// checkHostPort checks a host:port address. A dialled address needs a
// host; a listening one may leave it empty (all interfaces) and use port
// 0 (any free port).
func checkHostPort(addr string, needHost, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("must be host:port")
	}
	if needHost && host == "" {
		return errors.New("must be host:port with a host")
	}
	least := 1
	if listen {
		least = 0
	}
	if n, err := strconv.Atoi(port); err != nil || n < least || n > 65535 {
		return fmt.Errorf("port must be a number between %d and 65535", least)
	}
	return nil
}

// checkSubjectPrefix checks a subject prefix: dot-separated tokens
// without wildcards or white space.
func checkSubjectPrefix(prefix string) error {
	if prefix == "" {
		return errors.New("must not be empty")
	}
	for tok := range strings.SplitSeq(prefix, ".") {
		if tok == "" {
			return errors.New("must not have an empty token (a leading, trailing or double '.')")
		}
		if strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '*' || r == '>' }) {
			return errors.New(`must not contain white space, "*" or ">"`)
		}
	}
	return nil
}

// redactURLs returns a comma-separated list of NATS URLs with the user
// information (user:password@ or token@) of each replaced by
// "[redacted]". It works on text that does not parse as a URL too.
func redactURLs(list string) string {
	entries := strings.Split(list, ",")
	for i, e := range entries {
		rest := e
		scheme := ""
		if j := strings.Index(e, "://"); j >= 0 {
			scheme, rest = e[:j+3], e[j+3:]
		}
		authority := rest
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			authority = rest[:j]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			entries[i] = scheme + redacted + rest[at:]
		}
	}
	return strings.Join(entries, ",")
}

// CheckAllowedHost returns an error when h cannot be an entry of
// serve.allowed_hosts: a host name or IP address, with or without a
// port, or "*".
func CheckAllowedHost(h string) error {
	if h == "*" {
		return nil
	}
	if strings.ContainsAny(h, "/@?#* \t") {
		return fmt.Errorf("allowed host %q: want a host name or address, with or without :port (no scheme, no path)", h)
	}
	name := h
	if host, port, err := net.SplitHostPort(h); err == nil {
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("allowed host %q: bad port %q", h, port)
		}
		name = host
	} else if strings.Contains(h, ":") && net.ParseIP(strings.Trim(h, "[]")) == nil {
		return fmt.Errorf("allowed host %q: want a host name or address, with or without :port: %w", h, err)
	}
	name = strings.Trim(name, "[]")
	if name == "" {
		return fmt.Errorf("allowed host %q: no host name", h)
	}
	return nil
}

// CheckAllowedOrigin returns an error when o cannot be an entry of
// serve.allowed_origins: "*", or scheme://host[:port] with nothing
// after.
func CheckAllowedOrigin(o string) error {
	if o == "*" {
		return nil
	}
	if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil {
		return fmt.Errorf("allowed origin %q: want scheme://host[:port] or *: %w", o, err)
	}
	return nil
}
