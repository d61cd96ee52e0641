package producer

import (
	"errors"
	"fmt"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
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
	// KindForbidden is a caller refused what its role or its ownership
	// does not allow: another owner's job (ErrForbidden), or an operation
	// the servers refused the user (roles.PermissionError).
	KindForbidden Kind = "forbidden"
	// KindQuota is an owner over one of its quotas (job.ErrQuota).
	KindQuota Kind = "quota"
)

// ErrForbidden is matched by the error of a call on a job its caller may
// not make: the job is another owner's (see MayTouch).
var ErrForbidden = errors.New("forbidden")

// ForbiddenError says who was refused what on whose job.
type ForbiddenError struct {
	Caller, Owner, Job string
	// Write is set for a change (cancel, remove), unset for a read.
	Write bool
}

func (e *ForbiddenError) Error() string {
	what := "read"
	if e.Write {
		what = "change"
	}
	role := "no role"
	if r, ok := roles.Of(e.Caller); ok {
		role = "role " + string(r)
	}
	return fmt.Sprintf("%s (%s) may not %s job %s: it is %s's", e.Caller, role, what, e.Job, e.Owner)
}

// Is makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// MayTouch returns nil when caller may read (write false) or change
// (write true: cancel, remove) job id: it owns the job, or its role acts
// for others (roles.Role.ActsForOthers to read, Writes to change);
// otherwise a *ForbiddenError. The servers enforce the same with each
// user's permissions (internal/roles); a door that acts for its callers
// under one user of its own (the HTTP API's gateway, the workers' micro
// service) asks this first.
func MayTouch(caller, id string, write bool) error {
	owner := job.OwnerOf(id)
	if caller == owner {
		return nil
	}
	if r, ok := roles.Of(caller); ok && (write && r.Writes() || !write && r.ActsForOthers()) {
		return nil
	}
	return &ForbiddenError{Caller: caller, Owner: owner, Job: id, Write: write}
}

// KindOf returns the kind of err, an error of this package's calls (nil:
// "").
func KindOf(err error) Kind {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, input.ErrEmpty), errors.Is(err, ErrTooMuchGrowth), errors.Is(err, ErrBadOwner):
		return KindBadRequest
	case errors.Is(err, ErrForbidden), errors.As(err, new(*roles.PermissionError)):
		return KindForbidden
	case errors.Is(err, job.ErrQuota):
		return KindQuota
	case errors.Is(err, job.ErrNotFound):
		return KindNotFound
	case queue.Unavailable(err):
		return KindUnavailable
	}
	return KindInternal
}
