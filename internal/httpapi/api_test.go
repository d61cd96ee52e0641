package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// The tests in this file run on the embedded NATS server and a memory
// store, with a worker in this process: they need nothing installed.
// real_test.go runs the API against the shared NATS and Redis.

const (
	// A 17-clue puzzle with a unique solution, and that solution.
	puzzle1   = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	solution1 = "953168742862734951417952836746893125281645397395271468138529674574386219629417583"
)

// grid1 is puzzle1 as a 9-line grid with box separators.
const grid1 = `. . . | . . . | . . .
. . . | . . . | . . 1
. . . | . . 2 | . 3 .
------+-------+------
. . . | . . 3 | . 2 .
. . 1 | . 4 . | . . .
. . 5 | . . . | . 6 .
------+-------+------
. 3 . | . . . | . . 4
. 7 . | . 8 . | . . 9
6 2 . | . . 7 | . . .
`

func TestSolve(t *testing.T) {
	e := newEnv(t, envOptions{})
	res, data := e.post("/v1/solve", puzzle1)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, data)
	}
	var s Solution
	decode(t, data, &s)
	g, _ := solver.Parse(puzzle1)
	if s.Status != result.StatusUnique || s.Solution != solution1 || s.Key != g.Key() || s.Puzzle != puzzle1 || s.Cached {
		t.Errorf("first answer: %+v", s)
	}
	if s.Guesses == 0 {
		t.Errorf("guesses = 0; a 17-clue puzzle needs some")
	}

	// The worker cached it: the same puzzle, in the grid format or as
	// JSON, comes from the cache.
	for name, send := range map[string]func() (*http.Response, []byte){
		"grid": func() (*http.Response, []byte) { return e.post("/v1/solve", grid1) },
		"json": func() (*http.Response, []byte) {
			b, _ := json.Marshal(map[string]string{"puzzle": strings.ReplaceAll(puzzle1, ".", "0")})
			return e.do(http.MethodPost, "/v1/solve", "application/json", strings.NewReader(string(b)))
		},
	} {
		res, data := send()
		var s Solution
		decode(t, data, &s)
		if res.StatusCode != http.StatusOK || !s.Cached || s.Solution != solution1 || s.Key != g.Key() {
			t.Errorf("%s: status %d, %+v", name, res.StatusCode, s)
		}
	}

	// Not unique is not an error of the API.
	res, data = e.post("/v1/solve", strings.Repeat(".", 81))
	decode(t, data, &s)
	if res.StatusCode != http.StatusOK || s.Status != result.StatusMultiple || s.Solution == "" {
		t.Errorf("empty grid: status %d, %+v", res.StatusCode, s)
	}
}

func TestSolveErrors(t *testing.T) {
	e := newEnv(t, envOptions{opts: Options{MaxBodyBytes: 1000}})
	conflict := "11" + puzzle1[2:]
	tests := []struct {
		name, contentType, body string
		status                  int
		code                    string
		parts                   []string
		details                 map[string]any
	}{
		{"bad char names the cell", "", puzzle1[:11] + "x" + puzzle1[12:], 400, CodeBadPuzzle,
			[]string{"column 12", "'x'", "r2c3"}, map[string]any{"cell": "r2c3", "column": 12.0, "reason": "bad_char"}},
		{"repeated given names both cells", "", conflict, 400, CodeBadPuzzle,
			[]string{"digit 1", "row 1", "r1c1", "r1c2"}, map[string]any{"cell": "r1c1", "cell2": "r1c2", "reason": "conflict"}},
		{"too few cells", "", puzzle1[:79], 400, CodeBadPuzzle, []string{"79 cells, want 81"},
			map[string]any{"cells": 79.0, "reason": "cell_count"}},
		{"empty body", "", "", 400, CodeBadPuzzle, []string{"0 cells"}, nil},
		{"grid line short", "", strings.Replace(grid1, ". . 1\n", ". 1\n", 1), 400, CodeBadPuzzle,
			[]string{"line 2", "8 cells"}, map[string]any{"line": 2.0}},
		{"bad char in JSON", "application/json", `{"puzzle":"` + puzzle1[:80] + `z"}`, 400, CodeBadPuzzle,
			[]string{"r9c9"}, nil},
		{"JSON not an object", "application/json", `["x"]`, 400, CodeBadJSON, []string{"puzzle"}, nil},
		{"JSON unknown member", "application/json", `{"puzzle":"x","grid":1}`, 400, CodeBadJSON, []string{"grid"}, nil},
		{"JSON without puzzle", "application/json", `{}`, 400, CodeBadJSON, []string{`missing "puzzle"`}, nil},
		{"JSON truncated", "application/json", `{"puzzle":`, 400, CodeBadJSON, nil, nil},
		{"body too large", "", strings.Repeat(".", 1001), 413, CodeTooLarge, []string{"1000 bytes", "serve.max_body_bytes"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, data := e.do(http.MethodPost, "/v1/solve", tt.contentType, strings.NewReader(tt.body))
			b := wantError(t, res, data, tt.status, tt.code, tt.parts...)
			for k, v := range tt.details {
				if b.Error.Details[k] != v {
					t.Errorf("details[%s] = %v, want %v (%s)", k, b.Error.Details[k], v, data)
				}
			}
		})
	}

	t.Run("too large without Content-Length", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte(strings.Repeat(".", 5000)))
			pw.Close()
		}()
		res, data := e.do(http.MethodPost, "/v1/solve", "text/plain", pr)
		wantError(t, res, data, 413, CodeTooLarge)
	})
}

