package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// evil is the origin of another site's page.
const evil = "http://evil.example"

// doAs sends a request with Host host ("" for the server's address) and
// the headers given (name, value, ...), and returns the answer with its
// body read.
func (e *env) doAs(method, path, host, body string, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "text/plain")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return res, data
}

// port returns the port of the env's server.
func (e *env) port() string {
	u, err := url.Parse(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	return u.Port()
}

// jobCount returns how many jobs GET /v1/jobs lists.
func (e *env) jobCount(header ...string) int {
	e.t.Helper()
	res, data := e.get("/v1/jobs?limit=1000", header...)
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /v1/jobs: %d %s", res.StatusCode, data)
	}
	return strings.Count(string(data), `"id":`)
}

// TestCrossOriginRefused: with no token (and with one), a request that
// may change something (submit, cancel, solve) sent by a page of another
// origin gets a 403 cross_origin in the API's error format and changes
// nothing; the same from this server's own page, from an allowed origin,
// or from a program that sends no Origin, works (issue 28).
func TestCrossOriginRefused(t *testing.T) {
	for _, token := range []string{"", "secret-token"} {
		t.Run(fmt.Sprintf("token=%v", token != ""), func(t *testing.T) {
			e := newEnv(t, envOptions{noWorker: true, opts: Options{Token: token,
				AllowedOrigins: []string{"https://app.example"}}})
			var auth []string
			if token != "" {
				auth = []string{"Authorization", "Bearer " + token}
			}
			with := func(h ...string) []string { return append(append([]string(nil), auth...), h...) }

			// A program without an Origin: submits.
			res, data := e.doAs(http.MethodPost, "/v1/jobs", "", puzzle1, auth...)
			if res.StatusCode != http.StatusAccepted {
				t.Fatalf("POST /v1/jobs without an Origin: %d %s", res.StatusCode, data)
			}
			var sub Submitted
			decode(t, data, &sub)

			for _, tc := range []struct {
				name   string
				header []string
			}{
				{"another site", []string{"Origin", evil}},
				{"another site, fetch metadata", []string{"Origin", evil, "Sec-Fetch-Site", "cross-site"}},
				{"fetch metadata only", []string{"Sec-Fetch-Site", "cross-site"}},
				{"another port of this host", []string{"Origin", "http://127.0.0.1:1", "Sec-Fetch-Site", "same-site"}},
				{"an opaque origin", []string{"Origin", "null"}},
				{"https of an allowed http origin", []string{"Origin", "http://app.example"}},
			} {
				t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
					before := e.jobCount(auth...)
					for _, call := range []struct{ path, body string }{
						{"/v1/jobs", puzzle1},
						{"/v1/jobs/" + sub.ID + "/cancel", ""},
						{"/v1/solve", puzzle1},
					} {
						res, data := e.doAs(http.MethodPost, call.path, "", call.body, with(tc.header...)...)
						wantError(t, res, data, http.StatusForbidden, CodeCrossOrigin, "cross-origin request refused", "serve.allowed_origins")
					}
					if after := e.jobCount(auth...); after != before {
						t.Errorf("%d jobs before the refused calls, %d after", before, after)
					}
				})
			}
			if res, data := e.get("/v1/jobs/"+sub.ID, auth...); !strings.Contains(string(data), `"state":"published"`) &&
				!strings.Contains(string(data), `"state":"publishing"`) {
				t.Errorf("the job after refused cancels: %d %s", res.StatusCode, data)
			}

			// This server's own page, and an allowed origin: submit.
			for _, h := range [][]string{
				{"Origin", e.url, "Sec-Fetch-Site", "same-origin"},
				{"Origin", e.url},
				{"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site"},
			} {
				res, data := e.doAs(http.MethodPost, "/v1/jobs", "", puzzle1, with(h...)...)
				if res.StatusCode != http.StatusAccepted {
					t.Errorf("POST /v1/jobs with %v: %d %s", h, res.StatusCode, data)
				}
			}
			// Reads from another origin are left to CORS (the browser does
			// not let the page read the answer).
			if res, data := e.doAs(http.MethodGet, "/v1/jobs", "", "", with("Origin", evil)...); res.StatusCode != http.StatusOK {
				t.Errorf("GET /v1/jobs from another origin: %d %s", res.StatusCode, data)
			}
			if token != "" {
				res, data := e.doAs(http.MethodPost, "/v1/jobs", "", puzzle1)
				wantError(t, res, data, http.StatusUnauthorized, CodeUnauthorized)
			}
		})
	}
}

