package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// SolveRequest is the JSON form of a request to the solve endpoint; the
// body may also be the puzzle alone, as text.
type SolveRequest struct {
	Puzzle string `json:"puzzle"`
	// First stops at the first solution instead of proving it unique.
	First bool `json:"first,omitempty"`
}

// The error codes of the micro service's endpoints, in the Nats-Service-Error-Code
// header, with a description of the problem in Nats-Service-Error (see
// docs/protocol.md).
const (
	// CodeBadRequest: the body is neither a puzzle nor a SolveRequest.
	CodeBadRequest = "400"
	// CodeInvalidPuzzle: the puzzle does not parse or breaks the rules;
	// the description says what and where, the body is the invalid result
	// as JSON.
	CodeInvalidPuzzle = "422"
	// CodeNotFound: the status endpoint knows no such job (never
	// submitted, removed, or expired).
	CodeNotFound = "404"
	// CodeInternal: the request failed for a reason of the service's
	// own (a job record it cannot read); the description says what.
	CodeInternal = "500"
	// CodeUnavailable: the worker is stopping, or JetStream did not answer
	// (the description says what); the request may succeed later.
	CodeUnavailable = "503"
	// CodeForbidden: the caller may not do that to the job (it is
	// another owner's); the description names caller, owner and what.
	CodeForbidden = "403"
	// CodeQuota: the caller's owner is over one of its quotas; the
	// description names the quota and its value.
	CodeQuota = "429"
)

// ParseSolveRequest reads the body of a solve request: a JSON object
// (SolveRequest), or the puzzle as text.
func ParseSolveRequest(data []byte) (SolveRequest, error) {
	t := bytes.TrimSpace(data)
	if len(t) > 0 && t[0] == '{' {
		var r SolveRequest
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return r, fmt.Errorf("request is not a puzzle nor a JSON object {\"puzzle\": ..., \"first\": ...}: %w", err)
		}
		return r, nil
	}
	return SolveRequest{Puzzle: string(t)}, nil
}

// ServiceError is the error of a request a micro service endpoint refused:
// its code and description, from the Nats-Service-Error headers.
type ServiceError struct {
	Code        string
	Description string
	// Data is the reply's body (for CodeInvalidPuzzle, the invalid result
	// as JSON).
	Data []byte
}

func (e *ServiceError) Error() string { return e.Description + " (code " + e.Code + ")" }

// ErrService is matched by every *ServiceError.
var ErrService = errors.New("service error")

// Is makes errors.Is(err, ErrService) true.
func (e *ServiceError) Is(target error) bool { return target == ErrService }

// HdrNoLookup, on a solve request, says that the caller looked the puzzle
// up in the cache and did not find it: the worker solves it without a
// lookup of its own. Workers that do not know it look up, as without it.
const HdrNoLookup = "Sudoku-No-Lookup"

// The headers of a micro service error (as nats.go's micro package sets
// them).
const (
	HdrServiceError     = "Nats-Service-Error"
	HdrServiceErrorCode = "Nats-Service-Error-Code"
)

// ServiceErrorOf returns the error a micro service's reply carries, or nil
// for a reply that is not an error.
func ServiceErrorOf(m *nats.Msg) *ServiceError {
	code := m.Header.Get(HdrServiceErrorCode)
	if code == "" {
		return nil
	}
	return &ServiceError{Code: code, Description: m.Header.Get(HdrServiceError), Data: m.Data}
}

// ProtocolVersion is the version of the micro service's protocol: its
// endpoints' subjects, requests, replies and error codes, and where a
// job's results are (docs/protocol.md says what a new version covers).
// The micro service's metadata and each endpoint's carry it as
// "protocol".
const ProtocolVersion = 2

// ServiceMetadata describes the queue a worker serves, for the micro
// service's (and its endpoints') metadata: a tool that sees the "sudoku"
// service of several queues on one NATS tells them apart by it.
func ServiceMetadata(o Options) map[string]string {
	o.defaults()
	return map[string]string{
		"protocol":       strconv.Itoa(ProtocolVersion),
		"subject_prefix": o.Prefix,
		"work_stream":    o.Stream,
		"results_stream": o.ResultsStream(),
		"dlq_stream":     o.DLQStream,
		"jobs_bucket":    o.JobsBucket(),
	}
}

