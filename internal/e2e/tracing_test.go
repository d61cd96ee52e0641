package e2e

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it keeps every span the
// processes export, with the service.name of its resource.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []recvSpan
	bad   []string // requests that did not decode
}

// recvSpan is a span as received, with its process's service.name.
type recvSpan struct {
	service string
	*tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil && r.URL.Path == "/v1/traces" {
		err = proto.Unmarshal(body, &req)
	} else if err == nil {
		err = io.ErrUnexpectedEOF
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.bad = append(o.bad, r.URL.Path+": "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.addLocked(&req)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// add keeps the spans of req.
func (o *otlpReceiver) add(req *coltracepb.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.addLocked(req)
}

func (o *otlpReceiver) addLocked(req *coltracepb.ExportTraceServiceRequest) {
	for _, rs := range req.ResourceSpans {
		svc := attrString(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans = append(o.spans, recvSpan{service: svc, Span: s})
			}
		}
	}
}

// received returns the spans received so far.
func (o *otlpReceiver) received() ([]recvSpan, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]recvSpan(nil), o.spans...), append([]string(nil), o.bad...)
}

// attrString returns the string value of attribute key, or "".
func attrString(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.Key == key {
			if s, ok := kv.Value.Value.(*commonpb.AnyValue_StringValue); ok {
				return s.StringValue
			}
			return kv.Value.String()
		}
	}
	return ""
}

// attrInt returns the integer value of attribute key, and whether it is
// one.
func attrInt(attrs []*commonpb.KeyValue, key string) (int64, bool) {
	for _, kv := range attrs {
		if kv.Key == key {
			if i, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return i.IntValue, true
			}
		}
	}
	return 0, false
}

// TestTraceOfAJob runs a job through a worker process and a submit
// process, both exporting spans to an in-test OTLP receiver, over HTTP
// and over gRPC, and checks the trace: the submit's PRODUCER span and every batch's
// CONSUMER span in the worker share one trace id, each batch span the
// child of the submit's (through the work message's traceparent) with
// its cache lookup, solve and results write below it; the follow of
// --wait is in the same trace; the messaging attributes are set; and no
// span's name holds the job's id.
func TestTraceOfAJob(t *testing.T) {
	ns, rs := testenv.NATSServer(t), testenv.RedisServer(t)
	for _, tc := range []struct {
		protocol string
		serve    func(t *testing.T, recv *otlpReceiver) (endpoint string)
	}{
		{"http/protobuf", func(t *testing.T, recv *otlpReceiver) string {
			srv := httptest.NewServer(recv)
			t.Cleanup(srv.Close)
			return srv.URL
		}},
		{"grpc", serveOTLPGRPC},
	} {
		t.Run(strings.ReplaceAll(tc.protocol, "/", "_"), func(t *testing.T) {
			recv := &otlpReceiver{}
			traceOfAJob(t, ns, rs, recv, tc.protocol, tc.serve(t, recv))
		})
	}
}

// serveOTLPGRPC serves recv as an OTLP/gRPC trace receiver on a free
// port and returns its endpoint.
func serveOTLPGRPC(t *testing.T, recv *otlpReceiver) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcReceiver{recv: recv})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "http://" + lis.Addr().String()
}

// grpcReceiver is the gRPC face of an otlpReceiver.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	recv *otlpReceiver
}