// TestAllowedOriginAny: serve.allowed_origins "*" lets every origin call.
func TestAllowedOriginAny(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true, opts: Options{AllowedOrigins: []string{"*"}}})
	res, data := e.doAs(http.MethodPost, "/v1/jobs", "", puzzle1, "Origin", evil, "Sec-Fetch-Site", "cross-site")
	if res.StatusCode != http.StatusAccepted || res.Header.Get("Access-Control-Allow-Origin") != evil {
		t.Errorf("POST /v1/jobs from any origin allowed: %d %v %s", res.StatusCode, res.Header, data)
	}
}

// TestHostChecked: a request whose Host does not name this server (DNS
// rebinding: evil.example made to point at 127.0.0.1) gets a 403
// host_not_allowed on every route, reads and the dashboard included, but
// /healthz and /readyz; the loopback forms of the address, Options.Addr
// and Options.AllowedHosts are answered (issue 28).
func TestHostChecked(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true, opts: Options{Addr: "sudoku.internal:7000",
		AllowedHosts: []string{"sudoku.example", "api.example:8443"}}})
	port := e.port()
	routes := []struct{ method, path, body string }{
		{"GET", "/v1/jobs", ""},
		{"GET", "/v1/stats", ""},
		{"GET", "/v1/solutions?puzzle=" + puzzle1, ""},
		{"POST", "/v1/jobs", puzzle1},
		{"POST", "/v1/solve", puzzle1},
		{"GET", "/", ""},
		{"GET", "/static/app.js", ""},
		{"GET", "/v1/openapi.json", ""},
		{"GET", "/metrics", ""},
		{"GET", "/v1/nothing", ""},
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost:1", "127.0.0.2:1",
		"sudoku.internal:" + port, "api.example", "api.example:" + port, "sudoku.example.evil:" + port} {
		for _, r := range routes {
			res, data := e.doAs(r.method, r.path, host, r.body)
			wantError(t, res, data, http.StatusForbidden, CodeHostNotAllowed, fmt.Sprintf("the Host %q", host), "serve.allowed_hosts")
		}
	}
	for _, host := range []string{"", "127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port,
		"sudoku.internal:7000", "sudoku.example", "sudoku.example:" + port, "api.example:8443"} {
		for _, path := range []string{"/v1/jobs", "/", "/metrics"} {
			if res, data := e.doAs("GET", path, host, ""); res.StatusCode != http.StatusOK {
				t.Errorf("GET %s with Host %q: %d %.200s", path, host, res.StatusCode, data)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if res, data := e.doAs("GET", path, "anything.example", ""); res.StatusCode != http.StatusOK {
			t.Errorf("GET %s with any Host: %d %s", path, res.StatusCode, data)
		}
	}
}

// TestHostGuard: which Host a server answers, by the address of the
// connection's own end.
func TestHostGuard(t *testing.T) {
	g, err := newHostGuard("0.0.0.0:8080", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		local string
		host  string
		want  bool
	}{
		{"192.0.2.10:8080", "192.0.2.10:8080", true},
		{"192.0.2.10:8080", "192.0.2.10", false}, // port 80
		{"192.0.2.10:8080", "192.0.2.11:8080", false},
		{"192.0.2.10:8080", "localhost:8080", false},
		{"192.0.2.10:8080", "sudoku.example:8080", false},
		{"192.0.2.10:8080", "0.0.0.0:8080", false},
		{"[2001:db8::1]:8080", "[2001:db8::1]:8080", true},
		{"[2001:db8::1]:8080", "[::1]:8080", false},
		{"127.0.0.1:8080", "localhost:8080", true},
		{"127.0.0.1:8080", "[::1]:8080", true},
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "localhost:8081", false},
		{"127.0.0.1:8080", "attacker.example:8080", false},
		{"127.0.0.1:80", "localhost", true},
		{"[::1]:8080", "localhost:8080", true},
	} {
		ap, err := net.ResolveTCPAddr("tcp", tc.local)
		if err != nil {
			t.Fatal(err)
		}
		r := (&http.Request{Host: tc.host}).WithContext(context.WithValue(context.Background(), http.LocalAddrContextKey, ap))
		if got := g.allowed(r); got != tc.want {
			t.Errorf("local %s, Host %q: allowed %v, want %v", tc.local, tc.host, got, tc.want)
		}
	}
	if (&hostGuard{}).allowed((&http.Request{Host: "x"}).WithContext(context.Background())) {
		t.Error("a Host allowed without a local address")
	}
}

