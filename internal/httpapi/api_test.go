package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// The tests in this file run on an embedded NATS server and a memory
// cache, with a worker in this process: they need nothing installed.
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

	// The worker cached it, and this process keeps it: the same puzzle,
	// in the grid format or as JSON, comes from the cache.
	e.waitCached([]string{puzzle1})
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
	// 403 lines in batches of 50, the invalid and repeated ones included.
	if s.Lines != 403 || s.Invalid != 2 || s.Accepted != 401 || s.Repeated != 1 || s.Queued != 400 || s.Cached != 0 ||
		s.Batches != 9 {
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

	// The job is finished, with its counts by status summing to its
	// lines (the repeat of a line in another batch counted as a repeat).
	j := e.waitJob(s.ID, 10*time.Second)
	if j.Lines != 403 || j.Queued != 400 || j.Invalid != 2 || j.Repeated != 1 || j.Cached != 0 || j.Done != 403 ||
		j.Batches != 9 || j.BatchesDone != 9 || j.Progress != 1 || j.Finished == nil || j.Error != "" ||
		len(j.Counts) != 3 || j.Counts[result.StatusUnique] != 400 || j.Counts[result.StatusInvalid] != 2 ||
		j.Counts[job.RepeatStatus] != 1 ||
		j.Unsolved != 2 || j.Rate <= 0 {
		t.Errorf("job: %+v", j)
	}

	// Submitted again, every puzzle is cached: the job needs no worker,
	// and its view says so.
	e.waitCached(lines[2:202])
	e.waitCached(lines[205:])
	e.stopWorker()
	s2 := e.submit("text/plain", body, "")
	if s2.Lines != 403 || s2.Cached != 400 || s2.Repeated != 1 || s2.Invalid != 2 || s2.Queued != 0 || s2.Batches != 9 {
		t.Errorf("second submission: %+v", s2)
	}
	j2 := e.waitJob(s2.ID, 10*time.Second)
	if j2.Cached != 400 || j2.Queued != 0 || j2.Done != 403 || j2.Progress != 1 || j2.Counts[result.StatusUnique] != 400 {
		t.Errorf("cached job: %+v", j2)
	}
	res, data := e.get("/v1/jobs/" + s2.ID + "/results?format=text")
	if want := localText(t, body, result.Text); res.StatusCode != 200 || string(data) != want {
		t.Errorf("cached job's results differ from solve --local: %d\n got %.300s\nwant %.300s", res.StatusCode, data, want)
	}
	res, data = e.get("/v1/jobs?limit=1")
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
	// A body that fails within its first MiB leaves no job behind.
	res, data := e.get("/v1/jobs")
	var list JobList
	decode(t, data, &list)
	if res.StatusCode != 200 || len(list.Jobs) != 0 {
		t.Errorf("failed submissions left jobs: %d %s", res.StatusCode, data)
	}

	// Unknown and malformed job ids, bad parameters.
	for _, tt := range []struct {
		path, code string
		status     int
	}{
		{"/v1/jobs/anonymous.06h2mh3754tcuefvcl1uu48cpo", CodeJobNotFound, 404},
		{"/v1/jobs/anonymous.06h2mh3754tcuefvcl1uu48cpo/results", CodeJobNotFound, 404},
		{"/v1/jobs/NOT-A-JOB", CodeBadJobID, 400},
		{"/v1/jobs/06h2mh3754tcuefvcl1uu48cpo", CodeBadJobID, 400}, // no owner
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

// wantFailedJob checks that job id is marked failed with an error that
// mentions cause, and that its results answer 409 job_failed at once.
func (e *env) wantFailedJob(id, cause string) {
	e.t.Helper()
	res, data := e.get("/v1/jobs/" + id)
	var j Job
	decode(e.t, data, &j)
	if res.StatusCode != 200 || j.State != "failed" || !strings.Contains(j.Error, cause) || j.Finished == nil {
		e.t.Errorf("GET /v1/jobs/%s: %d %s; want state failed with an error that mentions %q", id, res.StatusCode, data, cause)
	}
	for _, query := range []string{"", "?wait=false", "?format=text"} {
		start := time.Now()
		res, data := e.get("/v1/jobs/" + id + "/results" + query)
		wantError(e.t, res, data, http.StatusConflict, CodeJobFailed, id, "failed", cause)
		if d := time.Since(start); d > 2*time.Second {
			e.t.Errorf("results%s of a failed job: answered after %s", query, d)
		}
	}
}

// bigBody returns at least n bytes of puzzle lines, as text or as a JSON
// array.
func bigBody(t testing.TB, n int, asJSON bool) string {
	ps := variants(t, 1000, clue17)
	var sb strings.Builder
	if asJSON {
		sb.WriteString("[")
	}
	for i := 0; sb.Len() < n; i++ {
		if asJSON {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(`"` + ps[i%len(ps)] + `"`)
		} else {
			sb.WriteString(ps[i%len(ps)] + "\n")
		}
	}
	if asJSON {
		sb.WriteString("]")
	}
	return sb.String()
}

// chunked hides a reader's length, so that a request sends it chunked.
type chunked struct{ io.Reader }

// TestFailedSubmission checks that a submission that fails after its
// first MiB (spoolBytes), once the job exists, leaves the job marked
// failed: the POST says which job, the job's view says why, and its results
// end at once with 409 job_failed instead of waiting for ever.
func TestFailedSubmission(t *testing.T) {
	const limit = 2 << 20
	// Each case has an env of its own, whose helpers fail its own t.
	setup := func(t *testing.T) *env {
		return newEnv(t, envOptions{noWorker: true, opts: Options{MaxBodyBytes: limit}})
	}
	jobs := func(e *env) []Job {
		e.t.Helper()
		res, data := e.get("/v1/jobs")
		var list JobList
		decode(e.t, data, &list)
		if res.StatusCode != 200 {
			e.t.Fatalf("GET /v1/jobs: %d %s", res.StatusCode, data)
		}
		return list.Jobs
	}
	for _, tt := range []struct{ name, contentType string }{{"text", "text/plain"}, {"json", "application/json"}} {
		t.Run("over the limit, chunked, "+tt.name, func(t *testing.T) {
			e := setup(t)
			body := bigBody(t, limit+limit/2, tt.contentType == "application/json")
			res, data := e.do(http.MethodPost, "/v1/jobs", tt.contentType, chunked{strings.NewReader(body)})
			if res.Request.ContentLength != 0 {
				t.Fatalf("the body was sent with a Content-Length, not chunked")
			}
			b := wantError(t, res, data, http.StatusRequestEntityTooLarge, CodeTooLarge, "2097152 bytes")
			id, _ := b.Error.Details["job"].(string)
			if id == "" || b.Error.Details["job_state"] != "failed" || b.Error.Details["max_bytes"] != float64(limit) {
				t.Fatalf("the 413 does not name the failed job: %s", data)
			}
			if list := jobs(e); len(list) != 1 || list[0].ID != id {
				t.Errorf("jobs %+v, want the failed one alone", list)
			}
			e.wantFailedJob(id, "too large")
		})
	}

	t.Run("client gone mid-way", func(t *testing.T) {
		e := setup(t)
		body := bigBody(t, limit-limit/4, false)
		broken := io.MultiReader(strings.NewReader(body), iotest.ErrReader(errors.New("test: the client broke off")))
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/jobs", broken)
		if res, err := e.client.Do(req); err == nil {
			res.Body.Close()
			t.Fatalf("the upload broke off, yet the client got %d", res.StatusCode)
		}
		// The server sees the body end short: its job is marked failed.
		deadline := time.Now().Add(10 * time.Second)
		for {
			list := jobs(e)
			if len(list) == 1 && list[0].State == "failed" {
				e.wantFailedJob(list[0].ID, "unexpected EOF")
				break
			}
			if len(list) > 1 || time.Now().After(deadline) {
				t.Fatalf("no failed job alone after the client broke off: %+v", list)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("input that breaks off", func(t *testing.T) {
		e := setup(t)
		id := e.failedJob(variants(t, 25, clue17), "test: the upload broke")
		e.wantFailedJob(id, "test: the upload broke")
	})
}

// TestJobFinishedWithoutReader checks that a job whose results are all in
// is marked finished, with its final counts, though nobody reads its
// results: the API reads them once in the background (finisher).
func TestJobFinishedWithoutReader(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	ps := variants(t, 60, clue17)
	// Line 61 repeats line 1, in another batch.
	s := e.submit("text/plain", strings.Join(append(ps, ps[0], "x"), "\n"), "")
	if s.Lines != 62 || s.Repeated != 1 || s.Invalid != 1 || s.Batches != 2 {
		t.Fatalf("submitted: %+v", s)
	}
	res, data := e.get("/v1/jobs/" + s.ID)
	var j Job
	decode(t, data, &j)
	if res.StatusCode != 200 || j.State != "published" || j.Done != 0 || j.BatchesDone != 0 || j.Progress != 0 ||
		len(j.Counts) != 0 || j.Finished != nil {
		t.Errorf("before any worker: %d %s", res.StatusCode, data)
	}
	e.startWorker()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, data := e.get("/v1/jobs") // the workers finish it: no reader
		var list JobList
		decode(t, data, &list)
		if res.StatusCode != 200 || len(list.Jobs) != 1 {
			t.Fatalf("GET /v1/jobs: %d %s", res.StatusCode, data)
		}
		j = list.Jobs[0]
		if j.State == "finished" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not finished 10s after a worker started: %s", data)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := job.Counts{result.StatusUnique: 60, job.RepeatStatus: 1, result.StatusInvalid: 1}
	if !maps.Equal(j.Counts, want) || j.Done != 62 || j.BatchesDone != 2 || j.Progress != 1 || j.Unsolved != 1 ||
		j.Finished == nil || j.Elapsed <= 0 {
		t.Errorf("finished job: %+v; want counts %v", j, want)
	}
}

// TestResultsStreamProgressively checks that results come as soon as the
// lines before them have one, before the job is finished.
func TestResultsStreamProgressively(t *testing.T) {
	// Batches of 10: the first two of the job below are all cached, so the
	// producer publishes their results itself.
	e := newEnv(t, envOptions{noWorker: true, opts: Options{Producer: producer.Options{BatchSize: 10}}})
	ps := variants(t, 60, clue17)
	// Cache the first 20 with a first job, solved by a worker.
	e.startWorker()
	first := e.submit("text/plain", strings.Join(ps[:20], "\n"), "")
	e.waitJob(first.ID, 10*time.Second)
	e.waitCached(ps[:20])
	e.stopWorker()

	s := e.submit("text/plain", strings.Join(ps, "\n"), "")
	if s.Cached != 20 || s.Queued != 40 || s.Batches != 6 {
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

// TestCacheDown checks that with the cache down (Redis unreachable) only
// the lookups of GET /v1/solutions fail, with 503 cache_unavailable:
// single puzzles are solved by a worker, and jobs are submitted, solved
// and read as before, since their state and results live in JetStream.
func TestCacheDown(t *testing.T) {
	e := newEnv(t, envOptions{})
	ps := variants(t, 110, clue17)
	text := func(ps []string) string { return strings.Join(ps, "\n") + "\n" }
	before := e.submit("text/plain", text(ps[:50]), "")
	e.waitJob(before.ID, 10*time.Second)
	e.waitCached(ps[:50])

	e.fault.down.Store(true)
	for _, path := range []string{"/v1/solutions/" + strings.Repeat("a", 64), "/v1/solutions?puzzle=" + ps[100]} {
		res, data := e.get(path)
		wantError(t, res, data, http.StatusServiceUnavailable, CodeCacheUnavailable, "Redis", "POST /v1/solve")
		if res.Header.Get("Retry-After") != "5" {
			t.Errorf("%s: Retry-After %q", path, res.Header.Get("Retry-After"))
		}
	}
	// One puzzle: a worker solves it, its cache down too.
	res, data := e.post("/v1/solve", ps[101])
	var sol Solution
	if res.StatusCode == 200 {
		decode(t, data, &sol)
	}
	if res.StatusCode != 200 || sol.Status != result.StatusUnique || sol.Cached {
		t.Errorf("POST /v1/solve with the cache down: %d %s", res.StatusCode, data)
	}
	// A job: its cached half is a miss now, and all of it is solved.
	s := e.submit("text/plain", text(ps[:100]), "")
	if s.Lines != 100 || s.Cached != 0 || s.Queued != 100 {
		t.Errorf("submitted with the cache down: %+v", s)
	}
	for _, id := range []string{s.ID, before.ID} {
		want := localText(t, text(ps[:100]), result.Text)
		if id == before.ID {
			want = localText(t, text(ps[:50]), result.Text)
		}
		res, data := e.get("/v1/jobs/" + id + "/results?format=text")
		if res.StatusCode != 200 || string(data) != want {
			t.Errorf("results of job %s with the cache down: %d\n got %.200s\nwant %.200s", id, res.StatusCode, data, want)
		}
	}
	if j := e.waitJob(s.ID, 10*time.Second); j.Done != 100 || j.Counts[result.StatusUnique] != 100 {
		t.Errorf("job with the cache down: %+v", j)
	}
	res, data = e.get("/v1/jobs")
	var list JobList
	decode(t, data, &list)
	if res.StatusCode != 200 || len(list.Jobs) != 2 {
		t.Errorf("GET /v1/jobs with the cache down: %d %s", res.StatusCode, data)
	}
	// Ready (NATS is what the API needs), and saying the cache is down.
	res, data = e.get("/readyz")
	if res.StatusCode != 200 || !strings.Contains(string(data), `"cache":"down"`) {
		t.Errorf("/readyz with the cache down: %d %s", res.StatusCode, data)
	}
	// The dashboard's figures say what is down instead of failing.
	res, data = e.get("/v1/stats")
	var st Stats
	decode(t, data, &st)
	if res.StatusCode != 200 || st.Queue == nil || st.Cache.State != "down" || !strings.Contains(st.CacheError, "not answering") ||
		len(st.Jobs) != 2 {
		t.Errorf("stats with the cache down: %d %s", res.StatusCode, data)
	}

	// The cache back, lookups work again (once the guard probes it).
	e.fault.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, data := e.get("/v1/solutions?puzzle=" + ps[0])
		if res.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache back, but: %d %s", res.StatusCode, data)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res, data := e.get("/readyz"); !strings.Contains(string(data), `"cache":"up"`) {
		t.Errorf("/readyz with the cache back: %d %s", res.StatusCode, data)
	}
}

// TestPanicIsInternalError checks that a panic under a handler (here in
// the cache) is a 500 with no stack trace, and the server goes on.
func TestPanicIsInternalError(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	path := "/v1/solutions/" + strings.Repeat("b", 64)
	e.fault.panic.Store(true)
	res, data := e.get(path)
	wantError(t, res, data, http.StatusInternalServerError, CodeInternal, "server log")
	e.fault.panic.Store(false)
	res, data = e.get(path)
	wantError(t, res, data, http.StatusNotFound, CodeSolutionNotFound)
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

	on := newEnv(t, envOptions{noWorker: true, opts: Options{AllowedOrigins: []string{"https://example.test"}, Token: "t"}})
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
	e.get("/v1/jobs/anonymous.06h2mh3754tcuefvcl1uu48cpo")
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
	// A worker of another queue on the same NATS server is not this
	// queue's.
	other := worker.New(e.nc, setupQueue(t, e.nc, true), nil, worker.Options{Concurrency: 1, Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- other.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-other.Ready():
	case err := <-done:
		t.Fatalf("the other queue's worker: %v", err)
	}
	if n := workers(); n != 0 {
		t.Errorf("workers online %d with only another queue's worker running, want 0", n)
	}
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
	// The error codes: the enum of Error.code is exactly the Code
	// constants of errors.go, and each is named (`code`) by a response.
	codes := errorCodes(t)
	var enum []string
	schema(t, data, "Error", func(s map[string]any) {
		code := s["properties"].(map[string]any)["error"].(map[string]any)["properties"].(map[string]any)["code"]
		for _, v := range code.(map[string]any)["enum"].([]any) {
			enum = append(enum, v.(string))
		}
	})
	slices.Sort(enum)
	if !slices.Equal(enum, codes) {
		t.Errorf("openapi.json's error codes\n  %v\nerrors.go's\n  %v", enum, codes)
	}
	for _, code := range codes {
		if !strings.Contains(string(data), "`"+code+"`") {
			t.Errorf("no response of openapi.json names the error code %s", code)
		}
	}
}

// errorCodes returns the values of the Code constants of errors.go,
// sorted.
func errorCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("errors.go: %s is not a string literal", name.Name)
				}
				v, _ := strconv.Unquote(lit.Value)
				codes = append(codes, v)
			}
		}
	}
	if len(codes) < 10 {
		t.Fatalf("found only %d Code constants in errors.go", len(codes))
	}
	slices.Sort(codes)
	return codes
}

// schema calls f with the schema name of the OpenAPI document doc.
func schema(t *testing.T, doc []byte, name string, f func(map[string]any)) {
	t.Helper()
	var d struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	decode(t, doc, &d)
	s, ok := d.Components.Schemas[name]
	if !ok {
		t.Fatalf("openapi.json has no schema %s", name)
	}
	f(s)
}

// TestOpenAPISchemasMatchTypes checks that each schema of openapi.json
// has exactly the members of the JSON its Go type encodes to, requires
// exactly those always present (not omitempty), and lists the values the
// server sends for the enums it has.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	decode(t, openAPI, &doc)
	schemas := doc.Components.Schemas
	// members returns the properties of a schema and those it requires,
	// through $ref, allOf and oneOf.
	var members func(s map[string]any, props, required map[string]bool)
	members = func(s map[string]any, props, required map[string]bool) {
		if ref, ok := s["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/components/schemas/")
			sub, ok := schemas[name].(map[string]any)
			if !ok {
				t.Fatalf("no schema %s", ref)
			}
			members(sub, props, required)
		}
		for _, k := range []string{"allOf", "oneOf"} {
			list, _ := s[k].([]any)
			for _, sub := range list {
				members(sub.(map[string]any), props, required)
			}
		}
		ps, _ := s["properties"].(map[string]any)
		for p := range ps {
			props[p] = true
		}
		rs, _ := s["required"].([]any)
		for _, r := range rs {
			required[r.(string)] = true
		}
	}
	for name, v := range map[string]any{
		"Solution": Solution{}, "Result": result.Result{}, "Submitted": Submitted{}, "InvalidLine": producer.InvalidLine{},
		"Links": Links{}, "Job": Job{}, "JobList": JobList{}, "Stats": Stats{}, "QueueStats": QueueStats{},
		"CacheStats": CacheStats{}, "Error": errorBody{},
	} {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("openapi.json has no schema %s", name)
			continue
		}
		props, required := map[string]bool{}, map[string]bool{}
		members(s, props, required)
		fields, always := jsonMembers(reflect.TypeOf(v))
		if got, want := slices.Sorted(maps.Keys(props)), slices.Sorted(maps.Keys(fields)); !slices.Equal(got, want) {
			t.Errorf("schema %s has the members\n  %v\nits Go type encodes\n  %v", name, got, want)
		}
		if got, want := slices.Sorted(maps.Keys(required)), slices.Sorted(maps.Keys(always)); !slices.Equal(got, want) {
			t.Errorf("schema %s requires\n  %v\nits Go type always encodes\n  %v", name, got, want)
		}
	}

	enum := func(schema string, path ...string) []string {
		var s any = schemas[schema]
		for _, p := range path {
			s = s.(map[string]any)["properties"].(map[string]any)[p]
		}
		var out []string
		for _, v := range s.(map[string]any)["enum"].([]any) {
			out = append(out, v.(string))
		}
		slices.Sort(out)
		return out
	}
	sorted := func(vs ...string) []string { slices.Sort(vs); return vs }
	var statuses []string
	for _, st := range result.Statuses {
		statuses = append(statuses, string(st))
	}
	for _, tt := range []struct {
		schema string
		path   []string
		want   []string
	}{
		{"Job", []string{"state"}, sorted(string(job.Publishing), string(job.Published), string(job.Finished), string(job.Cancelled), string(job.Failed))},
		{"Result", []string{"status"}, sorted(statuses...)},
		{"CacheStats", []string{"state"}, sorted("up", "down", "none")},
	} {
		if got := enum(tt.schema, tt.path...); !slices.Equal(got, tt.want) {
			t.Errorf("%s.%s: enum %v, want %v", tt.schema, strings.Join(tt.path, "."), got, tt.want)
		}
	}
}