func TestSolveNoWorker(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true, opts: Options{SolveTimeout: 300 * time.Millisecond}})
	start := time.Now()
	res, data := e.post("/v1/solve", puzzle1)
	wantError(t, res, data, http.StatusGatewayTimeout, CodeSolveTimeout, "no worker answered within 300ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered after %s; the solve timeout is 300ms", d)
	}
}

func TestSolutions(t *testing.T) {
	e := newEnv(t, envOptions{})
	g, _ := solver.Parse(puzzle1)
	key := g.Key()

	res, data := e.get("/v1/solutions/" + key)
	wantError(t, res, data, 404, CodeSolutionNotFound, key)
	res, data = e.get("/v1/solutions?puzzle=" + puzzle1)
	wantError(t, res, data, 404, CodeSolutionNotFound)

	if res, data := e.post("/v1/solve", puzzle1); res.StatusCode != 200 {
		t.Fatalf("solve: %d %s", res.StatusCode, data)
	}
	for _, path := range []string{"/v1/solutions/" + key, "/v1/solutions?puzzle=" + puzzle1,
		"/v1/solutions?puzzle=" + strings.ReplaceAll(puzzle1, ".", "0")} {
		res, data := e.get(path)
		var s Solution
		decode(t, data, &s)
		if res.StatusCode != 200 || !s.Cached || s.Solution != solution1 || s.Key != key || s.Status != result.StatusUnique {
			t.Errorf("%s: %d %s", path, res.StatusCode, data)
		}
	}

	for _, tt := range []struct {
		path, code string
		parts      []string
	}{
		{"/v1/solutions/" + strings.ToUpper(key), CodeBadKey, []string{"64 lower-case hex digits"}},
		{"/v1/solutions/abc", CodeBadKey, []string{`"abc"`}},
		{"/v1/solutions?puzzle=" + puzzle1[:80] + "x", CodeBadPuzzle, []string{"r9c9"}},
		{"/v1/solutions", CodeBadRequest, []string{"?puzzle="}},
	} {
		res, data := e.get(tt.path)
		wantError(t, res, data, 400, tt.code, tt.parts...)
	}
}

// jobLines makes the body of a job: puzzles, with a blank line, a
// comment, a repeat and invalid lines among them.
func jobLines(t testing.TB, n int) []string {
	ps := variants(t, n, clue17)
	lines := append([]string{"# a job", ""}, ps[:n/2]...)
	lines = append(lines, "12345", ps[0], strings.Repeat("1", 81))
	return append(lines, ps[n/2:]...)
}

