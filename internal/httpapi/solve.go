package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// maxSolveBody bounds the body of POST /v1/solve: a puzzle is at most
// solver.MaxInputLen bytes; JSON escaping may double that.
const maxSolveBody = 4 * solver.MaxInputLen

// Solution is the answer about one puzzle (POST /v1/solve, GET
// /v1/solutions): the result record, as `--format jsonl` prints it, and
// whether it came from the cache.
type Solution struct {
	result.Result
	// Cached is true when the result was in the cache, false when a worker
	// has just solved the puzzle.
	Cached bool `json:"cached"`
}

// solution wraps r, its Cached flag in the answer.
func solution(r result.Result) *Solution {
	c := r.Cached
	r.Cached = false
	return &Solution{Result: r, Cached: c}
}

// solveRequest is the JSON body of POST /v1/solve.
type solveRequest struct {
	Puzzle *string `json:"puzzle"`
}

// postSolve answers POST /v1/solve: one puzzle, from the body (the
// puzzle's text in any accepted format, or JSON {"puzzle": "..."}). It
// answers from the hot cache, else client.Solve: from the cache, else a
// worker's solve endpoint (NATS request/reply, ahead of any bulk job),
// awaited up to SolveTimeout. A cache that is down is only a miss.
func (s *Server) postSolve(w http.ResponseWriter, r *http.Request) error {
	text, err := s.readPuzzle(w, r)
	if err != nil {
		return err
	}
	g, err := solver.Parse(text)
	if err != nil {
		return badPuzzle(err)
	}
	key := g.Key()
	if res, ok := s.hotGet(key); ok {
		writeJSON(w, http.StatusOK, solution(res))
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.SolveTimeout)
	defer cancel()
	res, err := s.client.As(callerOf(r)).Solve(ctx, g.String(), client.SolveOptions{})
	var se *queue.ServiceError
	switch {
	case errors.As(err, &se) && se.Code == queue.CodeInvalidPuzzle:
		return errorf(http.StatusBadRequest, CodeBadPuzzle, "%s", se.Description)
	case errors.Is(err, client.ErrNoWorker):
		return &Error{Status: http.StatusGatewayTimeout, Code: CodeSolveTimeout,
			Message:    fmt.Sprintf("no worker answered within %s (are workers running?); retry later", s.opts.SolveTimeout),
			RetryAfter: retryAfter, Err: err}
	case err != nil:
		return queueUnavailable(err)
	}
	s.answered(key, res)
	writeJSON(w, http.StatusOK, solution(res))
	return nil
}

// hotGet returns the result of key from the hot cache, counted as a hit.
func (s *Server) hotGet(key string) (result.Result, bool) {
	r, ok := s.hot.Get(key)
	if ok {
		s.metrics.CacheLookups(1, 0)
		r.Cached = true
	}
	return r, ok
}

// answered counts r, the answer about key from the client (a hit when
// cached), and keeps it in the hot cache.
func (s *Server) answered(key string, r result.Result) {
	if r.Cached {
		s.metrics.CacheLookups(1, 0)
	} else {
		s.metrics.CacheLookups(0, 1)
	}
	r.Line = 0
	s.hot.Add(key, r)
}

// readPuzzle returns the puzzle in the body of r: the body itself, or its
// "puzzle" member when it is JSON.
func (s *Server) readPuzzle(w http.ResponseWriter, r *http.Request) (string, error) {
	// The limit in force, named: the fixed one for a puzzle, or the
	// setting when it is smaller.
	limit, which := int64(maxSolveBody), "for one puzzle; many go as a job, POST /v1/jobs"
	if s.opts.MaxBodyBytes < limit {
		limit, which = s.opts.MaxBodyBytes, maxBodySetting
	}
	if r.ContentLength > limit {
		return "", tooLarge(limit, which)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", tooLarge(limit, which)
		}
		return "", errorf(http.StatusBadRequest, CodeBadRequest, "reading the body: %v", err)
	}
	if !isJSON(r) {
		return string(data), nil
	}
	var req solveRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", errorf(http.StatusBadRequest, CodeBadJSON, `body: want {"puzzle": "..."}: %v`, err)
	}
	if dec.More() {
		return "", errorf(http.StatusBadRequest, CodeBadJSON, `body: want one JSON object {"puzzle": "..."}, found more after it`)
	}
	if req.Puzzle == nil {
		return "", errorf(http.StatusBadRequest, CodeBadJSON, `body: missing "puzzle": want {"puzzle": "..."}`)
	}
	return *req.Puzzle, nil
}

// isJSON reports whether r's body is declared JSON.
func isJSON(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// maxBodySetting names the setting of Options.MaxBodyBytes.
const maxBodySetting = "serve.max_body_bytes"

// tooLarge is the 413 for a body over limit bytes; which says what sets
// that limit.
func tooLarge(limit int64, which string) *Error {
	e := errorf(http.StatusRequestEntityTooLarge, CodeTooLarge,
		"the body is larger than the limit of %d bytes (%s)", limit, which)
	e.Details = map[string]any{"max_bytes": limit}
	return e
}

// getSolutionByKey answers GET /v1/solutions/{key}: the cached result of
// the puzzle with that key.
func (s *Server) getSolutionByKey(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if !solver.IsKey(key) {
		return errorf(http.StatusBadRequest, CodeBadKey, "key %q: want the 64 lower-case hex digits of a puzzle's key", clip(key))
	}
	return s.writeCached(w, r, key)
}

// getSolutionByPuzzle answers GET /v1/solutions?puzzle=...: the cached
// result of a puzzle given in any accepted format.
func (s *Server) getSolutionByPuzzle(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if !q.Has("puzzle") {
		return errorf(http.StatusBadRequest, CodeBadRequest,
			"give the puzzle (?puzzle=...) or its key (/v1/solutions/{key})")
	}
	g, err := solver.Parse(q.Get("puzzle"))
	if err != nil {
		return badPuzzle(err)
	}
	return s.writeCached(w, r, g.Key())
}

// writeCached answers with the cached result of key (client.Get), or a
// 404.
func (s *Server) writeCached(w http.ResponseWriter, r *http.Request, key string) error {
	res, ok := s.hotGet(key)
	if !ok {
		var err error
		res, err = s.client.As(callerOf(r)).Get(r.Context(), key)
		switch {
		case errors.Is(err, client.ErrUnavailable):
			return cacheUnavailable(errors.New("Redis is down or not configured"))
		case err != nil:
			s.metrics.CacheLookups(0, 1)
			return errorf(http.StatusNotFound, CodeSolutionNotFound,
				"no cached result for key %s (POST /v1/solve to solve it)", key)
		}
		s.answered(key, res)
	}
	writeJSON(w, http.StatusOK, solution(res))
	return nil
}

// clip cuts s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
