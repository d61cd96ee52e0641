package telemetry

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// HTTPHandler wraps h, served through mux, with otelhttp when tracing is
// on: a SERVER span a request, joined to the caller's trace by its
// traceparent header and named after the route mux chooses ("GET
// /v1/jobs/{id}"), never after the path, which holds job ids. With
// tracing off it returns h: no cost a request.
func HTTPHandler(h http.Handler, mux *http.ServeMux) http.Handler {
	if !Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, "http", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		return RouteName(mux, r)
	}))
}

// RouteName is the span name of request r: its method and the pattern
// of the route mux chooses for it, or the method alone when no route
// matches.
func RouteName(mux *http.ServeMux, r *http.Request) string {
	_, p := mux.Handler(r)
	if p == "" {
		return r.Method
	}
	if _, route, ok := strings.Cut(p, " "); ok { // "GET /x" also serves HEAD
		p = route
	}
	return r.Method + " " + p
}