// submit posts a job and returns what the API said.
func (e *env) submit(contentType, body string, query string) Submitted {
	e.t.Helper()
	res, data := e.do(http.MethodPost, "/v1/jobs"+query, contentType, strings.NewReader(body))
	if res.StatusCode != http.StatusAccepted {
		e.t.Fatalf("POST /v1/jobs: %d %s", res.StatusCode, data)
	}
	var s Submitted
	decode(e.t, data, &s)
	if loc := res.Header.Get("Location"); loc != "/v1/jobs/"+s.ID {
		e.t.Errorf("Location %q", loc)
	}
	return s
}

// waitJob polls GET /v1/jobs/{id} until the job is finished.
func (e *env) waitJob(id string, timeout time.Duration) Job {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res, data := e.get("/v1/jobs/" + id)
		var j Job
		decode(e.t, data, &j)
		if res.StatusCode != 200 {
			e.t.Fatalf("GET /v1/jobs/%s: %d %s", id, res.StatusCode, data)
		}
		if j.State == "finished" {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s not finished after %s: %s", id, timeout, data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestJobTextMatchesLocal(t *testing.T) {
	e := newEnv(t, envOptions{})
	lines := jobLines(t, 400)
	body := strings.Join(lines, "\n") + "\n"
	s := e.submit("text/plain", body, "")
	if s.Lines != 403 || s.Invalid != 2 || s.Accepted != 401 || s.Repeated != 1 || s.Queued != 400 || s.Batches != 8 {
		t.Errorf("submitted: %+v", s)
	}
	if len(s.InvalidLines) != 2 || s.InvalidLines[0].Line != 203 || !strings.Contains(s.InvalidLines[0].Error, "5 cells") {
		t.Errorf("invalid lines: %+v", s.InvalidLines)
	}
	for _, format := range []result.Format{result.Text, result.JSONL} {
		res, data := e.get("/v1/jobs/" + s.ID + "/results?format=" + string(format))
		if res.StatusCode != 200 {
			t.Fatalf("results: %d %s", res.StatusCode, data)
		}
		if want := localText(t, body, format); string(data) != want {
			t.Errorf("%s results differ from solve --local:\n got %d bytes: %.300s\nwant %d bytes: %.300s",
				format, len(data), data, len(want), want)
		}
	}
	res, _ := e.get("/v1/jobs/" + s.ID + "/results")
	if ct := res.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("default Content-Type %q", ct)
	}

	j := e.waitJob(s.ID, 10*time.Second)
	if j.Lines != 403 || j.Queued != 400 || j.Done != 400 || j.Progress != 1 || j.Finished == nil ||
		j.Counts[result.StatusUnique] != 400 || j.Counts[result.StatusInvalid] != 2 || j.Failed != 2 || j.Rate <= 0 {
		t.Errorf("job: %+v", j)
	}

	// Submitted again, everything is cached.
	s2 := e.submit("text/plain", body, "")
	if s2.Cached != 400 || s2.Queued != 0 || !s2.Finished {
		t.Errorf("second submission: %+v", s2)
	}
	res, data := e.get("/v1/jobs?limit=1")
	var list JobList
	decode(t, data, &list)
	if res.StatusCode != 200 || len(list.Jobs) != 1 || list.Jobs[0].ID != s2.ID {
		t.Errorf("GET /v1/jobs?limit=1: %d %s", res.StatusCode, data)
	}
	res, data = e.get("/v1/jobs")
	decode(t, data, &list)
	if len(list.Jobs) != 2 || list.Jobs[1].ID != s.ID {
		t.Errorf("GET /v1/jobs: %s", data)
	}
}

func TestJobJSONArray(t *testing.T) {
	e := newEnv(t, envOptions{})
	ps := variants(t, 120, clue17)
	elems := append([]string{grid1}, ps...)
	broken := strings.Replace(grid1, "6 2 .", "6 6 .", 1) // a grid that does not parse
	elems = append(elems, "bad", broken)
	data, _ := json.Marshal(elems)
	s := e.submit("application/json; charset=utf-8", string(data), "?first=false")
	// grid1 is ps[0]: repeated.
	if s.Lines != 123 || s.Invalid != 2 || s.Repeated != 1 || s.Queued != 120 {
		t.Errorf("submitted: %+v", s)
	}
	// The same as a text body with the grid on one line and the broken
	// grid's line breaks turned into spaces.
	text := puzzle1 + "\n" + strings.Join(ps, "\n") + "\nbad\n" + strings.ReplaceAll(broken, "\n", " ") + "\n"
	res, got := e.get("/v1/jobs/" + s.ID + "/results?format=text")
	if want := localText(t, text, result.Text); res.StatusCode != 200 || string(got) != want {
		t.Errorf("results: %d\n got %.400s\nwant %.400s", res.StatusCode, got, want)
	}
}

