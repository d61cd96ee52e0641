package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestWorkerHealthProbe checks `sudoku worker health`, the container's
// health check, against a real worker process, given the wildcard
// address of the compose file: alive, ready, and what it says when
// nothing answers or nothing is configured.
func TestWorkerHealthProbe(t *testing.T) {
	ns, rs := testenv.NATSServer(t), testenv.RedisServer(t)
	port := testenv.FreePort(t)
	e := baseEnv(queueEnv(testenv.Name("e2ehc"))...).with(
		"SUDOKU_NATS_URL="+ns.URL(),
		"SUDOKU_REDIS_ADDRS="+rs.Addr,
	)
	// The worker listens on the loopback only; the probes are given the
	// wildcard address of the compose file and must ask the loopback.
	w := start(t, "worker", e.with("SUDOKU_LOG_LEVEL=info", fmt.Sprintf("SUDOKU_METRICS_ADDR=127.0.0.1:%d", port)), "worker")
	e = e.with(fmt.Sprintf("SUDOKU_METRICS_ADDR=0.0.0.0:%d", port))
	waitUntil(t, 20*time.Second, "the worker serves its endpoints", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if !strings.Contains(w.stderr.String(), fmt.Sprintf(`msg="metrics: serving /metrics, /healthz and /readyz" addr=127.0.0.1:%d`, port)) {
		t.Errorf("the worker does not log where it serves its metrics:\n%s", w.stderr.String())
	}

	for _, tc := range []struct {
		name     string
		env      env
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"alive", nil, nil, 0, "ok\n", ""},
		// Redis is only a cache: readiness does not depend on it.
		{"ready", nil, []string{"--ready"}, 0, "worker: ok\nnats: ok\njetstream: ok\n", ""},
		{"nothing_listening", env{"SUDOKU_METRICS_ADDR=" + freeAddr(t)}, nil, 1, "", "connection refused"},
		{"no_address", env{"SUDOKU_METRICS_ADDR="}, nil, 2, "", "metrics.addr is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, 20*time.Second, e.with(tc.env...), append([]string{"worker", "health"}, tc.args...)...)
			if code != tc.wantCode || out != tc.wantOut || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q",
					code, out, stderr, tc.wantCode, tc.wantOut, tc.wantErr)
			}
		})
	}
	// The cache's state is a metric instead.
	if _, page, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", port)); err != nil {
		t.Error(err)
	} else if v, err := metricValue(page, "sudoku_cache_up"); err != nil || v != 1 {
		t.Errorf("sudoku_cache_up %v (%v), want 1", v, err)
	}
	if code := w.stop(20 * time.Second); code != 0 {
		t.Errorf("worker: exit %d after SIGTERM", code)
	}
}
