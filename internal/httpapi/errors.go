package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// The error codes of the API: the "code" of an error body. They are
// stable; clients may switch on them. openapi.json lists them too.
const (
	// CodeBadPuzzle (400): the puzzle does not parse or has a repeated
	// given; the message and the details name the line, column and cell.
	CodeBadPuzzle = "bad_puzzle"
	// CodeBadKey (400): a solution key that is not 64 lower-case hex digits.
	CodeBadKey = "bad_key"
	// CodeBadJobID (400): a job id that cannot be one.
	CodeBadJobID = "bad_job_id"
	// CodeBadJSON (400): a JSON body that does not decode, or not of the
	// expected shape.
	CodeBadJSON = "bad_json"
	// CodeBadRequest (400): a missing or bad query parameter.
	CodeBadRequest = "bad_request"
	// CodeUnauthorized (401): no bearer token, or the wrong one.
	CodeUnauthorized = "unauthorized"
	// CodeHostNotAllowed (403): the request's Host is not one the server
	// answers to (see serve.allowed_hosts); against DNS rebinding.
	CodeHostNotAllowed = "host_not_allowed"
	// CodeCrossOrigin (403): a request that may change something, sent by
	// a browser page of another origin not in serve.allowed_origins.
	CodeCrossOrigin = "cross_origin"
	// CodeForbidden (403): the job is another owner's, and the caller's
	// role does not act for others (producer.MayTouch); the message and
	// the details name the caller, the owner, the job and the operation
	// (read or change). Also a refusal of the server's NATS user by NATS
	// (it may not act for this owner: run serve as a gateway user).
	CodeForbidden = "forbidden"
	// CodeNotFound (404): no such route.
	CodeNotFound = "not_found"
	// CodeJobNotFound (404): no job with that id (or it expired).
	CodeJobNotFound = "job_not_found"
	// CodeSolutionNotFound (404): the puzzle or key is not in the cache.
	CodeSolutionNotFound = "solution_not_found"
	// CodeMethodNotAllowed (405): the route exists for other methods (see
	// the Allow header).
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeJobNotFinished (409): results asked for with wait=false before
	// the job finished.
	CodeJobNotFinished = "job_not_finished"
	// CodeJobFailed (409): results asked for of a job whose submission
	// failed; it has none.
	CodeJobFailed = "job_failed"
	// CodeOverQuota (429): the caller (the job's owner) is over one of its
	// quotas; the message and the details name the quota and its value.
	CodeOverQuota = "over_quota"
	// CodeTooLarge (413): the body is larger than its limit
	// (serve.max_body_bytes; smaller for POST /v1/solve, one puzzle).
	CodeTooLarge = "too_large"
	// CodeInternal (500): a bug; the server log has the details.
	CodeInternal = "internal"
	// CodeQueueUnavailable (503): NATS cannot be reached; retry later.
	CodeQueueUnavailable = "queue_unavailable"
	// CodeCacheUnavailable (503): a cache lookup (GET /v1/solutions) while
	// Redis cannot be reached; retry later.
	CodeCacheUnavailable = "cache_unavailable"
	// CodeSolveTimeout (504): no worker answered in time; retry later.
	CodeSolveTimeout = "solve_timeout"
)

// retryAfter is the retry hint of 503 and 504 answers.
const retryAfter = 5 * time.Second

// Error is an API error: the HTTP status, a stable Code, a Message for
// people that says what is wrong, optional Details (for a bad puzzle: the
// line, column and cell), a retry hint for 503s, and the cause, which is
// logged but never shown.
type Error struct {
	Status     int
	Code       string
	Message    string
	Details    map[string]any
	RetryAfter time.Duration
	Err        error
}

// Error returns the code and the message, and the cause if any.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// errorBody is the JSON of an error answer:
// {"error":{"code":"bad_puzzle","message":"...","details":{...}}}.
type errorBody struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details,omitempty"`
	} `json:"error"`
}

// write sends e as the answer.
func (e *Error) write(w http.ResponseWriter) {
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.Details = e.Code, e.Message, e.Details
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds())))
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sudoku"`)
	}
	writeJSON(w, e.Status, &b)
}

// writeJSON sends v as a JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		// Only values of our own types are written: this is a bug.
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"code":"internal","message":"internal error: cannot encode the answer"}}`)
	}
	data = append(data, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// errorf returns an *Error without a cause.
func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// badPuzzle returns the 400 for a puzzle that does not parse: the
// solver's message, which names the line, column and cell, and the same
// facts as details (result.ParseDetails).
func badPuzzle(err error) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadPuzzle, Message: err.Error(), Details: result.ParseDetails(err)}
}

// forbidden is the 403 of a caller refused what its ownership or its
// role does not allow: another owner's job (a *producer.ForbiddenError,
// whose facts are the details), or an operation NATS refused the
// server's user (a *roles.PermissionError).
func forbidden(err error) *Error {
	e := &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: err.Error()}
	var fe *producer.ForbiddenError
	if errors.As(err, &fe) {
		what := "read"
		if fe.Write {
			what = "change"
		}
		e.Details = map[string]any{"caller": fe.Caller, "owner": fe.Owner, "job": fe.Job, "operation": what}
	}
	return e
}

// overQuota is the 429 of a submission over one of its owner's quotas:
// the *job.QuotaError's message, and its facts as the details.
func overQuota(err error) *Error {
	e := &Error{Status: http.StatusTooManyRequests, Code: CodeOverQuota, Message: err.Error()}
	var qe *job.QuotaError
	if errors.As(err, &qe) {
		e.Details = map[string]any{"owner": qe.Owner, "quota": qe.Quota, "limit": qe.Limit, "has": qe.Have}
	}
	return e
}

// cacheUnavailable is the 503 for a cache lookup the cache did not answer
// (down, or none configured).
func cacheUnavailable(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeCacheUnavailable,
		Message: "the result cache (Redis) is not answering; retry later, or POST /v1/solve", RetryAfter: retryAfter, Err: err}
}

// queueUnavailable is the 503 for a failed call to NATS.
func queueUnavailable(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeQueueUnavailable,
		Message: "the queue (NATS JetStream) is not answering; retry later", RetryAfter: retryAfter, Err: err}
}

// notReady is /readyz's 503: the message says why (it names no server).
func notReady(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeQueueUnavailable,
		Message: "not ready: " + err.Error(), RetryAfter: retryAfter}
}

// dependencyError turns the error of an operation on NATS into a 503 when
// NATS is down or too slow; a failure that does not explain is a 500.
func (s *Server) dependencyError(ctx context.Context, err error) *Error {
	if !s.nc.IsConnected() {
		return queueUnavailable(err)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeQueueUnavailable,
			Message: "the queue (NATS JetStream) was too slow to answer in time; retry later", RetryAfter: retryAfter, Err: err}
	}
	return internalError(err)
}

// internalError is the 500 for a failure that is not the caller's nor a
// service's: the message says where to look, the cause is logged.
func internalError(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal,
		Message: "internal error; the server log has the details", Err: err}
}
