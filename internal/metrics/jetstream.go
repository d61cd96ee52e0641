package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The bounds of a JetStreamProbe: how long one request may take, and how
// long its answer is reused.
const (
	JetStreamProbeTimeout = time.Second
	JetStreamProbeTTL     = time.Second
)

// JetStreamProbe asks JetStream whether it serves a queue: the info of
// the queue's work stream ($JS.API.STREAM.INFO.<stream>, one round trip,
// which every role may ask; an account info request is the admin's only).
// A connected NATS server is not enough: one without JetStream (started
// without -js, or reloaded from a file without a jetstream block) answers
// pings while every submit fails.
//
// Its answer is reused for JetStreamProbeTTL, so that probes, however
// frequent, cost the server one request a second at most; requests made
// meanwhile share it. It is safe for concurrent use.
type JetStreamProbe struct {
	js     jetstream.JetStream
	stream string

	mu  sync.Mutex
	at  time.Time // when err was found; zero before the first request
	err error
}

// NewJetStreamProbe returns a probe of the work stream named stream
// through js.
func NewJetStreamProbe(js jetstream.JetStream, stream string) *JetStreamProbe {
	return &JetStreamProbe{js: js, stream: stream}
}

// Check returns nil when JetStream answered with the stream's info within
// JetStreamProbeTimeout (in the last JetStreamProbeTTL), else why not: for
// example "JetStream is not enabled on the NATS server", or the stream
// is missing. The reason names no server: it may be shown to anyone (the
// API's public /readyz).
func (p *JetStreamProbe) Check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < JetStreamProbeTTL {
		return p.err
	}
	rctx, cancel := context.WithTimeout(ctx, JetStreamProbeTimeout)
	defer cancel()
	_, err := p.js.Stream(rctx, p.stream)
	err = p.explain(err)
	if ctx.Err() != nil {
		// The caller gave up (its own deadline, a client gone): that says
		// nothing about JetStream, so it is not kept for the next one.
		return err
	}
	p.at, p.err = time.Now(), err
	return err
}

// explain turns the error of a stream info request into a reason for
// people.
func (p *JetStreamProbe) explain(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		isAPIError(err, jetstream.JSErrCodeJetStreamNotEnabled):
		return fmt.Errorf("JetStream is not enabled on the NATS server (start nats-server with -js, or with a jetstream block in its configuration file): %w", err)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		isAPIError(err, jetstream.JSErrCodeJetStreamNotEnabledForAccount):
		return fmt.Errorf("JetStream is not enabled for this user's account on the NATS server: %w", err)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("the work stream %s does not exist (sudoku setup --apply creates it): %w", p.stream, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("JetStream did not answer within %v (disabled on the NATS server, as a reload from a file without a jetstream block does, or a cluster without a leader): %w", JetStreamProbeTimeout, err)
	}
	return fmt.Errorf("JetStream: %w", err)
}

// isAPIError reports whether err is a JetStream API error with code.
func isAPIError(err error, code jetstream.ErrorCode) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == code
}

// JetStreamCheck is the readiness check "jetstream" of the work stream
// named stream (see JetStreamProbe).
func JetStreamCheck(js jetstream.JetStream, stream string) Check {
	return Check{Name: "jetstream", Func: NewJetStreamProbe(js, stream).Check}
}
