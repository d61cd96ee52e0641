package worker

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
)

// startSpan starts the batch's span, a child of the span whose
// traceparent the message carries (its submit's), and returns ctx with
// it. With tracing off the span is the no-op one and nothing is set.
func (t *task) startSpan(ctx context.Context, md *jetstream.MsgMetadata) context.Context {
	tmpl := t.w.q.Opts.WorkSubjectTemplate()
	ctx = telemetry.Extract(ctx, t.m.Headers())
	ctx, t.span = telemetry.Tracer().Start(ctx, "process "+tmpl, trace.WithSpanKind(trace.SpanKindConsumer))
	t.ctx = ctx
	if t.span.IsRecording() {
		t.span.SetAttributes(telemetry.NATS, telemetry.MessagingOperationType.String("process"),
			telemetry.MessagingOperationName.String("process"), telemetry.MessagingDestTemplate.String(tmpl),
			telemetry.MessagingBodySize.Int(len(t.m.Data())),
			telemetry.MessagingDeliveryCount.Int64(int64(t.delivered)))
		if id := t.m.Headers().Get(nats.MsgIdHdr); id != "" {
			t.span.SetAttributes(telemetry.MessagingMessageID.String(id))
		}
		if md != nil {
			t.span.SetAttributes(telemetry.MessagingConsumerGroup.String(md.Consumer))
		}
	}
	return ctx
}

// endSpan ends the batch's span with its outcome.
func (t *task) endSpan() {
	if t.span == nil {
		return
	}
	if t.span.IsRecording() {
		t.span.SetAttributes(telemetry.Outcome.String(t.st.Outcome))
		if t.st.Outcome != OutcomeAcked && t.st.Outcome != OutcomeDropped && t.st.Err != nil {
			t.span.RecordError(t.st.Err)
			t.span.SetStatus(codes.Error, t.st.Err.Error())
		}
	}
	t.span.End()
}

// endSpan ends span, failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// lookup looks keys up in the cache (LookupBatch) in a span of its own,
// "cache lookup", when there is something to look up.
func (w *Worker) lookup(ctx context.Context, keys []job.Key) []*job.Outcome {
	if len(keys) > 0 {
		var span trace.Span
		ctx, span = telemetry.Tracer().Start(ctx, "cache lookup")
		defer span.End()
	}
	hits, _ := w.cache.LookupBatch(ctx, keys)
	return hits
}
