package roles

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// PermissionError says that a server refused a user something its role
// does not allow. Its message names the server, the user and its role,
// and what was refused.
type PermissionError struct {
	// Server is "NATS" or "Redis".
	Server string
	// User is the configured user name ("" when the credentials name
	// none, such as a token).
	User string
	// What is what was refused: `publish to "$JS.API.STREAM.PURGE.SUDOKU"`,
	// `subscribe to "sudoku.solve"`, `FLUSHALL`, `SET "sudoku:s2:..."`.
	What string
	// Err is the error of the operation that failed: the server's refusal
	// (Redis), or what the client saw meanwhile (NATS, whose refusals are
	// asynchronous: often a timeout).
	Err error

	at time.Time // when a NATS refusal was noted
}

// Error says who was refused what, and the operation's own error.
func (e *PermissionError) Error() string {
	return fmt.Sprintf("%s refused %s: %s is not allowed: %v", e.Server, who(e.User), e.What, e.Err)
}

// Unwrap returns the operation's error.
func (e *PermissionError) Unwrap() error { return e.Err }

// who names a user and its role.
func who(user string) string {
	if user == "" {
		return "the configured credentials"
	}
	if r, ok := Of(user); ok {
		return fmt.Sprintf("user %q (role %s)", user, r)
	}
	return fmt.Sprintf("user %q", user)
}

// violation matches nats.go's text of a permissions violation:
// `nats: permissions violation: Permissions Violation for Publish to "X"`.
var violation = regexp.MustCompile(`(?i)violation for (publish|subscription) to "([^"]*)"`)

// Refusals keeps the permission violations a NATS server reported on a
// connection. The server reports them asynchronously (an -ERR), so the
// operation refused fails only later, often with a timeout: Explain adds
// the refusal to that error. It is safe for concurrent use.
type Refusals struct {
	user     string
	mu       sync.Mutex
	last     *PermissionError
	n        int
	onNote   func(*PermissionError)
	watchers map[*watcher]struct{}
}

// watcher is a Watch: its context is cancelled when a publish to
// subject is refused.
type watcher struct {
	subject string
	cancel  context.CancelCauseFunc
}

// Watch returns a context of ctx that is cancelled, with the
// *PermissionError as its cause (context.Cause), as soon as a refusal of
// publishing to subject is noted on the connection: a request the server
// refuses fails at once instead of at its timeout (NATS refuses without
// answering). Call stop when the request is over. A nil Refusals
// watches nothing.
func (r *Refusals) Watch(ctx context.Context, subject string) (context.Context, context.CancelFunc) {
	if r == nil {
		return context.WithCancel(ctx)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	w := &watcher{subject: subject, cancel: cancel}
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = map[*watcher]struct{}{}
	}
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	return wctx, func() {
		r.mu.Lock()
		delete(r.watchers, w)
		r.mu.Unlock()
		cancel(context.Canceled)
	}
}

// OnNote makes f be called with each refusal Note records, after it is
// recorded (nil: none), on the goroutine that called Note.
func (r *Refusals) OnNote(f func(*PermissionError)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onNote = f
}

// NewRefusals returns the refusals of a connection of user (nats.user).
func NewRefusals(user string) *Refusals { return &Refusals{user: user} }

// last is the latest refusal of any connection of the process, for
// Explain.
var last atomic.Pointer[PermissionError]

// Note records err, an asynchronous error of the connection, when it is
// a permissions violation, and returns it as a *PermissionError (ok
// false, and nothing recorded, for other errors).
func (r *Refusals) Note(err error) (pe *PermissionError, ok bool) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil, false
	}
	what, published := "an operation", ""
	if m := violation.FindStringSubmatch(err.Error()); m != nil {
		verb := "publish to"
		if m[1] == "subscription" || m[1] == "Subscription" {
			verb = "subscribe to"
		} else {
			published = m[2]
		}
		what = fmt.Sprintf("%s %q", verb, m[2])
	}
	pe = &PermissionError{Server: "NATS", User: r.user, What: what, Err: err, at: time.Now()}
	r.mu.Lock()
	r.last, r.n = pe, r.n+1
	f := r.onNote
	for w := range r.watchers {
		if published != "" && w.subject == published {
			w.cancel(pe)
		}
	}
	r.mu.Unlock()
	last.Store(pe)
	if f != nil {
		f(pe)
	}
	return pe, true
}

// Count returns how many refusals were recorded.
func (r *Refusals) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Explain returns err as a *PermissionError naming the latest refusal on
// the connection, when there was one and err is not one already; else err.
func (r *Refusals) Explain(err error) error {
	r.mu.Lock()
	pe := r.last
	r.mu.Unlock()
	return explain(pe, err)
}

// ExplainSince is Refusals.Explain with the latest refusal of any
// connection of the process, if it was noted at or after start: for a
// command's final error (start: when the command started).
func ExplainSince(start time.Time, err error) error {
	pe := last.Load()
	if pe != nil && pe.at.Before(start) {
		pe = nil
	}
	return explain(pe, err)
}

func explain(pe *PermissionError, err error) error {
	var already *PermissionError
	if err == nil || pe == nil || errors.As(err, &already) {
		return err
	}
	return &PermissionError{Server: pe.Server, User: pe.User, What: pe.What, Err: err, at: pe.at}
}

// RedisHook returns a go-redis hook that turns each NOPERM error (the
// command, or a key it names, is not allowed) into a *PermissionError
// naming user (redis.username) and the command.
func RedisHook(user string) redis.Hook { return redisHook{user} }

type redisHook struct{ user string }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := next(ctx, cmd); err != nil {
			return h.wrap(cmd, err)
		}
		return nil
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cerr := cmd.Err(); cerr != nil {
				perr := h.wrap(cmd, cerr)
				if cerr == err {
					err = perr
				}
			}
		}
		return err
	}
}

// wrap returns err as a *PermissionError when it is a NOPERM, setting it
// as cmd's error too (what its Result and Err return).
func (h redisHook) wrap(cmd redis.Cmder, err error) error {
	var already *PermissionError
	if !redis.HasErrorPrefix(err, "NOPERM") || errors.As(err, &already) {
		return err
	}
	what := strings.ToUpper(cmd.FullName())
	if args := cmd.Args(); len(args) > 1 {
		if key, ok := args[1].(string); ok && cmd.FullName() == cmd.Name() {
			what = fmt.Sprintf("%s %q", what, key)
		}
	}
	pe := &PermissionError{Server: "Redis", User: h.user, What: what, Err: err}
	cmd.SetErr(pe)
	return pe
}
