package producer

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// Kind is what went wrong with a call on a job, named once here for every
// door to answer in its own words: the CLI with an exit status and a
// message, the HTTP API with a status and a code, the micro service with
// its error code.
type Kind string

// The kinds of failure. A failure of a submission that stopped after its
// job was created also matches ErrSubmit: the job exists, marked failed.
const (
	// KindBadRequest is the caller's mistake: no puzzle in the input, or
	// results that would take too much room for its size.
	KindBadRequest Kind = "bad_request"
	// KindNotFound names a job that does not exist (never submitted,
	// removed, or expired).
	KindNotFound Kind = "not_found"
	// KindUnavailable is JetStream not answering, or not in time: retry
	// later.
	KindUnavailable Kind = "unavailable"
	// KindInternal is any other failure.
	KindInternal Kind = "internal"
)

// unavailable are the errors of a NATS or JetStream that did not answer.
var unavailable = []error{context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders,
	nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
	jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled, jetstream.ErrJetStreamNotEnabledForAccount,
	jetstream.ErrNoHeartbeat}

// KindOf returns the kind of err, an error of this package's calls (nil:
// "").
func KindOf(err error) Kind {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, input.ErrEmpty), errors.Is(err, ErrTooMuchGrowth):
		return KindBadRequest
	case errors.Is(err, job.ErrNotFound):
		return KindNotFound
	}
	for _, e := range unavailable {
		if errors.Is(err, e) {
			return KindUnavailable
		}
	}
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); ok && apiErr.Code == 503 {
		return KindUnavailable
	}
	return KindInternal
}