// TestAllowedEntries: the entries serve.allowed_hosts and
// serve.allowed_origins take, and those refused.
func TestAllowedEntries(t *testing.T) {
	for _, h := range []string{"*", "sudoku.example", "sudoku.example:8080", "10.0.0.5", "[::1]:8080", "::1", "[::1]"} {
		if err := CheckAllowedHost(h); err != nil {
			t.Errorf("CheckAllowedHost(%q): %v", h, err)
		}
	}
	for _, h := range []string{"", "http://sudoku.example", "sudoku.example/", "a:b:c", "sudoku.example:http", "*.example", "sudoku.example:"} {
		if err := CheckAllowedHost(h); err == nil {
			t.Errorf("CheckAllowedHost(%q) passed", h)
		}
	}
	for _, o := range []string{"*", "https://app.example", "http://localhost:3000"} {
		if err := CheckAllowedOrigin(o); err != nil {
			t.Errorf("CheckAllowedOrigin(%q): %v", o, err)
		}
	}
	for _, o := range []string{"", "app.example", "https://app.example/path", "null"} {
		if err := CheckAllowedOrigin(o); err == nil {
			t.Errorf("CheckAllowedOrigin(%q) passed", o)
		}
	}
	if _, err := New(nil, nil, Options{AllowedHosts: []string{"http://x"}}); err == nil || !strings.Contains(err.Error(), "allowed host") {
		t.Errorf("New with a bad allowed host: %v", err)
	}
}

// TestServeRefusesExposedWithoutToken: Serve refuses a listener on an
// address other than loopback when there is no token, saying why and how
// to go on; with a token, or told so, it serves (issue 28).
func TestServeRefusesExposedWithoutToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		addr   string
		refuse bool
	}{
		{"wildcard, no token", Options{}, "0.0.0.0:0", true},
		{"wildcard, a token", Options{Token: "t"}, "0.0.0.0:0", false},
		{"wildcard, told so", Options{AllowNoToken: true}, "0.0.0.0:0", false},
		{"loopback, no token", Options{}, "127.0.0.1:0", false},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			e := newEnv(t, envOptions{noWorker: true, opts: tc.opts})
			ln, err := net.Listen("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err = e.srv.Serve(ctx, ln)
			switch {
			case tc.refuse && !errors.Is(err, ErrNoToken):
				t.Fatalf("Serve on %s without a token: %v, want ErrNoToken", ln.Addr(), err)
			case tc.refuse:
				for _, want := range []string{"not a loopback address", "serve.token", "--insecure-no-token", "serve.allow_no_token"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q does not say %q", err, want)
					}
				}
			case err != nil:
				t.Fatalf("Serve: %v", err)
			}
		})
	}
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", false}, {"[::1]:8080", false}, {"localhost:8080", false},
		{"0.0.0.0:8080", true}, {":8080", true}, {"[::]:8080", true}, {"192.0.2.1:8080", true},
	} {
		err := CheckExposed(context.Background(), tc.addr, "", false)
		if (err != nil) != tc.want || err != nil && !errors.Is(err, ErrNoToken) {
			t.Errorf("CheckExposed(%s): %v, want refused %v", tc.addr, err, tc.want)
		}
		if err := CheckExposed(context.Background(), tc.addr, "t", false); err != nil {
			t.Errorf("CheckExposed(%s) with a token: %v", tc.addr, err)
		}
		if err := CheckExposed(context.Background(), tc.addr, "", true); err != nil {
			t.Errorf("CheckExposed(%s) told so: %v", tc.addr, err)
		}
	}
}