// The forms of a job's results messages, as SubmitReply and StatusReply
// name them.
const (
	// FormJSON: job.JSONResults, for clients in any language.
	FormJSON = "json"
	// FormBinary: the binary results batch of internal/job, for Go
	// readers (producer.Follow).
	FormBinary = "binary"
)

// SubmitRequest is the JSON form of a request to the submit endpoint; the
// body may also be the puzzles as text, in any format internal/input
// reads (one puzzle a line, or 9-line grids).
type SubmitRequest struct {
	// Puzzles are the job's puzzles: element i is line i+1 of the job
	// (the line its result names). An empty element, or one starting with
	// '#', is skipped like a blank or comment line.
	Puzzles []string `json:"puzzles"`
	// First stops at each puzzle's first solution.
	First bool `json:"first,omitempty"`
	// Force solves every puzzle, even those in the cache.
	Force bool `json:"force,omitempty"`
	// JSONResults publishes the results in the JSON form (the default:
	// nil is true); false selects the binary form, for Go readers.
	JSONResults *bool `json:"json_results,omitempty"`
	// Priority is the job's share of the workers: "low", "normal" (the
	// default) or "high".
	Priority string `json:"priority,omitempty"`
}

// JSON reports whether the results are asked for in the JSON form.
func (r *SubmitRequest) JSON() bool { return r.JSONResults == nil || *r.JSONResults }

// ParseSubmitRequest reads the body of a submit request: a JSON object
// (SubmitRequest), or else text, returned as it is (text is nil for a
// JSON body). Every error is the client's: answer it with
// CodeBadRequest.
func ParseSubmitRequest(data []byte) (r SubmitRequest, text []byte, err error) {
	t := bytes.TrimSpace(data)
	if len(t) == 0 || t[0] != '{' {
		return r, data, nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, nil, fmt.Errorf("request is not puzzles as text nor a JSON object {\"puzzles\": [...], \"first\": false, \"force\": false, \"json_results\": true}: %w", err)
	}
	if dec.More() {
		return r, nil, errors.New("request: unexpected data after the JSON object")
	}
	return r, nil, nil
}

// ResultsInfo says where a job's results are: one message per batch, on
// Filter's subjects (Prefix.results.<job>.<batch>) in Stream, in Form
// (FormJSON or FormBinary), none before the stream's sequence StartSeq
// (0: unknown), where a reader may start instead of at the stream's
// first message.
type ResultsInfo struct {
	Stream   string `json:"stream"`
	Filter   string `json:"filter"`
	Form     string `json:"form"`
	StartSeq uint64 `json:"start_seq,omitempty"`
}

// ResultsOf returns where the results of job id are, in form, from the
// sequence startSeq on (the job record's ResultsFrom).
func (o Options) ResultsOf(id, form string, startSeq uint64) ResultsInfo {
	return ResultsInfo{Stream: o.ResultsStream(), Filter: o.ResultsFilter(id), Form: form, StartSeq: startSeq}
}

// StatusRequest is the JSON form of a request to the status endpoint; the
// body may also be the job id alone, as text.
type StatusRequest struct {
	Job string `json:"job"`
}

// ParseStatusRequest reads the body of a status request and returns the
// job id, checked for its form (not for its existence). Every error is
// the client's: answer it with CodeBadRequest.
func ParseStatusRequest(data []byte) (string, error) {
	t := bytes.TrimSpace(data)
	var r StatusRequest
	if len(t) > 0 && t[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return "", fmt.Errorf("request is not a job id nor a JSON object {\"job\": \"...\"}: %w", err)
		}
	} else {
		r.Job = string(t)
	}
	if !job.ValidID(r.Job) {
		s := r.Job
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return "", fmt.Errorf("job id %q: want the id the submit endpoint returned (%s)", s, job.IDForm)
	}
	return r.Job, nil
}
