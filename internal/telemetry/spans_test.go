package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// recording turns tracing on, into a span recorder, for one test.
func recording(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	restore := install(tp)
	t.Cleanup(func() { restore(); _ = tp.Shutdown(context.Background()) })
	return rec
}

const parentHeader = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestHTTPHandler(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		// The handler runs in the request's span.
		if !trace.SpanContextFromContext(r.Context()).IsValid() {
			t.Error("no span in the handler's context")
		}
	})
	mux.HandleFunc("/v1/", func(http.ResponseWriter, *http.Request) {})
	rec := recording(t)
	h := HTTPHandler(mux, mux)
	for _, tc := range []struct {
		method, path, traceparent string
		wantName                  string
	}{
		{"GET", "/v1/jobs/alice.06h4abc", parentHeader, "GET /v1/jobs/{id}"},
		{"HEAD", "/v1/jobs/alice.06h4abc", "", "HEAD /v1/jobs/{id}"},
		{"POST", "/v1/other/alice.06h4abc", "", "POST /v1/"},
		{"GET", "/nothing/alice.06h4abc", "", "GET"},
	} {
		t.Run(tc.wantName, func(t *testing.T) {
			rec.Reset()
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.traceparent != "" {
				req.Header.Set("traceparent", tc.traceparent)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			if s.Name() != tc.wantName || s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span %q (%v), want %q (server)", s.Name(), s.SpanKind(), tc.wantName)
			}
			if tc.traceparent != "" && s.Parent().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
				t.Errorf("span's parent %v, want the caller's", s.Parent())
			}
		})
	}
}

func TestHTTPHandlerOff(t *testing.T) {
	mux := http.NewServeMux()
	if h := HTTPHandler(mux, mux); h != http.Handler(mux) {
		t.Errorf("the handler is wrapped with tracing off")
	}
}

// fakeRequest is a micro request with headers, recording its answer.
type fakeRequest struct {
	micro.Request // nil: only the methods below are called
	h             nats.Header
	errCode       string
}

func (r *fakeRequest) Headers() micro.Headers { return micro.Headers(r.h) }
func (r *fakeRequest) Subject() string        { return "SUDOKU.svc.submit.alice" }
func (r *fakeRequest) Error(code, _ string, _ []byte, _ ...micro.RespondOpt) error {
	r.errCode = code
	return nil
}

func TestMicroHandler(t *testing.T) {
	rec := recording(t)
	for _, tc := range []struct {
		name        string
		traceparent string
		fail        bool
	}{
		{"joined", parentHeader, false},
		{"root", "", false},
		{"error", parentHeader, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.Reset()
			var inside trace.SpanContext
			h := MicroHandler("submit", "SUDOKU.svc.submit.{caller}", micro.HandlerFunc(func(req micro.Request) {
				inside = trace.SpanContextFromContext(RequestContext(req))
				if tc.fail {
					_ = req.Error("400", "bad", nil)
				}
			}))
			req := &fakeRequest{h: nats.Header{}}
			if tc.traceparent != "" {
				req.h.Set("traceparent", tc.traceparent)
			}
			h.Handle(req)
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			if s.Name() != "process submit" || s.SpanKind() != trace.SpanKindServer || !inside.Equal(s.SpanContext()) {
				t.Errorf("span %q (%v) %v, handler saw %v", s.Name(), s.SpanKind(), s.SpanContext(), inside)
			}
			if joined := s.Parent().IsValid(); joined != (tc.traceparent != "") {
				t.Errorf("span's parent %v with traceparent %q", s.Parent(), tc.traceparent)
			}
			if failed := s.Status().Code.String() == "Error"; failed != tc.fail || (tc.fail && req.errCode != "400") {
				t.Errorf("status %v, answered %q; want failed %v", s.Status(), req.errCode, tc.fail)
			}
		})
	}
}

func TestRequestContextUntraced(t *testing.T) {
	if ctx := RequestContext(&fakeRequest{}); ctx != context.Background() {
		t.Errorf("RequestContext of a request MicroHandler did not wrap = %v", ctx)
	}
}

// BenchmarkBatchSpansOff is what a worker's batch costs in tracing with
// tracing off: reading the headers, the batch's span and its three
// children, as worker.handle makes them.
func BenchmarkBatchSpansOff(b *testing.B) {
	h := nats.Header{"Nats-Msg-Id": []string{"alice.06h4abc.3"}}
	b.ReportAllocs()
	for b.Loop() {
		ctx := Extract(context.Background(), h)
		ctx, span := Tracer().Start(ctx, "process x", trace.WithSpanKind(trace.SpanKindConsumer))
		if span.IsRecording() {
			b.Fatal("recording with tracing off")
		}
		for _, name := range []string{"cache lookup", "solve", "results write"} {
			_, c := Tracer().Start(ctx, name)
			c.End()
		}
		span.End()
	}
}
