// Package telemetry sets up OpenTelemetry tracing from the standard
// OTEL_* environment variables, and holds what the rest of the service
// shares to trace a job across processes: the tracer, a text-map carrier
// over NATS headers (W3C traceparent), the messaging attributes, and a
// slog handler that adds trace_id and span_id to log lines.
//
// Tracing is off unless an OTLP endpoint or OTEL_TRACES_EXPORTER is set:
// then the global tracer provider stays OpenTelemetry's no-op one, no
// header is written and no exporter runs.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the service's spans.
const ScopeName = "github.com/sudoku-queue/sudoku-queue"

// tracer holds the service's tracer: OpenTelemetry's no-op one until
// Setup installs a provider (a span start then costs no lock and no
// allocation).
var tracer atomic.Pointer[trace.Tracer]

func init() {
	t := noop.NewTracerProvider().Tracer(ScopeName)
	tracer.Store(&t)
}

// enabled is whether Setup installed a tracer provider.
var enabled atomic.Bool

// Tracer returns the tracer of the service's spans.
func Tracer() trace.Tracer { return *tracer.Load() }

// Enabled reports whether tracing is on (Setup found it configured). Code
// that would cost something even with the no-op tracer (such as wrapping
// an HTTP handler) checks it first.
func Enabled() bool { return enabled.Load() }

// Configured reports whether getenv configures tracing: an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// an exporter named in OTEL_TRACES_EXPORTER other than "none", and the
// SDK not disabled by OTEL_SDK_DISABLED=true.
func Configured(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return true
	}
}

// Setup installs a tracer provider exporting through the exporter the
// OTEL_* variables choose (autoexport: OTLP over HTTP/protobuf by
// default, or gRPC with OTEL_EXPORTER_OTLP_PROTOCOL=grpc; "console"
// prints spans), with service.name set to service unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise, and the
// W3C trace-context and baggage propagators. When tracing is not
// configured (Configured) it does nothing. The returned shutdown flushes
// the spans still buffered and stops the exporter: call it before the
// process exits; it is never nil.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	nothing := func(context.Context) error { return nil }
	if !Configured(os.Getenv) {
		return nothing, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nothing, fmt.Errorf("telemetry: the trace exporter: %w", err)
	}
	// Later detectors win: the environment overrides the default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID(),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nothing, fmt.Errorf("telemetry: the resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	install(tp)
	return func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("telemetry: flush the spans: %w", err)
		}
		return nil
	}, nil
}

// install makes tp the service's tracer provider (and the global one), with the W3C
// trace-context and baggage propagators, and turns Enabled on. It
// returns what puts back the provider and propagator that were there
// (for tests).
func install(tp trace.TracerProvider) (restore func()) {
	old, oldProp := tracer.Load(), otel.GetTextMapPropagator()
	t := tp.Tracer(ScopeName)
	tracer.Store(&t)
	otel.SetTracerProvider(tp) // otelhttp's
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
	return func() {
		tracer.Store(old)
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(oldProp)
		enabled.Store(false)
	}
}
