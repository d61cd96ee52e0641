package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// SolveRequest is the JSON form of a request to the solve endpoint; the
// body may also be the puzzle alone, as text.
type SolveRequest struct {
	Puzzle string `json:"puzzle"`
	// First stops at the first solution instead of proving it unique.
	First bool `json:"first,omitempty"`
}

// The error codes of the micro service's endpoints, in the Nats-Service-Error-Code
// header.
const (
	// CodeBadRequest: the body is neither a puzzle nor a SolveRequest.
	CodeBadRequest = "400"
	// CodeInvalidPuzzle: the puzzle does not parse or breaks the rules;
	// the description says what and where, the body is the invalid result
	// as JSON.
	CodeInvalidPuzzle = "422"
	// CodeUnavailable: the worker is stopping.
	CodeUnavailable = "503"
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
