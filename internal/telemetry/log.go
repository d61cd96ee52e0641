package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys of the trace context.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler wraps a slog handler: a record logged with a context that
// carries a span (logger.InfoContext(ctx, ...)) gets trace_id and span_id
// attributes, in hex as trace viewers show them. Records without one
// pass as they are.
type LogHandler struct{ next slog.Handler }

// NewLogHandler returns next wrapped in a LogHandler.
func NewLogHandler(next slog.Handler) *LogHandler { return &LogHandler{next: next} }

// Enabled reports whether next handles records at level.
func (h *LogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds the trace context of ctx to r, if any, and passes it on.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a LogHandler over next.WithAttrs(attrs).
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a LogHandler over next.WithGroup(name): the trace
// attributes of its records go in the group.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name)}
}
