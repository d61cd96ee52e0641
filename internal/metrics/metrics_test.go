package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sudoku-queue/sudoku-queue/internal/embedded"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// scrape GETs url and returns every sample by name and labels, as
// `name{k="v",...}` with the labels sorted; a histogram gives name_count
// and name_sum, and name_bucket{le="..."} for each bucket.
func scrape(t testing.TB, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not the Prometheus text format: %v", url, err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			labels := labelString(m.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+labels] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+labels] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[name+"_count"+labels] = float64(h.GetSampleCount())
				out[name+"_sum"+labels] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					le := append(slices.Clone(m.GetLabel()), &dto.LabelPair{
						Name: new("le"), Value: new(fmt.Sprint(b.GetUpperBound()))})
					out[name+"_bucket"+labelString(le)] = float64(b.GetCumulativeCount())
				}
			default:
				out[name+labels] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func labelString(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// wantSamples fails the test for each sample of want that got lacks or
// has with another value.
func wantSamples(t testing.TB, got, want map[string]float64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s missing", k)
		case v != want[k]:
			t.Errorf("%s = %v, want %v", k, v, want[k])
		}
	}
}

func TestWorkerMetricsCountBatches(t *testing.T) {
	m := NewWorker()
	inFlight := int64(3)
	m.SetInFlight(func() int64 { return inFlight })
	srv := httptest.NewServer(Handler(m.Registry()))
	defer srv.Close()

	// Before any batch every known series is there, at 0.
	before := scrape(t, srv.URL+"/metrics")
	wantSamples(t, before, map[string]float64{
		`sudoku_puzzles_total{status="unique"}`:                    0,
		`sudoku_puzzles_total{status="gave_up"}`:                   0,
		`sudoku_batches_total{outcome="dead_letter"}`:              0,
		`sudoku_errors_total{kind="decode"}`:                       0,
		`sudoku_errors_total{kind="rejected"}`:                     0,
		`sudoku_errors_total{kind="jetstream"}`:                    0,
		`sudoku_errors_total{kind="shutdown"}`:                     0,
		`sudoku_cache_errors_total{op="get"}`:                      0,
		`sudoku_cache_errors_total{op="put"}`:                      0,
		`sudoku_cache_up`:                                          0, // no cache known yet
		`sudoku_batch_duration_seconds_count{queue="interactive"}`: 0,
		`sudoku_in_flight`:                                         3,
	})
	// The kinds and operations are exactly those: no stale series.
	for k := range before {
		if strings.HasPrefix(k, "sudoku_errors_total{") && !slices.Contains([]string{"decode", "rejected", "jetstream", "shutdown"},
			strings.TrimSuffix(strings.TrimPrefix(k, `sudoku_errors_total{kind="`), `"}`)) {
			t.Errorf("unexpected series %s", k)
		}
		if strings.HasPrefix(k, "sudoku_cache_errors_total{") && k != `sudoku_cache_errors_total{op="get"}` &&
			k != `sudoku_cache_errors_total{op="put"}` {
			t.Errorf("unexpected series %s", k)
		}
	}

	m.Batch(&worker.BatchStats{Outcome: "acked", Puzzles: 10, CacheHits: 4,
		Statuses:   map[result.Status]int{result.StatusUnique: 8, result.StatusInvalid: 1, result.StatusMultiple: 1},
		SolveTimes: []time.Duration{5 * time.Microsecond, 20 * time.Microsecond, 2 * time.Millisecond},
		Latency:    3 * time.Millisecond})
	m.Batch(&worker.BatchStats{Outcome: "acked", Puzzles: 2, Redelivered: true, Interactive: true,
		Statuses: map[result.Status]int{result.StatusUnique: 2}, Latency: time.Millisecond})
	// Not acked: counted as batches and errors, not as puzzles.
	m.Batch(&worker.BatchStats{Outcome: "nak", Puzzles: 5, Redelivered: true,
		Statuses:   map[result.Status]int{result.StatusUnique: 5},
		SolveTimes: []time.Duration{time.Microsecond},
		Err:        fmt.Errorf("publish results: %w", nats.ErrTimeout)})
	m.Batch(&worker.BatchStats{Outcome: "dead_letter", Err: &job.DecodeError{Offset: 0, Reason: "empty body"}})
	m.Batch(&worker.BatchStats{Outcome: "dead_letter", Puzzles: 3,
		Err: &worker.RejectError{Reason: queue.ReasonUnknownJob, Text: "batch 0 names job x, which has no record"}})
	m.Batch(&worker.BatchStats{Outcome: "dead_letter", Puzzles: 3,
		Err: fmt.Errorf("wrapped: %w", &worker.RejectError{Reason: queue.ReasonMismatch, Text: "digests differ"})})
	m.Batch(&worker.BatchStats{Outcome: "abandoned", Puzzles: 1, Err: context.Canceled})
	m.Batch(&worker.BatchStats{Outcome: "abandoned", Puzzles: 1, Err: errors.New("nak after the shutdown timeout")})
	// The cache: two lookups and a write failed; then it answers.
	m.CacheError("get", errors.New("dial tcp 127.0.0.1:6379: connection refused"))
	m.CacheError("get", errors.New("dial tcp 127.0.0.1:6379: connection refused"))
	m.CacheError("put", errors.New("OOM command not allowed"))
	cacheUp := true
	m.SetCacheUp(func() bool { return cacheUp })
	inFlight = 0

	got := scrape(t, srv.URL+"/metrics")
	wantSamples(t, got, map[string]float64{
		`sudoku_puzzles_total{status="unique"}`:                                10,
		`sudoku_puzzles_total{status="invalid"}`:                               1,
		`sudoku_puzzles_total{status="multiple"}`:                              1,
		`sudoku_puzzles_total{status="none"}`:                                  0,
		`sudoku_cache_hits_total`:                                              4,
		`sudoku_cache_misses_total`:                                            8,
		`sudoku_solve_seconds_count`:                                           4,
		`sudoku_solve_seconds_bucket{le="1e-06"}`:                              1,
		`sudoku_solve_seconds_bucket{le="1e-05"}`:                              2,
		`sudoku_solve_seconds_bucket{le="0.0025"}`:                             4,
		`sudoku_solve_seconds_bucket{le="1"}`:                                  4,
		`sudoku_batch_duration_seconds_count{queue="bulk"}`:                    7,
		`sudoku_batch_duration_seconds_count{queue="interactive"}`:             1,
		`sudoku_batch_duration_seconds_bucket{le="0.001",queue="interactive"}`: 1,
		`sudoku_redeliveries_total`:                                            2,
		`sudoku_batches_total{outcome="acked"}`:                                2,
		`sudoku_batches_total{outcome="nak"}`:                                  1,
		`sudoku_batches_total{outcome="dead_letter"}`:                          3,
		`sudoku_batches_total{outcome="abandoned"}`:                            2,
		`sudoku_errors_total{kind="jetstream"}`:                                1,
		`sudoku_errors_total{kind="decode"}`:                                   1,
		`sudoku_errors_total{kind="rejected"}`:                                 2,
		`sudoku_errors_total{kind="shutdown"}`:                                 2,
		`sudoku_cache_errors_total{op="get"}`:                                  2,
		`sudoku_cache_errors_total{op="put"}`:                                  1,
		`sudoku_cache_up`:                                                      1,
		`sudoku_in_flight`:                                                     0,
	})
	cacheUp = false
	wantSamples(t, scrape(t, srv.URL+"/metrics"), map[string]float64{`sudoku_cache_up`: 0})
	if got[`sudoku_solve_seconds_sum`] < 0.002 {
		t.Errorf("solve_seconds_sum = %v, want >= 2ms", got[`sudoku_solve_seconds_sum`])
	}
	if _, ok := got["process_cpu_seconds_total"]; !ok {
		t.Error("process_cpu_seconds_total missing")
	}
	if _, ok := got["go_goroutines"]; !ok {
		t.Error("go_goroutines missing")
	}
}