func TestJobFirstAndForce(t *testing.T) {
	e := newEnv(t, envOptions{})
	ps := variants(t, 10, clue17)
	body := strings.Join(ps, "\n")
	s := e.submit("text/plain", body, "?first=true")
	res, data := e.get("/v1/jobs/" + s.ID + "/results")
	if res.StatusCode != 200 || strings.Count(string(data), `"status":"solved"`) != 10 {
		t.Errorf("first=true: %s", data)
	}
	s = e.submit("text/plain", body, "?force=1")
	if s.Queued != 10 || s.Cached != 0 {
		t.Errorf("force=1: %+v", s)
	}
}

func TestJobErrors(t *testing.T) {
	e := newEnv(t, envOptions{opts: Options{MaxBodyBytes: 10_000}, noWorker: true})
	big := strings.Repeat(puzzle1+"\n", 200) // 16,400 bytes
	tests := []struct {
		name, contentType, query string
		body                     io.Reader
		status                   int
		code                     string
		parts                    []string
	}{
		{"too large", "text/plain", "", strings.NewReader(big), 413, CodeTooLarge, []string{"10000 bytes"}},
		{"too large, streamed", "text/plain", "", io.MultiReader(strings.NewReader(big)), 413, CodeTooLarge, nil},
		{"too large JSON, streamed", "application/json", "",
			io.MultiReader(strings.NewReader(`["` + strings.Repeat(puzzle1+`","`, 200) + `"]`)), 413, CodeTooLarge, nil},
		{"not an array", "application/json", "", strings.NewReader(`{"puzzles":[]}`), 400, CodeBadJSON,
			[]string{"want a JSON array of strings"}},
		{"not a string", "application/json", "", strings.NewReader(`["` + puzzle1 + `", 7]`), 400, CodeBadJSON,
			[]string{"element 2", "want a string"}},
		{"not JSON", "application/json", "", strings.NewReader(`["` + puzzle1 + `",]`), 400, CodeBadJSON, []string{"not JSON"}},
		{"not closed", "application/json", "", strings.NewReader(`["` + puzzle1 + `"`), 400, CodeBadJSON, []string{"not closed"}},
		{"trailing data", "application/json", "", strings.NewReader(`[] []`), 400, CodeBadJSON, []string{"after the array"}},
		{"bad force", "text/plain", "?force=maybe", strings.NewReader(puzzle1), 400, CodeBadRequest, []string{"force"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, data := e.do(http.MethodPost, "/v1/jobs"+tt.query, tt.contentType, tt.body)
			wantError(t, res, data, tt.status, tt.code, tt.parts...)
		})
	}
	// A small body that fails leaves no job behind.
	res, data := e.get("/v1/jobs")
	var list JobList
	decode(t, data, &list)
	for _, j := range list.Jobs {
		if j.Lines == 0 && j.State == "submitting" {
			t.Errorf("a failed submission left job %s: %s", j.ID, data)
		}
	}
	_ = res

	// Unknown and malformed job ids, bad parameters.
	for _, tt := range []struct {
		path, code string
		status     int
	}{
		{"/v1/jobs/06h2mh3754tcuefvcl1uu48cpo", CodeJobNotFound, 404},
		{"/v1/jobs/06h2mh3754tcuefvcl1uu48cpo/results", CodeJobNotFound, 404},
		{"/v1/jobs/NOT-A-JOB", CodeBadJobID, 400},
		{"/v1/jobs/x%7Dy/results", CodeBadJobID, 400},
		{"/v1/jobs?limit=0", CodeBadRequest, 400},
		{"/v1/jobs?limit=x", CodeBadRequest, 400},
	} {
		res, data := e.get(tt.path)
		wantError(t, res, data, tt.status, tt.code)
	}

	// Results of a job that is not finished, without waiting: 409.
	s := e.submit("text/plain", puzzle1, "")
	res, data = e.get("/v1/jobs/" + s.ID + "/results?wait=false")
	wantError(t, res, data, http.StatusConflict, CodeJobNotFinished, "0 of 1")
	res, data = e.get("/v1/jobs/" + s.ID + "/results?format=xml")
	wantError(t, res, data, 400, CodeBadRequest, "format")
}

