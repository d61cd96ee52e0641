package job

import (
	"errors"
	"fmt"
)

// Quota bounds what one owner may have queued; a zero field is no bound.
// Workers enforce it on every owner's open jobs (Publishing or
// Published), failing the newest of a job over it; the doors refuse a
// submission over it before any of it is stored.
type Quota struct {
	// JobsOpen bounds an owner's open jobs.
	JobsOpen int
	// LinesPending bounds an owner's lines without a result yet, over its
	// open jobs.
	LinesPending int64
	// RequestBytes bounds the bytes one submission may store.
	RequestBytes int64
}

// The quotas' names, as the configuration's keys.
const (
	QuotaJobsOpen     = "quota.jobs_open"
	QuotaLinesPending = "quota.lines_pending"
	QuotaRequestBytes = "quota.request_bytes"
)

// Admit returns nil when owner, with jobs open holding lines pending,
// is within q's JobsOpen and LinesPending, else a *QuotaError naming the
// first quota it is over.
func (q Quota) Admit(owner string, jobs int, lines int64) error {
	switch {
	case q.JobsOpen > 0 && jobs > q.JobsOpen:
		return &QuotaError{Owner: owner, Quota: QuotaJobsOpen, Limit: int64(q.JobsOpen), Have: int64(jobs)}
	case q.LinesPending > 0 && lines > q.LinesPending:
		return &QuotaError{Owner: owner, Quota: QuotaLinesPending, Limit: q.LinesPending, Have: lines}
	}
	return nil
}

// ErrQuota is matched by the error of a submission, or of a job, refused
// because its owner is over a quota: a *QuotaError says which.
var ErrQuota = errors.New("over quota")

// QuotaError names the quota an owner is over, its value, and what the
// owner has or asks.
type QuotaError struct {
	Owner string
	// Quota is the setting's name (QuotaJobsOpen, ...), Limit its value,
	// Have what the owner has or the request asks.
	Quota       string
	Limit, Have int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("owner %s is over its quota %s = %d (it has or asks %d)", e.Owner, e.Quota, e.Limit, e.Have)
}

// Is makes errors.Is(err, ErrQuota) true.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }
