package queue

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// unavailable are the errors of a NATS or JetStream that did not answer,
// or not in time.
var unavailable = []error{context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders,
	nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
	nats.ErrNoStreamResponse, jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled,
	jetstream.ErrJetStreamNotEnabledForAccount, jetstream.ErrNoHeartbeat}

// Unavailable reports whether err says that NATS or JetStream did not
// answer (a server down, a stream or bucket electing a leader, a request
// out of time): a failure of the moment, not of the request, worth trying
// again later.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range unavailable {
		if errors.Is(err, e) {
			return true
		}
	}
	apiErr, ok := errors.AsType[*jetstream.APIError](err)
	return ok && apiErr.Code == 503
}