// TestResultsStreamProgressively checks that results come as soon as the
// lines before them have one, before the job is finished.
func TestResultsStreamProgressively(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	ps := variants(t, 60, clue17)
	// Cache the first 20 with a first job, solved by a worker.
	e.startWorker()
	first := e.submit("text/plain", strings.Join(ps[:20], "\n"), "")
	e.waitJob(first.ID, 10*time.Second)
	e.stopWorker()

	s := e.submit("text/plain", strings.Join(ps, "\n"), "")
	if s.Cached != 20 || s.Queued != 40 {
		t.Fatalf("submitted: %+v", s)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/jobs/"+s.ID+"/results?format=text", nil)
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	want := strings.Split(strings.TrimSuffix(localText(t, strings.Join(ps, "\n"), result.Text), "\n"), "\n")
	for i := range 20 {
		select {
		case l := <-lines:
			if l != want[i] {
				t.Fatalf("line %d: %q, want %q", i+1, l, want[i])
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("line %d of the cached prefix did not come while the job waits for a worker", i+1)
		}
	}
	select {
	case l, ok := <-lines:
		t.Fatalf("got line 21 (%q, %v) though no worker runs", l, ok)
	case <-time.After(300 * time.Millisecond):
	}
	e.startWorker()
	for i := 20; i < 60; i++ {
		select {
		case l := <-lines:
			if l != want[i] {
				t.Fatalf("line %d: %q, want %q", i+1, l, want[i])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("line %d did not come", i+1)
		}
	}
	select {
	case l, ok := <-lines:
		if ok {
			t.Fatalf("extra line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end with the job")
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, envOptions{opts: Options{Token: "s3cret"}})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}, {"Authorization", "Basic s3cret"}} {
		for _, path := range []string{"/v1/jobs", "/v1/solutions/" + strings.Repeat("a", 64), "/v1/stats", "/v1/events"} {
			res, data := e.get(path, h...)
			wantError(t, res, data, http.StatusUnauthorized, CodeUnauthorized, "Authorization: Bearer")
			if res.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", path)
			}
		}
		res, data := e.post("/v1/solve", puzzle1, h...)
		wantError(t, res, data, http.StatusUnauthorized, CodeUnauthorized)
	}
	ok := []string{"Authorization", "Bearer s3cret"}
	if res, data := e.post("/v1/solve", puzzle1, ok...); res.StatusCode != 200 {
		t.Errorf("with the token: %d %s", res.StatusCode, data)
	}
	if res, data := e.get("/v1/jobs", ok...); res.StatusCode != 200 {
		t.Errorf("with the token: %d %s", res.StatusCode, data)
	}
	// The page, its assets, the API document, health and metrics are public.
	for _, path := range []string{"/", "/static/app.js", "/v1/openapi.json", "/healthz", "/readyz", "/metrics"} {
		if res, data := e.get(path); res.StatusCode != 200 {
			t.Errorf("%s without a token: %d %.200s", path, res.StatusCode, data)
		}
	}
}

func TestStoreDown(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.submit("text/plain", puzzle1, "")
	e.store.down.Store(true)
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/v1/solve", puzzle1},
		{"GET", "/v1/solutions/" + strings.Repeat("a", 64), ""},
		{"GET", "/v1/solutions?puzzle=" + puzzle1, ""},
		{"POST", "/v1/jobs", puzzle1},
		{"GET", "/v1/jobs", ""},
		{"GET", "/v1/jobs/" + s.ID, ""},
		{"GET", "/v1/jobs/" + s.ID + "/results", ""},
		{"GET", "/readyz", ""},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			res, data := e.do(tt.method, tt.path, "text/plain", strings.NewReader(tt.body))
			wantError(t, res, data, http.StatusServiceUnavailable, CodeStoreUnavailable, "Redis")
			if res.Header.Get("Retry-After") != "5" {
				t.Errorf("Retry-After %q", res.Header.Get("Retry-After"))
			}
		})
	}
	// The dashboard's figures say what is down instead of failing.
	res, data := e.get("/v1/stats")
	var st Stats
	decode(t, data, &st)
	if res.StatusCode != 200 || st.StoreError == "" || st.Queue == nil {
		t.Errorf("stats with the store down: %d %s", res.StatusCode, data)
	}
	e.store.down.Store(false)
	if res, data := e.post("/v1/solve", puzzle1); res.StatusCode != 200 {
		t.Errorf("store back: %d %s", res.StatusCode, data)
	}
}