func (g grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.recv.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// traceOfAJob is TestTraceOfAJob with the spans exported to recv at
// endpoint over protocol.
func traceOfAJob(t *testing.T, ns, rs *testenv.Server, recv *otlpReceiver, protocol, endpoint string) {
	name := testenv.Name("e2etrace")
	e := baseEnv(queueEnv(name)...).with(
		"SUDOKU_NATS_URL="+ns.URL(),
		"SUDOKU_REDIS_ADDRS="+rs.Addr,
		"SUDOKU_QUEUE_BATCH_SIZE=20",
		"SUDOKU_QUEUE_FIRST_BATCH_SIZE=20",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL="+protocol,
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_TRACES_SAMPLER=always_on",
		"OTEL_BSP_SCHEDULE_DELAY=200",
		"OTEL_SERVICE_NAME=", "OTEL_RESOURCE_ATTRIBUTES=", "OTEL_SDK_DISABLED=",
	)
	const n = 200
	file := writeFile(t, manyPuzzles(t, n, "17_clue_200.txt"))
	out := t.TempDir() + "/out.txt"

	w := start(t, "worker", e, "worker")
	code, _, stderr := run(t, 2*time.Minute, e, "submit", "--wait", "--out", out, file)
	if code != 0 {
		t.Fatalf("submit --wait: exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`job (\S+): \d+ lines: \d+ queued in (\d+) batch`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("submit printed no job line: %s", stderr)
	}
	id := m[1]
	batches, _ := strconv.Atoi(m[2])
	if batches < 2 {
		t.Fatalf("the job has %d batches: the test needs several", batches)
	}
	// The worker flushes its spans as it stops.
	if code := w.stop(20 * time.Second); code != 0 {
		t.Errorf("worker: exit %d after SIGTERM", code)
	}
	spans, bad := recv.received()
	if len(bad) > 0 {
		t.Errorf("the receiver could not decode %d requests: %v", len(bad), bad)
	}
	if len(spans) == 0 {
		t.Fatal("no span was received")
	}

	t.Logf("job %s: %d batches, %d spans received", id, batches, len(spans))
	workTmpl := name + ".jobs.{owner}.{priority}.{slot}.{serial}"
	_, serial, _ := strings.Cut(id, ".")
	var submit *recvSpan
	byID := map[string]recvSpan{}
	for i, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
		if strings.Contains(s.Name, serial) {
			t.Errorf("span %q names the job", s.Name)
		}
		if s.Kind == tracepb.Span_SPAN_KIND_PRODUCER && attrString(s.Attributes, "sudoku.job.id") == id {
			if submit != nil {
				t.Errorf("two submit spans")
			}
			submit = &spans[i]
		}
	}
	if submit == nil {
		t.Fatalf("no PRODUCER span of job %s among %d spans", id, len(spans))
	}
	traceID := hex.EncodeToString(submit.TraceId)
	for _, tc := range []struct{ key, want string }{
		{"messaging.system", "nats"},
		{"messaging.operation.type", "send"},
		{"messaging.destination.template", workTmpl},
		{"sudoku.job.id", id},
	} {
		if got := attrString(submit.Attributes, tc.key); got != tc.want {
			t.Errorf("submit span: %s = %q, want %q", tc.key, got, tc.want)
		}
	}
	if got, _ := attrInt(submit.Attributes, "messaging.batch.message_count"); got != int64(batches) {
		t.Errorf("submit span: messaging.batch.message_count = %d, want %d", got, batches)
	}
	if submit.Name != "send "+workTmpl || submit.service != "sudoku-submit" {
		t.Errorf("submit span %q of %q, want %q of sudoku-submit", submit.Name, submit.service, "send "+workTmpl)
	}

	// Every batch: one CONSUMER span in the submit's trace, its child,
	// with its children.
	children := map[string]map[string]int{} // batch span id -> child name -> count
	seen := map[int64]bool{}
	var follow bool
	for _, s := range spans {
		sameTrace := hex.EncodeToString(s.TraceId) == traceID
		switch {
		case s.Kind == tracepb.Span_SPAN_KIND_CONSUMER && s.service == "sudoku-worker":
			idx, ok := attrInt(s.Attributes, "sudoku.batch.index")
			if !ok {
				t.Errorf("batch span %q without sudoku.batch.index", s.Name)
				continue
			}
			seen[idx] = true
			if !sameTrace || hex.EncodeToString(s.ParentSpanId) != hex.EncodeToString(submit.SpanId) {
				t.Errorf("batch %d: span in trace %x under %x, want trace %s under the submit's %x",
					idx, s.TraceId, s.ParentSpanId, traceID, submit.SpanId)
			}
			for _, tc := range []struct{ key, want string }{
				{"messaging.system", "nats"},
				{"messaging.operation.type", "process"},
				{"messaging.destination.template", workTmpl},
				{"sudoku.job.id", id},
				{"sudoku.batch.outcome", "acked"},
			} {
				if got := attrString(s.Attributes, tc.key); got != tc.want {
					t.Errorf("batch %d span: %s = %q, want %q", idx, tc.key, got, tc.want)
				}
			}
			if attrString(s.Attributes, "messaging.consumer.group.name") == "" {
				t.Errorf("batch %d span: no messaging.consumer.group.name", idx)
			}
			if s.Name != "process "+workTmpl {
				t.Errorf("batch %d span named %q", idx, s.Name)
			}
			if children[hex.EncodeToString(s.SpanId)] == nil {
				children[hex.EncodeToString(s.SpanId)] = map[string]int{}
			}
		case s.Kind == tracepb.Span_SPAN_KIND_CONSUMER && s.service == "sudoku-submit":
			follow = true
			if !sameTrace || attrString(s.Attributes, "sudoku.job.id") != id {
				t.Errorf("follow span %q: trace %x, job %q; want trace %s, job %s", s.Name, s.TraceId,
					attrString(s.Attributes, "sudoku.job.id"), traceID, id)
			}
		}
	}
	for _, s := range spans {
		parent, ok := byID[hex.EncodeToString(s.ParentSpanId)]
		if ok && parent.Kind == tracepb.Span_SPAN_KIND_CONSUMER && parent.service == "sudoku-worker" {
			c := children[hex.EncodeToString(parent.SpanId)]
			c[s.Name]++
		}
	}
	if testing.Verbose() {
		t.Logf("the trace:\n%s", traceTree(spans, traceID))
	}
	if len(seen) != batches {
		t.Errorf("spans of %d batches, want %d: %v", len(seen), batches, seen)
	}
	if !follow {
		t.Error("no span of the follow of --wait")
	}
	for sid, c := range children {
		if c["solve"] != 1 || c["results write"] != 1 || c["cache lookup"] > 1 {
			t.Errorf("batch span %s has children %v, want one solve, one results write, at most one cache lookup", sid, c)
		}
	}
}

// traceTree draws the spans of trace traceID as a tree (for -v, and
// docs/observability.md): each span's service, kind, name, duration from
// the trace's start, and its sudoku.* and messaging.* attributes.
func traceTree(spans []recvSpan, traceID string) string {
	kids := map[string][]recvSpan{}
	var start uint64
	ids := map[string]bool{}
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			ids[hex.EncodeToString(s.SpanId)] = true
			if start == 0 || s.StartTimeUnixNano < start {
				start = s.StartTimeUnixNano
			}
		}
	}
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) != traceID {
			continue
		}
		p := hex.EncodeToString(s.ParentSpanId)
		if !ids[p] {
			p = ""
		}
		kids[p] = append(kids[p], s)
	}
	for _, k := range kids {
		slices.SortFunc(k, func(a, b recvSpan) int { return cmp.Compare(a.StartTimeUnixNano, b.StartTimeUnixNano) })
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range kids[parent] {
			var attrs []string
			for _, kv := range s.Attributes {
				if strings.HasPrefix(kv.Key, "sudoku.") || strings.HasPrefix(kv.Key, "messaging.") {
					v := attrString([]*commonpb.KeyValue{kv}, kv.Key)
					if i, ok := attrInt([]*commonpb.KeyValue{kv}, kv.Key); ok {
						v = strconv.FormatInt(i, 10)
					}
					attrs = append(attrs, kv.Key+"="+v)
				}
			}
			fmt.Fprintf(&b, "%s%s [%s %s] +%.1fms %.1fms %s\n", strings.Repeat("  ", depth), s.Name, s.service,
				strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"), float64(s.StartTimeUnixNano-start)/1e6,
				float64(s.EndTimeUnixNano-s.StartTimeUnixNano)/1e6, strings.Join(attrs, " "))
			walk(hex.EncodeToString(s.SpanId), depth+1)
		}
	}
	walk("", 0)
	return b.String()
}
