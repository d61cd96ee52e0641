package producer

import (
	"errors"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Kind is what went wrong with a call on a job, named once here for every
// door to answer in its own words: the CLI with an exit status and a
// message, the HTTP API with a status and a code, the micro service with
// its error code.
type Kind string

// The kinds of failure. A failure of a submission that stopped after its
// job was created also matches ErrSubmit: the job exists, marked failed.
const (
	// KindBadRequest is the caller's mistake: no puzzle in the input, or
	// results that would take too much room for its size.
	KindBadRequest Kind = "bad_request"
	// KindNotFound names a job that does not exist (never submitted,
	// removed, or expired).
	KindNotFound Kind = "not_found"
	// KindUnavailable is JetStream not answering, or not in time: retry
	// later.
	KindUnavailable Kind = "unavailable"
	// KindInternal is any other failure.
	KindInternal Kind = "internal"
)

// KindOf returns the kind of err, an error of this package's calls (nil:
// "").
func KindOf(err error) Kind {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, input.ErrEmpty), errors.Is(err, ErrTooMuchGrowth):
		return KindBadRequest
	case errors.Is(err, job.ErrNotFound):
		return KindNotFound
	case queue.Unavailable(err):
		return KindUnavailable
	}
	return KindInternal
}