func TestPanicIsInternalError(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	e.store.panic.Store(true)
	res, data := e.get("/v1/jobs")
	wantError(t, res, data, http.StatusInternalServerError, CodeInternal, "server log")
	e.store.panic.Store(false)
	if res, _ := e.get("/v1/jobs"); res.StatusCode != 200 {
		t.Errorf("after the panic: %d", res.StatusCode)
	}
}

func TestRoutingErrors(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	res, data := e.get("/v1/nothing")
	wantError(t, res, data, 404, CodeNotFound, "/v1/nothing")
	res, data = e.do(http.MethodDelete, "/v1/jobs", "", nil)
	b := wantError(t, res, data, 405, CodeMethodNotAllowed, "DELETE")
	if res.Header.Get("Allow") != "GET, POST" {
		t.Errorf("Allow %q (%v)", res.Header.Get("Allow"), b)
	}
	res, data = e.get("/v1/solve")
	wantError(t, res, data, 405, CodeMethodNotAllowed)
	if res.Header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", res.Header.Get("Allow"))
	}
	res, data = e.get("/static/")
	wantError(t, res, data, 404, CodeNotFound)
	if res, _ := e.get("/static/nothing.js"); res.StatusCode != 404 {
		t.Errorf("missing asset: %d", res.StatusCode)
	}
}

func TestCORS(t *testing.T) {
	origin := []string{"Origin", "https://example.test"}
	preflight := append([]string{"Access-Control-Request-Method", "POST"}, origin...)

	off := newEnv(t, envOptions{noWorker: true})
	res, _ := off.get("/v1/jobs", origin...)
	if v := res.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("CORS off by default, but Access-Control-Allow-Origin %q", v)
	}
	res, _ = off.do(http.MethodOptions, "/v1/solve", "", nil, preflight...)
	if res.StatusCode != 405 || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight with CORS off: %d %v", res.StatusCode, res.Header)
	}

	on := newEnv(t, envOptions{noWorker: true, opts: Options{CORSOrigins: []string{"https://example.test"}, Token: "t"}})
	res, _ = on.do(http.MethodOptions, "/v1/solve", "", nil, preflight...)
	if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != "https://example.test" ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", res.StatusCode, res.Header)
	}
	res, _ = on.get("/v1/jobs", append(origin, "Authorization", "Bearer t")...)
	if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != "https://example.test" {
		t.Errorf("allowed origin: %d %v", res.StatusCode, res.Header)
	}
	res, _ = on.get("/v1/jobs", "Origin", "https://evil.test", "Authorization", "Bearer t")
	if res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin allowed: %v", res.Header)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.post("/v1/solve", puzzle1)
	e.post("/v1/solve", puzzle1)
	e.post("/v1/solve", "bad")
	e.get("/v1/jobs/06h2mh3754tcuefvcl1uu48cpo")
	e.get("/v1/nothing")
	res, data := e.get("/metrics")
	if res.StatusCode != 200 {
		t.Fatalf("/metrics: %d", res.StatusCode)
	}
	for _, want := range []string{
		`sudoku_api_requests_total{code="200",route="POST /v1/solve"} 2`,
		`sudoku_api_requests_total{code="400",route="POST /v1/solve"} 1`,
		`sudoku_api_requests_total{code="404",route="GET /v1/jobs/{id}"} 1`,
		`sudoku_api_requests_total{code="404",route="/v1/"} 1`,
		`sudoku_api_request_duration_seconds_count{route="POST /v1/solve"} 3`,
		`sudoku_api_cache_lookups_total{result="hit"} 1`,
		`sudoku_api_cache_lookups_total{result="miss"} 1`,
		`go_goroutines`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// readEvent reads one server-sent event.
func readEvent(t testing.TB, br *bufio.Reader) (string, []byte) {
	t.Helper()
	var typ string
	var data []byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && data != nil:
			return typ, data
		case strings.HasPrefix(line, "event: "):
			typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[6:]...)
		}
	}
}

