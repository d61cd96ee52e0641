package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// startServe runs `sudoku serve args...` in this process on a free port
// until the test ends, and returns its base URL once it answers.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	return startServeLogged(t, nil, args...)
}

// lockedBuilder is a strings.Builder safe for concurrent use.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServeLogged is startServe with serve's standard error written to
// log too, as it comes (nil: not).
func startServeLogged(t *testing.T, log *lockedBuilder, args ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	type exit struct {
		code   int
		stderr string
	}
	done := make(chan exit, 1)
	go func() {
		var stdout strings.Builder
		var stderr lockedBuilder
		var w io.Writer = &stderr
		if log != nil {
			w = io.MultiWriter(&stderr, log)
		}
		code := Run(ctx, append([]string{"serve", "--addr", addr}, args...), strings.NewReader(""), &stdout, w)
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
			done <- exit{ExitOK, ""} // for the cleanup: it has exited
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

// httpAs sends a request with the headers given (name, value, ...) and
// returns the status and body.
func httpAs(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(data)
}

// TestServePrincipals: serve.token_file holding a token per principal
// (and a bare one, serve's own owner's) makes each call act for its
// token's principal: alice's job is alice's (its id starts "alice.",
// and the CLI, as alice, finds it), bob may not read or cancel it, and
// each lists only their own jobs.
func TestServePrincipals(t *testing.T) {
	e := newQueueEnv(t)
	e.startWorker()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# the API's callers\nalice tok-alice\nbob tok-bob\ntok-own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SUDOKU_SERVE_TOKEN_FILE", tokens)
	url := startServe(t)
	alice, bob, own := []string{"Authorization", "Bearer tok-alice"}, []string{"Authorization", "Bearer tok-bob"},
		[]string{"Authorization", "Bearer tok-own"}
	ps := puzzles(t, 20)

	submit := func(header []string) string {
		t.Helper()
		code, data := httpAs(t, http.MethodPost, url+"/v1/jobs", strings.Join(ps, "\n"), header...)
		var sub struct{ ID string }
		if code != http.StatusAccepted || json.Unmarshal([]byte(data), &sub) != nil {
			t.Fatalf("POST /v1/jobs as %v: %d %s", header, code, data)
		}
		return sub.ID
	}
	a, o := submit(alice), submit(own)
	if !strings.HasPrefix(a, "alice.") || !strings.HasPrefix(o, "anonymous.") {
		t.Fatalf("jobs %s (alice's token) and %s (the bare token): want alice.<serial> and anonymous.<serial>", a, o)
	}
	// The CLI, as alice, finds her job where serve put it.
	t.Setenv("SUDOKU_JOB_OWNER", "alice")
	if code, out, stderr := run(t, context.Background(), "", "job", "status", a); code != ExitOK || !strings.Contains(out, a) {
		t.Errorf("sudoku job status %s as alice: exit %d: %s%s", a, code, out, stderr)
	}
	t.Setenv("SUDOKU_JOB_OWNER", "bob")
	if code, out, stderr := run(t, context.Background(), "", "job", "status", a); code == ExitOK {
		t.Errorf("sudoku job status %s as bob: exit %d: %s%s; want a refusal", a, code, out, stderr)
	}
	for _, path := range []string{"/v1/jobs/" + a, "/v1/jobs/" + a + "/results"} {
		code, data := httpAs(t, http.MethodGet, url+path, "", bob...)
		if code != http.StatusForbidden || !strings.Contains(data, `"code":"forbidden"`) ||
			!strings.Contains(data, "bob (no role) may not read job "+a+": it is alice's") {
			t.Errorf("GET %s as bob: %d %s", path, code, data)
		}
	}
	code, data := httpAs(t, http.MethodPost, url+"/v1/jobs/"+a+"/cancel", "", bob...)
	if code != http.StatusForbidden || !strings.Contains(data, "may not change job "+a) {
		t.Errorf("bob's cancel of alice's job: %d %s", code, data)
	}
	code, data = httpAs(t, http.MethodGet, url+"/v1/jobs/"+a+"/results?format=text", "", alice...)
	if code != http.StatusOK || strings.Count(data, "\n") != len(ps) {
		t.Errorf("alice's results: %d %.300s", code, data)
	}
	for _, tc := range []struct {
		header     []string
		has, hasnt string
	}{{alice, a, o}, {own, o, a}} {
		code, data := httpAs(t, http.MethodGet, url+"/v1/jobs", "", tc.header...)
		if code != http.StatusOK || !strings.Contains(data, tc.has) || strings.Contains(data, tc.hasnt) {
			t.Errorf("GET /v1/jobs as %v: %d %s; want %s and not %s", tc.header, code, data, tc.has, tc.hasnt)
		}
	}
	if code, data := httpAs(t, http.MethodGet, url+"/v1/jobs", "", bob...); code != http.StatusOK || strings.Contains(data, `"id"`) {
		t.Errorf("GET /v1/jobs as bob: %d %s; want none", code, data)
	}
}

// TestServeOwnerHeader: without a token and with roles off, a request may
// name its owner in X-Sudoku-Owner; with roles on (nats.user names a
// role), the header is refused.
func TestServeOwnerHeader(t *testing.T) {
	e := newQueueEnv(t)
	e.startWorker()
	p := puzzles(t, 1)[0]
	url := startServe(t)
	code, data := httpAs(t, http.MethodPost, url+"/v1/jobs", p, "X-Sudoku-Owner", "carol")
	if code != http.StatusAccepted || !strings.Contains(data, `"id":"carol.`) {
		t.Fatalf("POST /v1/jobs as carol: %d %s", code, data)
	}
	// The shared NATS takes any user: this serve believes roles are on.
	t.Setenv("SUDOKU_NATS_USER", "gateway")
	t.Setenv("SUDOKU_NATS_PASSWORD", "unused")
	url = startServe(t)
	code, data = httpAs(t, http.MethodPost, url+"/v1/jobs", p, "X-Sudoku-Owner", "carol")
	if code != http.StatusBadRequest || !strings.Contains(data, "X-Sudoku-Owner") {
		t.Errorf("POST /v1/jobs as carol, roles on: %d %s; want 400", code, data)
	}
	code, data = httpAs(t, http.MethodPost, url+"/v1/jobs", p)
	if code != http.StatusAccepted || !strings.Contains(data, `"id":"gateway.`) {
		t.Errorf("POST /v1/jobs without a header, roles on: %d %s; want the job of serve's own owner, gateway", code, data)
	}
}

// TestServeTokenErrors: a serve.token that cannot be read, and
// principals with a NATS user that may act only for itself, are usage
// errors said before connecting.
func TestServeTokenErrors(t *testing.T) {
	for _, tc := range []struct {
		name, token string
		env         []string
		says        []string
	}{
		{"the same token twice", "alice tok-a\nbob tok-a\n", nil, []string{"serve.token", "line 2", "the token of line 1"}},
		{"a bad principal", "al/ice tok-a\nbob tok-b\n", nil, []string{"serve.token", "line 1", `owner "al/ice"`}},
		{"three words", "alice tok-a extra\nbob tok-b\n", nil, []string{"serve.token", "line 1", "3 words"}},
		{"a producer acting for others", "alice tok-a\nbob tok-b\n",
			[]string{"SUDOKU_NATS_USER=producer-web", "SUDOKU_NATS_PASSWORD=pw"},
			[]string{"principals (alice, bob)", "producer-web (role producer)", "gateway user", "roles init --user gateway-NAME"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SUDOKU_SERVE_TOKEN", tc.token)
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			code, _, stderr := run(t, ctx, "", "serve", "--addr", "127.0.0.1:0", "--nats-url", "nats://127.0.0.1:1")
			if code != ExitUsage {
				t.Errorf("exit %d, want %d: %s", code, ExitUsage, stderr)
			}
			for _, w := range tc.says {
				if !strings.Contains(stderr, w) {
					t.Errorf("%q does not say %q", stderr, w)
				}
			}
			if strings.Contains(stderr, "tok-") {
				t.Errorf("the error shows a token: %s", stderr)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused after %v, want at once", d)
			}
		})
	}
	// A gateway may act for them: serve goes on to connect (and fails
	// there, on a port nobody listens on).
	t.Setenv("SUDOKU_SERVE_TOKEN", "alice tok-a\nbob tok-b\n")
	t.Setenv("SUDOKU_NATS_USER", "gateway-web")
	t.Setenv("SUDOKU_NATS_PASSWORD", "pw")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if code, _, stderr := run(t, ctx, "", "serve", "--addr", "127.0.0.1:0", "--nats-url", "nats://127.0.0.1:1"); code == ExitUsage || strings.Contains(stderr, "gateway user") {
		t.Errorf("serve as gateway-web with principals: exit %d: %s", code, stderr)
	}
}

// TestServeGatewayRolesOn runs serve with roles on, as the gateway user,
// with a token per principal, on private servers with roles init's
// files: a worker (as worker) solves alice's job, submitted with her
// token (alice.<serial>), which bob may not read or cancel; each lists
// their own; the dashboard's figures count the solved puzzles; NATS
// refuses serve's user nothing.
func TestServeGatewayRolesOn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "roles")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code, _, stderr := run(t, ctx, "", "roles", "init", dir); code != ExitOK {
		t.Fatalf("roles init: exit %d: %s", code, stderr)
	}
	ns := testenv.NATSServer(t, "-c", filepath.Join(dir, roles.ServerDir, roles.NATSConfFile))
	rds := testenv.RedisServer(t, "--aclfile", filepath.Join(dir, roles.ServerDir, roles.RedisACLFile))
	config := func(user string) string {
		t.Helper()
		text := fmt.Sprintf("nats:\n  url: %q\n  user: %q\n  password_file: %q\nredis:\n  addrs: [%q]\n  username: %q\n  password_file: %q\n"+
			"serve:\n  token_file: %q\nlog:\n  level: warn\n",
			ns.URL(), user, filepath.Join(dir, user, roles.NATSPasswordFile), rds.Addr, user,
			filepath.Join(dir, user, roles.RedisPasswordFile), filepath.Join(dir, "tokens"))
		p := filepath.Join(dir, user+".yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte("alice tok-alice\nbob tok-bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, ctx, "", "setup", "--apply", "--config", config("admin")); code != ExitOK {
		t.Fatalf("setup --apply as admin: exit %d: %s", code, stderr)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	wdone := make(chan string, 1)
	go func() {
		code, _, stderr := run(t, wctx, "", "worker", "--config", config("worker"))
		wdone <- fmt.Sprintf("exit %d: %s", code, stderr)
	}()
	t.Cleanup(func() {
		wcancel()
		if out := <-wdone; !strings.HasPrefix(out, "exit 0") {
			t.Errorf("worker: %s", out)
		}
	})
	var serveLog lockedBuilder
	url := startServeLogged(t, &serveLog, "--config", config("gateway"))
	alice, bob := []string{"Authorization", "Bearer tok-alice"}, []string{"Authorization", "Bearer tok-bob"}

	ps := puzzles(t, 30)
	code, data := httpAs(t, http.MethodPost, url+"/v1/jobs", strings.Join(ps, "\n"), alice...)
	var sub struct{ ID string }
	if code != http.StatusAccepted || json.Unmarshal([]byte(data), &sub) != nil || !strings.HasPrefix(sub.ID, "alice.") {
		t.Fatalf("POST /v1/jobs as alice: %d %s; want a job alice.<serial>", code, data)
	}
	code, got := httpAs(t, http.MethodGet, url+"/v1/jobs/"+sub.ID+"/results?format=text", "", alice...)
	if want := localOut(t, writeFile(t, ps)); code != http.StatusOK || got != want {
		t.Fatalf("alice's results: %d, %d bytes; want solve --local's %d bytes:\n%.300s", code, len(got), len(want), got)
	}
	for _, tc := range []struct{ method, path, says string }{
		{http.MethodGet, "/v1/jobs/" + sub.ID, "bob (no role) may not read job " + sub.ID},
		{http.MethodGet, "/v1/jobs/" + sub.ID + "/results", "bob (no role) may not read job " + sub.ID},
		{http.MethodPost, "/v1/jobs/" + sub.ID + "/cancel", "bob (no role) may not change job " + sub.ID},
	} {
		if code, data := httpAs(t, tc.method, url+tc.path, "", bob...); code != http.StatusForbidden || !strings.Contains(data, tc.says) {
			t.Errorf("%s %s as bob: %d %s", tc.method, tc.path, code, data)
		}
	}
	if code, data := httpAs(t, http.MethodGet, url+"/v1/jobs", "", alice...); code != http.StatusOK || !strings.Contains(data, sub.ID) {
		t.Errorf("GET /v1/jobs as alice: %d %s", code, data)
	}
	if code, data := httpAs(t, http.MethodGet, url+"/v1/jobs", "", bob...); code != http.StatusOK || strings.Contains(data, `"id"`) {
		t.Errorf("GET /v1/jobs as bob: %d %s; want none", code, data)
	}
	// The dashboard's figures count the workers' events of alice's job.
	var st struct {
		SolvedTotal int64  `json:"solved_total"`
		QueueError  string `json:"queue_error"`
		JobsError   string `json:"jobs_error"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, data := httpAs(t, http.MethodGet, url+"/v1/stats", "", alice...)
		if err := json.Unmarshal([]byte(data), &st); code != http.StatusOK || err != nil {
			t.Fatalf("GET /v1/stats: %d %s", code, data)
		}
		if st.SolvedTotal >= int64(len(ps)) && st.JobsError == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("GET /v1/stats as the gateway: %s; want %d solved and the jobs", data, len(ps))
			break
		}
	}
	// NATS refuses serve's user nothing: the gateway role has what serve
	// does (the lanes' consumers' figures, every event).
	for _, line := range strings.Split(serveLog.String(), "\n") {
		if strings.Contains(line, "refused") || strings.Contains(line, "ermission") {
			t.Errorf("serve's log has a refusal: %s", line)
		}
	}
	if st.QueueError != "" {
		t.Errorf("the queue's figures as the gateway: %s", st.QueueError)
	}
}
