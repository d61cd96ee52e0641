package telemetry

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracedRequest is a micro request with the context of its span.
type tracedRequest struct {
	micro.Request
	ctx context.Context
}

// Context returns the context of the request's span.
func (r tracedRequest) Context() context.Context { return r.ctx }

// Error answers with an error, and marks the span failed.
func (r tracedRequest) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	span := trace.SpanFromContext(r.ctx)
	span.SetStatus(codes.Error, code+": "+description)
	return r.Request.Error(code, description, data, opts...)
}

// MicroHandler wraps the handler of a micro service endpoint: with
// tracing on, each request gets a SERVER span named "process NAME",
// joined to the caller's trace through the request's headers; the
// handler reads its context with RequestContext. With tracing off it
// returns h.
func MicroHandler(name, subjectTemplate string, h micro.Handler) micro.Handler {
	if !Enabled() {
		return h
	}
	return micro.HandlerFunc(func(req micro.Request) {
		ctx := Extract(context.Background(), nats.Header(req.Headers()))
		ctx, span := Tracer().Start(ctx, "process "+name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(NATS, MessagingOperationType.String("process"),
				MessagingOperationName.String(name), MessagingDestTemplate.String(subjectTemplate)))
		defer span.End()
		h.Handle(tracedRequest{Request: req, ctx: ctx})
	})
}

// RequestContext returns the context of a request that MicroHandler
// passed on (with its span), else context.Background().
func RequestContext(req micro.Request) context.Context {
	if r, ok := req.(interface{ Context() context.Context }); ok {
		return r.Context()
	}
	return context.Background()
}