func TestEventsAndStats(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/events", nil)
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("/v1/events: %d %s", res.StatusCode, ct)
	}
	br := bufio.NewReader(res.Body)
	typ, data := readEvent(t, br)
	var st Stats
	decode(t, data, &st)
	if typ != "stats" || st.Queue == nil || st.IntervalSeconds != 0.2 {
		t.Errorf("first event %q: %s", typ, data)
	}

	ps := variants(t, 300, clue17)
	s := e.submit("text/plain", strings.Join(ps, "\n"), "")
	e.waitJob(s.ID, 10*time.Second)
	// The events see the job finished, its puzzles solved, and the worker.
	var sawRate bool
	for i := 0; i < 50; i++ {
		_, data := readEvent(t, br)
		var st Stats
		decode(t, data, &st)
		if st.History != nil {
			t.Fatalf("a later event has the history")
		}
		sawRate = sawRate || st.SolvedPerSecond > 0
		if sawRate && st.SolvedTotal >= 300 && len(st.Jobs) == 1 && st.Jobs[0].State == "finished" &&
			st.Workers != nil && *st.Workers >= 1 && st.Cache.HitRatio != nil {
			break
		}
		if i == 49 {
			t.Fatalf("no event shows the finished job and its rate: %s", data)
		}
	}

	res2, data := e.get("/v1/stats")
	decode(t, data, &st)
	if res2.StatusCode != 200 || len(st.History) == 0 || slices.Max(st.History) <= 0 || st.SolvedTotal < 300 {
		t.Errorf("/v1/stats: %s", data)
	}
}

func TestWorkersOnline(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	workers := func() int {
		_, data := e.get("/v1/stats")
		var st Stats
		decode(t, data, &st)
		if st.Workers == nil {
			t.Fatalf("no workers figure: %s", data)
		}
		return *st.Workers
	}
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for workers() != want {
			if time.Now().After(deadline) {
				t.Fatalf("workers online %d, want %d", workers(), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor(0)
	e.startWorker()
	waitFor(1)
	stop1 := e.stopWorker
	e.startWorker()
	waitFor(2)
	stop1()
	waitFor(1)
}

func TestDashboard(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	res, data := e.get("/")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(data), `<script src="/static/app.js"`) || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("/: %d %v %.200s", res.StatusCode, res.Header, data)
	}
	if strings.Contains(string(data), "http://") || strings.Contains(string(data), "https://") {
		t.Errorf("the page refers to another site (it must work offline)")
	}
	for path, ct := range map[string]string{"/static/app.js": "text/javascript", "/static/style.css": "text/css"} {
		res, data := e.get(path)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), ct) || len(data) == 0 {
			t.Errorf("%s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	res, data = e.get("/healthz")
	if res.StatusCode != 200 || !strings.Contains(string(data), "ok") {
		t.Errorf("/healthz: %d %s", res.StatusCode, data)
	}
}

// TestOpenAPIMatchesRoutes checks that openapi.json is served, is JSON,
// and describes exactly the /v1 operations the server has.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	res, data := e.get("/v1/openapi.json")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/v1/openapi.json: %d", res.StatusCode)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	decode(t, data, &doc)
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	var served []string
	for _, p := range e.srv.patterns {
		if strings.Contains(p, " /v1/") {
			served = append(served, p)
		}
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Errorf("openapi.json documents\n  %v\nthe server has\n  %v", documented, served)
	}
	// Every error code is in the document.
	for _, code := range []string{CodeBadPuzzle, CodeBadKey, CodeBadJobID, CodeBadJSON, CodeBadRequest, CodeUnauthorized,
		CodeNotFound, CodeJobNotFound, CodeSolutionNotFound, CodeMethodNotAllowed, CodeJobNotFinished, CodeTooLarge,
		CodeInternal, CodeQueueUnavailable, CodeStoreUnavailable, CodeSolveTimeout} {
		if !strings.Contains(string(data), `"`+code+`"`) {
			t.Errorf("openapi.json lacks the error code %s", code)
		}
	}
}

// TestServeShutsDownGracefully checks that Serve ends the streams and
// returns when its context ends.
func TestServeShutsDownGracefully(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	res, err := http.Get(url + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	readEvent(t, br)
	s := e.submit("text/plain", puzzle1, "")
	results, err := http.Get(url + "/v1/jobs/" + s.ID + "/results") // waits: no worker
	if err != nil {
		t.Fatal(err)
	}
	defer results.Body.Close()

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("Serve did not return within 8s of its context ending")
	}
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("the event stream did not end cleanly: %v", err)
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Errorf("still accepting after shutdown")
	}
}