// jsonMembers returns the members of the JSON encoding of a struct type,
// and those of them it always has (not omitempty nor omitzero): of two
// members of one name, the shallower one counts (as encoding/json does).
func jsonMembers(typ reflect.Type) (all, always map[string]bool) {
	type member struct {
		depth  int
		always bool
	}
	found := map[string]member{}
	var walk func(typ reflect.Type, depth int)
	walk = func(typ reflect.Type, depth int) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			switch {
			case tag == "-", !f.IsExported() && !f.Anonymous:
				continue
			case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
				walk(f.Type, depth+1)
				continue
			case name == "":
				name = f.Name
			}
			m := member{depth, !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero")}
			if old, ok := found[name]; !ok || depth < old.depth {
				found[name] = m
			}
		}
	}
	walk(typ, 0)
	all, always = map[string]bool{}, map[string]bool{}
	for name, m := range found {
		all[name] = true
		if m.always {
			always[name] = true
		}
	}
	return all, always
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

// TestJobIDs checks which ids the job routes take for one: an owner (1
// to 64 letters, digits, '_' or '-'), a dot, and a serial of 1 to 32
// characters of lower-case base32hex (job.NewID's), others a 400. A
// valid one is asked as its owner (named in X-Sudoku-Owner): a 404.
func TestJobIDs(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true, opts: Options{OwnerHeader: true}})
	for id, valid := range map[string]bool{
		"anonymous.06h2mh3754tcuefvcl1uu48cpo": true, "anonymous.v": true, "Ann_9-x.0": true,
		strings.Repeat("a", 64) + "." + strings.Repeat("v", 32): true,
		// No owner, no serial, or one of them wrong.
		"06h2mh3754tcuefvcl1uu48cpo": false, "v": false, "A": false, "x}": false,
		".06h2mh3754tcuefvcl1uu48cpo": false, "anonymous.": false, "anonymous.w": false, "anonymous.06H2MH": false,
		"anonymous.06h2.mh37": false, "an on.v": false, "an}on.v": false,
		strings.Repeat("a", 65) + ".v": false, "anonymous." + strings.Repeat("v", 33): false,
	} {
		for _, suffix := range []string{"", "/results"} {
			owner := "admin"
			if valid {
				owner = job.OwnerOf(id)
			}
			res, data := e.get("/v1/jobs/"+url.PathEscape(id)+suffix, OwnerHeader, owner)
			if valid {
				wantError(t, res, data, http.StatusNotFound, CodeJobNotFound, id)
			} else {
				wantError(t, res, data, http.StatusBadRequest, CodeBadJobID)
			}
		}
	}
}

func ExampleError() {
	e := errorf(http.StatusNotFound, CodeJobNotFound, "no job %s", "anonymous.06h2")
	fmt.Println(e)
	// Output: job_not_found: no job anonymous.06h2
}

// TestJobsListSkipsABrokenRecord stores a value that is not a record
// under a job id (issue 22, finding 3: GET /v1/jobs answered 503): the
// list answers 200 with the other jobs.
func TestJobsListSkipsABrokenRecord(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.submit("text/plain", strings.Join(jobLines(t, 3), "\n"), "")
	if _, err := e.q.Jobs.Put(context.Background(), "anonymous.vvvvvvvvvvvvvvvvvvvvvvvvvv", []byte("not a record")); err != nil {
		t.Fatal(err)
	}
	res, data := e.get("/v1/jobs")
	var list JobList
	decode(t, data, &list)
	if res.StatusCode != 200 || len(list.Jobs) != 1 || list.Jobs[0].ID != s.ID {
		t.Errorf("GET /v1/jobs: %d %s", res.StatusCode, data)
	}
}
