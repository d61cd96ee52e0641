package telemetry

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderCarrier adapts NATS message headers to a text-map carrier, so
// that a propagator writes and reads the W3C traceparent (and baggage)
// of a message. NATS keeps header names as they are written, and the
// W3C propagator writes and reads them in lower case.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key, or "". NATS header names are case
// sensitive; a name written in another case (such as "Traceparent" by a
// bridge that canonicalizes HTTP headers) is found too.
func (c HeaderCarrier) Get(key string) string {
	if v, ok := c[key]; ok && len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set sets key to value, replacing its values.
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys returns the names of the headers.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the trace context of ctx into h (which must not be nil).
// It writes nothing when ctx carries no span, as with tracing off.
func Inject(ctx context.Context, h nats.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(h))
}

// Extract returns ctx with the remote trace context that h carries, if
// any: the parent of the span that handles the message. With tracing off
// it returns ctx.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 || !Enabled() {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(h))
}