func TestJSONLines(t *testing.T) {
	for _, tt := range []struct {
		in, out, err string
	}{
		{`[]`, "", ""},
		{` [ "a" , "b" ] `, "a\nb\n", ""},
		{`["` + strings.ReplaceAll(grid1, "\n", `\n`) + `"]`, puzzle1 + "\n", ""},
		{`["x\ny"]`, "x y\n", ""},
		{`["a", null]`, "a\n", "element 2: want a string"},
		{`["a", ["b"]]`, "a\n", "element 2: want a string"},
		{`"a"`, "", "want a JSON array"},
		{``, "", "empty body"},
		{`["a"`, "a\n", "not closed"},
		{`["a"] x`, "a\n", "after the array"},
		{`[1`, "", "element 1"},
	} {
		var sb strings.Builder
		err := jsonLines(strings.NewReader(tt.in), &sb)
		if sb.String() != tt.out {
			t.Errorf("%s: wrote %q, want %q", tt.in, sb.String(), tt.out)
		}
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one with %q", tt.in, err, tt.err)
		}
	}
}

func TestValidJobID(t *testing.T) {
	for id, want := range map[string]bool{
		"06h2mh3754tcuefvcl1uu48cpo": true, "": false, "A": false, "x}": false, "w": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false,
	} {
		if validJobID(id) != want {
			t.Errorf("validJobID(%q) = %v", id, !want)
		}
	}
}

func ExampleError() {
	e := errorf(http.StatusNotFound, CodeJobNotFound, "no job %s", "06h2")
	fmt.Println(e)
	// Output: job_not_found: no job 06h2
}

func TestHotCache(t *testing.T) {
	c := newHotCache(4)
	r := func(k string, st result.Status) result.Result { return result.Result{Key: k, Status: st, Line: 3} }
	c.add("a", r("a", result.StatusUnique))
	c.add("g", r("g", result.StatusGaveUp))
	if _, ok := c.get("g"); ok {
		t.Errorf("a gave_up result was kept")
	}
	if got, ok := c.get("a"); !ok || got.Line != 0 || got.Status != result.StatusUnique {
		t.Errorf("get(a) = %+v, %v", got, ok)
	}
	c.add("b", r("b", result.StatusNone))     // cur: a b
	c.add("c", r("c", result.StatusMultiple)) // old: a b; cur: c
	if _, ok := c.get("a"); !ok {             // a moves to cur: c a
		t.Errorf("a lost after one turn")
	}
	c.add("d", r("d", result.StatusUnique)) // old: c a; cur: d
	c.add("e", r("e", result.StatusUnique)) // cur: d e
	c.add("f", r("f", result.StatusUnique)) // old: d e; cur: f
	for k, want := range map[string]bool{"a": false, "b": false, "c": false, "d": true, "e": true, "f": true} {
		if _, ok := c.get(k); ok != want {
			t.Errorf("get(%s): %v, want %v", k, ok, want)
		}
	}
	var off *hotCache = newHotCache(-1)
	off.add("a", r("a", result.StatusUnique))
	if _, ok := off.get("a"); ok {
		t.Errorf("a disabled cache hit")
	}
}