func TestWorkerMetricsLint(t *testing.T) {
	m := NewWorker()
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, Namespace+"_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func TestInFlightUnsetIsZero(t *testing.T) {
	m := NewWorker()
	srv := httptest.NewServer(Handler(m.Registry()))
	defer srv.Close()
	wantSamples(t, scrape(t, srv.URL+"/metrics"), map[string]float64{"sudoku_in_flight": 0})
}

// get returns the status and body of a GET of url.
func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	ok := Check{Name: "nats", Func: func(ctx context.Context) error {
		if _, has := ctx.Deadline(); !has {
			return errors.New("check without a deadline")
		}
		return nil
	}}
	down := Check{Name: "redis", Func: func(context.Context) error {
		return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}}
	for _, tc := range []struct {
		name     string
		checks   []Check
		wantCode int
		wantBody string
	}{
		{"ready_without_checks", nil, 200, ""},
		{"ready_when_every_check_passes", []Check{ok, ok}, 200, "nats: ok\nnats: ok\n"},
		{"unready_names_the_failing_check", []Check{ok, down}, 503,
			"nats: ok\nredis: dial tcp 127.0.0.1:6379: connect: connection refused\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(NewWorker().Registry(), tc.checks...))
			defer srv.Close()
			if code, body := get(t, srv.URL+"/healthz"); code != 200 || body != "ok\n" {
				t.Errorf("/healthz: %d %q, want 200 \"ok\\n\"", code, body)
			}
			if code, body := get(t, srv.URL+"/readyz"); code != tc.wantCode || body != tc.wantBody {
				t.Errorf("/readyz: %d %q, want %d %q", code, body, tc.wantCode, tc.wantBody)
			}
			if code, _ := get(t, srv.URL+"/nothing"); code != http.StatusNotFound {
				t.Errorf("/nothing: %d, want 404", code)
			}
		})
	}
}

func TestNATSCheck(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := NATSCheck(nc)
	ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
	defer cancel()
	if err := c.Func(ctx); err != nil {
		t.Fatalf("connected: %v", err)
	}
	nc.Close()
	err = c.Func(ctx)
	if err == nil || !strings.Contains(err.Error(), "not connected (closed)") {
		t.Fatalf("closed connection: %v, want \"not connected (closed)\"", err)
	}
}

func TestServerRunsUntilCancelled(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Handler(NewWorker().Registry()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	if code, _ := get(t, "http://"+s.Addr()+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(ShutdownTimeout + time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("still listening after shutdown")
	}
}

func TestListenOnBusyAddressFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Listen(l.Addr().String(), Handler(NewWorker().Registry()))
	if err == nil || !strings.Contains(err.Error(), "metrics: listen on "+l.Addr().String()) {
		t.Fatalf("Listen on a busy address: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := Serve(ctx, l.Addr().String(), NewWorker().Registry(), slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("Serve on a busy address: no error")
	}
}
