package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
)

// spanCtx is a sampled span context with fixed ids.
func spanCtx(t *testing.T) trace.SpanContext {
	t.Helper()
	tid, err := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex("b7ad6b7169203331")
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}

func TestInjectExtract(t *testing.T) {
	recording(t) // the carrier is tested through the propagator Setup installs
	sc := spanCtx(t)
	const want = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		wantHdr string // the traceparent written, "" for none
	}{
		{"span", trace.ContextWithSpanContext(context.Background(), sc), want},
		{"remote_span", trace.ContextWithRemoteSpanContext(context.Background(), sc), want},
		{"no_span", context.Background(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := nats.Header{"Nats-Msg-Id": []string{"j.1"}}
			Inject(tc.ctx, h)
			if got := h.Get("traceparent"); got != tc.wantHdr {
				t.Fatalf("traceparent %q, want %q", got, tc.wantHdr)
			}
			if got := h.Get("Nats-Msg-Id"); got != "j.1" {
				t.Errorf("Nats-Msg-Id %q: another header was changed", got)
			}
			// What a worker reads back from the message.
			m := nats.NewMsg("x")
			m.Header = h
			got := trace.SpanContextFromContext(Extract(context.Background(), m.Header))
			if tc.wantHdr == "" {
				if got.IsValid() {
					t.Errorf("extracted %v from a message without a traceparent", got)
				}
				return
			}
			if !got.IsRemote() || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() {
				t.Errorf("extracted %+v, want the remote %+v", got, sc)
			}
		})
	}
}

func TestExtractBadHeaders(t *testing.T) {
	recording(t)
	for _, tc := range []struct {
		name string
		h    nats.Header
	}{
		{"nil", nil},
		{"empty", nats.Header{}},
		{"malformed", nats.Header{"traceparent": []string{"00-zz-yy-01"}}},
		{"zero_trace_id", nats.Header{"traceparent": []string{"00-00000000000000000000000000000000-b7ad6b7169203331-01"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if sc := trace.SpanContextFromContext(Extract(context.Background(), tc.h)); sc.IsValid() {
				t.Errorf("extracted %v", sc)
			}
		})
	}
}

func TestHeaderCarrierKeys(t *testing.T) {
	c := HeaderCarrier(nats.Header{})
	c.Set("traceparent", "a")
	c.Set("baggage", "b")
	c.Set("traceparent", "c")
	if got := c.Get("traceparent"); got != "c" {
		t.Errorf("Get after two Sets = %q, want the last", got)
	}
	c2 := HeaderCarrier(nats.Header{"Traceparent": []string{"d"}})
	if got := c2.Get("traceparent"); got != "d" {
		t.Errorf("Get of a name in another case = %q, want d", got)
	}
	keys := c.Keys()
	if len(keys) != 2 {
		t.Errorf("Keys() = %v, want traceparent and baggage", keys)
	}
}

func TestLogHandler(t *testing.T) {
	sc := spanCtx(t)
	withSpan := trace.ContextWithSpanContext(context.Background(), sc)
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		log       func(l *slog.Logger, ctx context.Context)
		wantTrace bool
		wantAttr  string // another attribute that must be there
	}{
		{"with_span", withSpan, func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "m", "k", "v") }, true, "k"},
		{"without_span", context.Background(), func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "m", "k", "v") }, false, "k"},
		{"no_context", withSpan, func(l *slog.Logger, _ context.Context) { l.Info("m", "k", "v") }, false, "k"},
		{"with_attrs", withSpan, func(l *slog.Logger, ctx context.Context) { l.With("w", 1).WarnContext(ctx, "m") }, true, "w"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil)))
			tc.log(l, tc.ctx)
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if _, ok := rec[tc.wantAttr]; !ok {
				t.Errorf("no %s: %s", tc.wantAttr, buf.String())
			}
			tid, sid := rec[LogTraceID], rec[LogSpanID]
			if !tc.wantTrace {
				if tid != nil || sid != nil {
					t.Errorf("trace attributes without a span: %s", buf.String())
				}
				return
			}
			if tid != sc.TraceID().String() || sid != sc.SpanID().String() {
				t.Errorf("trace_id %v span_id %v, want %s %s", tid, sid, sc.TraceID(), sc.SpanID())
			}
		})
	}
}

func TestLogHandlerLevel(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(NewLogHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	l.InfoContext(trace.ContextWithSpanContext(context.Background(), spanCtx(t)), "hidden")
	if buf.Len() != 0 {
		t.Errorf("a record below the level was written: %s", buf.String())
	}
}

func TestConfigured(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces_endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false},
		{"disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false},
		{"not_disabled", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, true},
		{"other_otel_setting", map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Configured(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("Configured = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSetupOff checks that without configuration Setup installs nothing:
// spans are the no-op ones and no header is written.
func TestSetupOff(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"} {
		t.Setenv(k, "")
	}
	shutdown, err := Setup(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	if Enabled() {
		t.Fatal("Enabled after Setup without configuration")
	}
	ctx, span := Tracer().Start(context.Background(), "x")
	defer span.End()
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Errorf("a span records with tracing off")
	}
	h := nats.Header{}
	Inject(ctx, h)
	if len(h) != 0 {
		t.Errorf("headers written with tracing off: %v", h)
	}
	in := nats.Header{"traceparent": []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	if sc := trace.SpanContextFromContext(Extract(context.Background(), in)); sc.IsValid() {
		t.Errorf("a traceparent read with tracing off: %v", sc)
	}
}
