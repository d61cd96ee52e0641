package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// startServe runs `sudoku serve args...` in this process on a free port
// until the test ends, and returns its base URL once it answers.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	type exit struct {
		code   int
		stderr string
	}
	done := make(chan exit, 1)
	go func() {
		var stdout, stderr strings.Builder
		code := Run(ctx, append([]string{"serve", "--addr", addr}, args...), strings.NewReader(""), &stdout, &stderr)
		done <- exit{code, stderr.String()}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case e := <-done:
			if e.code != ExitOK {
				t.Errorf("serve exited %d after SIGINT-like cancel: %s", e.code, e.stderr)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop within 30s")
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case e := <-done:
			t.Fatalf("serve exited %d: %s", e.code, e.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready on %s after 20s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// httpDo sends a request and returns the status and body.
func httpDo(t *testing.T, method, url, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return res.StatusCode, string(data)
}

func TestServeJobMatchesLocal(t *testing.T) {
	e := newQueueEnv(t)
	e.startWorker()
	url := startServe(t)
	lines := append(manyPuzzles(t, 1500), "12345", "# comment", "")
	lines = append(lines, manyPuzzles(t, 1600)[1500:]...)
	file := writeFile(t, lines)
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	code, data := httpDo(t, http.MethodPost, url+"/v1/jobs", "text/plain", string(body))
	if code != http.StatusAccepted {
		t.Fatalf("POST /v1/jobs: %d %s", code, data)
	}
	var sub struct {
		ID       string `json:"id"`
		Lines    int    `json:"lines"`
		Invalid  int    `json:"invalid"`
		Accepted int    `json:"accepted"`
	}
	if err := json.Unmarshal([]byte(data), &sub); err != nil || sub.Lines != 1601 || sub.Invalid != 1 {
		t.Fatalf("POST /v1/jobs: %v %s", err, data)
	}
	code, got := httpDo(t, http.MethodGet, url+"/v1/jobs/"+sub.ID+"/results?format=text", "", "")
	if code != http.StatusOK {
		t.Fatalf("results: %d %s", code, got)
	}
	if want := localOut(t, file); got != want {
		t.Fatalf("results over HTTP differ from solve --local (%d vs %d bytes)", len(got), len(want))
	}
	code, got = httpDo(t, http.MethodGet, url+"/v1/jobs/"+sub.ID+"/results", "", "")
	if want := localOut(t, file, "--format", "jsonl"); code != http.StatusOK || got != want {
		t.Fatalf("NDJSON results over HTTP differ from solve --local --format jsonl (%d vs %d bytes)", len(got), len(want))
	}
	code, data = httpDo(t, http.MethodGet, url+"/v1/jobs/"+sub.ID, "", "")
	if code != http.StatusOK || !strings.Contains(data, `"state":"finished"`) || !strings.Contains(data, `"unique":1600`) {
		t.Errorf("GET /v1/jobs/%s: %d %s", sub.ID, code, data)
	}
}

func TestServeEmbedded(t *testing.T) {
	// Private names, so the embedded run does not touch the shared Redis
	// keys of others (Redis is used when it answers).
	newQueueEnv(t)
	url := startServe(t, "--embedded")
	p := puzzles(t, 1)[0]
	code, data := httpDo(t, http.MethodPost, url+"/v1/solve", "text/plain", p)
	if code != http.StatusOK || !strings.Contains(data, `"status":"unique"`) || !strings.Contains(data, `"cached":false`) {
		t.Fatalf("POST /v1/solve: %d %s", code, data)
	}
	code, data = httpDo(t, http.MethodGet, url+"/v1/solutions?puzzle="+p, "", "")
	if code != http.StatusOK || !strings.Contains(data, `"cached":true`) {
		t.Errorf("GET /v1/solutions: %d %s", code, data)
	}
	code, data = httpDo(t, http.MethodGet, url+"/", "", "")
	if code != http.StatusOK || !strings.Contains(data, "sudoku-queue") {
		t.Errorf("GET /: %d %.100s", code, data)
	}
}

func TestServeBadAddr(t *testing.T) {
	code, _, stderr := run(t, context.Background(), "", "serve", "--addr", "nonsense")
	if code != ExitUsage || !strings.Contains(stderr, "--addr") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestServeRefusesExposedWithoutToken: serve on an address other than
// loopback without a token exits 2 at once, saying why and how to go on,
// before connecting to anything; with a token, --insecure-no-token or
// serve.allow_no_token it serves there (issue 28).
func TestServeRefusesExposedWithoutToken(t *testing.T) {
	newQueueEnv(t)
	for _, tc := range []struct{ addr, natsURL string }{
		{"0.0.0.0:0", testenv.NATSURL()},
		// Refused before connecting: no NATS is needed to say so.
		{":0", "nats://127.0.0.1:1"},
		{"[::]:0", "nats://127.0.0.1:1"},
	} {
		addr := tc.addr
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		code, _, stderr := run(t, ctx, "", "serve", "--addr", addr, "--nats-url", tc.natsURL)
		cancel()
		if code != ExitUsage {
			t.Errorf("serve --addr %s without a token: exit %d, want %d: %s", addr, code, ExitUsage, stderr)
		}
		for _, want := range []string{"not a loopback address", "no token is set", "SUDOKU_SERVE_TOKEN", "--insecure-no-token", "serve.allow_no_token"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("serve --addr %s: %q does not say %q", addr, stderr, want)
			}
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("serve --addr %s took %v to refuse", addr, d)
		}
	}

	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--insecure-no-token"}, ""},
		{"key", nil, "SUDOKU_SERVE_ALLOW_NO_TOKEN=true"},
		{"token", nil, "SUDOKU_SERVE_TOKEN=a-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				k, v, _ := strings.Cut(tc.env, "=")
				t.Setenv(k, v)
			}
			port := testenv.FreePort(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan string, 1)
			go func() {
				code, _, stderr := run(t, ctx, "", append([]string{"serve", "--addr", fmt.Sprintf("0.0.0.0:%d", port)}, tc.args...)...)
				done <- fmt.Sprintf("exit %d: %s", code, stderr)
				close(done)
			}()
			defer func() {
				cancel()
				for range done {
				}
			}()
			url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if code, _ := getStatus(url); code == http.StatusOK {
					break
				}
				select {
				case out := <-done:
					t.Fatalf("serve on 0.0.0.0 stopped: %s", out)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("serve on 0.0.0.0:%d not ready after 20s", port)
				}
			}
		})
	}
}

// TestServeBadAllowedEntries: a bad --allowed-host or --allowed-origin is
// a usage error naming the key.
func TestServeBadAllowedEntries(t *testing.T) {
	for _, args := range [][]string{
		{"--allowed-host", "http://sudoku.example"},
		{"--allowed-origin", "sudoku.example"},
		{"--cors-origin", "https://app.example/path"},
	} {
		code, _, stderr := run(t, context.Background(), "", append([]string{"serve"}, args...)...)
		if code != ExitUsage || !strings.Contains(stderr, "serve.allowed_") {
			t.Errorf("serve %v: exit %d: %s", args, code, stderr)
		}
	}
}
