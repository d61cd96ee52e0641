package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestSolveBodyLimitNamed: a POST /v1/solve body over its limit is told
// the limit in force, and which one it is: the fixed one for a single
// puzzle, or serve.max_body_bytes when that is smaller.
func TestSolveBodyLimitNamed(t *testing.T) {
	fixed := int64(4 * solver.MaxInputLen)
	for _, tc := range []struct {
		name     string
		maxBody  int64
		limit    int64
		names    string
		notNames string
	}{
		{"fixed limit", 0, fixed, "one puzzle", "serve.max_body_bytes"},
		{"setting smaller", 1000, 1000, "serve.max_body_bytes", "one puzzle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{opts: Options{MaxBodyBytes: tc.maxBody}, noWorker: true})
			res, data := e.post("/v1/solve", strings.Repeat(".", 20<<10))
			b := wantError(t, res, data, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("%d bytes", tc.limit), tc.names)
			if strings.Contains(b.Error.Message, tc.notNames) {
				t.Errorf("message %q names %s", b.Error.Message, tc.notNames)
			}
		})
	}
}

// TestEmptyJobRefused: POST /v1/jobs refuses a body without a puzzle, in
// either form, with a 400 that says so, and creates no job.
func TestEmptyJobRefused(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	for _, tc := range []struct{ name, contentType, body string }{
		{"empty text", "text/plain", ""},
		{"blank lines and comments", "text/plain", "\n# nothing\n\n"},
		{"empty JSON array", "application/json", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, data := e.do(http.MethodPost, "/v1/jobs", tc.contentType, strings.NewReader(tc.body))
			wantError(t, res, data, http.StatusBadRequest, CodeBadRequest, "no puzzle in the input")
		})
	}
	res, data := e.get("/v1/jobs")
	if res.StatusCode != 200 || strings.Contains(string(data), `"id"`) {
		t.Errorf("jobs after empty bodies only: %d %s", res.StatusCode, data)
	}
}
