package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
)

// The checks a verifier makes of a results batch, in the order it makes
// them: a refusal names the one that failed.
const (
	checkDecode   = "decode"   // the body decodes (binary or JSON form)
	checkJob      = "job"      // the body is of this job
	checkIndex    = "index"    // the body is the batch its subject names
	checkRange    = "range"    // the job has a batch of that index
	checkManifest = "manifest" // a manifest of the job lists the batch
	checkDigest   = "digest"   // the body's digest is the manifest's
	checkItems    = "items"    // the body's items are the batch published (their digest)
	checkAnswer   = "answer"   // every answer holds against its puzzle
)

// errRefused is matched (errors.Is) by every refusal of a verifier.
var errRefused = errors.New("results refused")

// refusal says why a verifier refused a results batch: which check
// failed, for which batch, and at which line when one answer did.
type refusal struct {
	Job   string
	Batch uint64
	Check string // one of the check constants
	Line  int    // for checkAnswer, the input line (Why says it too); else 0
	Why   string // what was wrong, as logged
}

// Error says which job and batch, which check, and why.
func (r *refusal) Error() string {
	return fmt.Sprintf("job %s batch %d: %v (%s check): %s", r.Job, r.Batch, errRefused, r.Check, r.Why)
}

// Is makes errors.Is(err, errRefused) true.
func (r *refusal) Is(target error) bool { return target == errRefused }

// verifier checks the results batches of one job against what its
// producer published, with no server of its own: the job's batch count
// and its manifests come from the functions it is given. Whoever can
// publish on the results subjects can forge a batch, so nothing of a
// batch is taken on trust but what its digest, the solver and a trusted
// worker's signature vouch for: a batch with a proof by a key of trust
// has its unique and gave_up answers taken at their word; any other has
// them confirmed by solving too (a unique that solving contradicts is
// refused: results_unproven).
type verifier struct {
	// trust is the keys whose proofs vouch for a batch (nil: none).
	trust *proof.Trust
	// job is the job's id.
	job string
	// first is the job's mode: first solution only (the digest covers
	// it, and Verify needs it).
	first bool
	// batches returns the job's number of batches, and whether that is
	// final (its publishing is over): a batch at or past a final count is
	// not the job's. Nil means none is known yet.
	batches func() (n uint64, final bool)
	// digest returns the digest the job's manifest lists for batch
	// index, false when no manifest lists it, or an error when it cannot
	// tell (ctx done).
	digest func(ctx context.Context, index uint64) (job.Digest, bool, error)
}

// check decodes data, the body of the results message for batch index
// (its subject's), into spare's memory when it has room, and checks it:
// its job and index, that the job has such a batch, its digest against
// the manifest's and its items', and every answer against its puzzle,
// unique and gave_up taken at their word only with a trusted proof (sig,
// the message's proof.Header).
// A batch it refuses returns an error matching errRefused (a *refusal);
// any other error is the digest lookup's.
func (v *verifier) check(ctx context.Context, index uint64, sig string, data []byte, spare []job.Item) (*job.Batch, error) {
	refuse := func(check string, line int, format string, args ...any) (*job.Batch, error) {
		return nil, &refusal{Job: v.job, Batch: index, Check: check, Line: line, Why: fmt.Sprintf(format, args...)}
	}
	b, err := job.DecodeAnyResultsInto(data, spare)
	if err != nil {
		return refuse(checkDecode, 0, "%v", err)
	}
	if b.Job != v.job {
		return refuse(checkJob, 0, "the message is batch %d of job %s", b.Index, b.Job)
	}
	if b.Index != index {
		return refuse(checkIndex, 0, "the message is batch %d of job %s", b.Index, b.Job)
	}
	if v.batches != nil {
		if n, final := v.batches(); final && index >= n {
			return refuse(checkRange, 0, "the job has %d batches", n)
		}
	}
	want, ok, err := v.digest(ctx, index)
	if err != nil {
		return nil, err
	}
	if !ok {
		return refuse(checkManifest, 0, "the job's manifests do not list it")
	}
	// The digest covers the mode: a batch answered in another one (a
	// forged work batch with other flags) does not match.
	b.Flags &^= job.FlagFirstSolution
	if v.first {
		b.Flags |= job.FlagFirstSolution
	}
	if b.Digest != want {
		return refuse(checkDigest, 0, "not the batch this job published (its digest %s, the manifest's %s)", b.Digest, want)
	}
	if got := b.ComputeDigest(); got != want {
		return refuse(checkItems, 0, "not the batch this job published (its items' digest %s, the manifest's %s)", got, want)
	}
	// A trusted worker's proof vouches for its unique and gave_up
	// answers; without one (none, a wrong one, an untrusted key's, or a
	// batch the producer answered from the cache itself) they are solved
	// again like the rest.
	prov := job.Unproven
	if v.trust.Enabled() && v.trust.VerifyResults(sig, v.job, index, data) == nil {
		prov = job.Proven
	}
	// Every answer checked, none and multiple confirmed by solving, and
	// unique and gave_up too unless a trusted worker signed them (an
	// unproven gave_up that solving settles is replaced by the answer).
	for i := range b.Items {
		if b.Items[i].Kind == job.Known {
			err := b.Items[i].Outcome.Verify(ctx, v.first, prov)
			if se, ok := errors.AsType[*job.SettledError](err); ok {
				// An unproven gave_up this reader solved: its own answer
				// is printed instead.
				b.Items[i].Outcome = se.Outcome
				continue
			}
			if err != nil {
				return refuse(checkAnswer, b.Items[i].Line, "line %d: %v", b.Items[i].Line, err)
			}
		}
	}
	return &b, nil
}
