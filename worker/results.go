package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// check compares b with its job's manifest. It returns the dead-letter
// reason of a batch the job's producer did not publish, "" for one it
// did, or an error when JetStream could not tell.
func (w *Worker) check(ctx context.Context, b *job.Batch, d job.Digest, subject string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if id, _, ok := w.q.Opts.WorkJob(subject); !ok || id != b.Job {
		// Published under another job's subject: its owner's right to
		// publish there says nothing of this job, and 'job rm' of that
		// job would not reach it.
		return queue.ReasonMismatch, nil
	}
	// A small job's manifest is in its record, as the watch has it (or
	// brings it: its batch is published before its record is created).
	if rec, _, ok := w.sched.awaitRecord(ctx, b.Job, recordWait); ok && len(rec.Manifest) > 0 {
		if m, err := job.DecodeManifest(0, rec.Manifest); err == nil && m.Has(b.Index) {
			if want, _ := m.Lookup(b.Index); want != d {
				return queue.ReasonMismatch, nil
			}
			return "", nil
		}
	}
	// A manifest read earlier may hold fewer batches than now (the
	// producer stores a chunk's manifest again as it publishes more of
	// its batches): one without this batch is read again, from the
	// bucket's leader when a replica's does not list it either (see
	// job.Store.ManifestOf). What the leader does not list is asked again
	// a few times before the batch is refused, in case of a leader just
	// elected.
	var m *job.Manifest
	var err error
	for wait := time.Duration(0); ; wait = max(2*wait, 50*time.Millisecond) {
		m, err = w.mf.get(ctx, w.jobs, b.Job, b.Index)
		if !errors.Is(err, job.ErrNotFound) || wait > time.Second {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if errors.Is(err, job.ErrNotFound) {
		_, _, rerr := w.jobs.Get(ctx, b.Job)
		switch {
		case errors.Is(rerr, job.ErrNotFound):
			return queue.ReasonUnknownJob, nil
		case rerr != nil:
			return "", rerr
		}
		return queue.ReasonOutOfRange, nil
	}
	if err != nil {
		return "", err
	}
	if want, _ := m.Lookup(b.Index); want != d {
		return queue.ReasonMismatch, nil
	}
	return "", nil
}

// recordWait bounds how long a worker waits for its watch to bring the
// record of a batch's job before it reads the job's manifests itself.
const recordWait = time.Second

// stored reports whether b's results are in the results stream already,
// as the results of this very batch, each answer verified (job.Outcome's
// Verify), and returns their counts: results with the right digest and a
// wrong answer (forged) are not, and are replaced once the batch is
// answered.
func (w *Worker) stored(ctx context.Context, b *job.Batch, d job.Digest) (job.Counts, bool) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	rm, err := w.q.ResultStore().Last(ctx, w.q.Opts.ResultSubject(b.Job, b.Index))
	if err != nil {
		return nil, false
	}
	got, err := job.DecodeAnyResults(rm.Data)
	if err != nil || got.Digest != d || got.Job != b.Job || got.Index != b.Index || len(got.Items) != len(b.Items) {
		return nil, false
	}
	got.Flags = got.Flags&^job.FlagFirstSolution | b.Flags&job.FlagFirstSolution
	if got.ComputeDigest() != d {
		return nil, false
	}
	first := b.Flags&job.FlagFirstSolution != 0
	for i := range got.Items {
		if got.Items[i].Kind == job.Known && got.Items[i].Outcome.Verify(ctx, first, job.Proven) != nil {
			return nil, false
		}
	}
	return job.CountItems(got.Items), true
}

// count adds the counts c of batch b's stored results to its job's
// record, unless they are there already, and reports whether that
// finished the job, and the record as stored. A job removed meanwhile has
// nothing to count.
//
// The worker's last batches of the job are added again with it, when the
// record lacks them: on nats-server before 2.9.21 a cluster may take two
// updates of one revision made at once, the later undoing the earlier
// (see job.Record.Recount), and each worker's next write puts back what
// it had counted. The job's last batches, which no later write follows,
// are recounted from their results once its work is all done
// (schedule.recountJob).
func (w *Worker) count(ctx context.Context, b *job.Batch, c job.Counts) (finished bool, rec job.Record, err error) {
	ctx, cancel := context.WithTimeout(ctx, 3*apiTimeout)
	defer cancel()
	recent := w.counted.get(b.Job)
	// The record as the watch has it first: one request, not two, when
	// nobody changed it since.
	hint, rev, _ := w.sched.record(b.Job)
	rec, err = w.jobs.ApplyFrom(ctx, b.Job, hint, rev, func(r *job.Record) error {
		now := time.Now()
		changed := r.AddResults(b.Index, c, now)
		for _, d := range recent {
			changed = r.AddResults(d.index, d.counts, now) || changed
		}
		if !changed {
			return job.ErrUnchanged
		}
		finished = r.State == job.Finished
		return nil
	})
	if errors.Is(err, job.ErrNotFound) {
		return false, rec, nil
	}
	if err != nil {
		return false, rec, fmt.Errorf("worker: count the results of batch %d of job %s: %w", b.Index, b.Job, err)
	}
	w.counted.add(b.Job, b.Index, c)
	if !rec.State.Active() {
		w.sched.noteEnded(b.Job, rec.State)
	}
	return finished, rec, nil
}

// countedBatches keeps each job's last batches a worker counted, to add
// again to its record (Worker.count). It is bounded: maxCountedJobs jobs
// of maxCountedBatches batches.
type countedBatches struct {
	mu   sync.Mutex
	jobs map[string][]countedBatch
}

type countedBatch struct {
	index  uint64
	counts job.Counts
}

const (
	maxCountedJobs    = 256
	maxCountedBatches = 32
)

// get returns a copy of job id's batches counted.
func (cb *countedBatches) get(id string) []countedBatch {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return slices.Clone(cb.jobs[id])
}

// add notes batch index of job id, counted with c.
func (cb *countedBatches) add(id string, index uint64, c job.Counts) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.jobs == nil || len(cb.jobs) >= maxCountedJobs && cb.jobs[id] == nil {
		cb.jobs = map[string][]countedBatch{}
	}
	l := append(cb.jobs[id], countedBatch{index, c})
	if len(l) > maxCountedBatches {
		l = slices.Delete(l, 0, len(l)-maxCountedBatches)
	}
	cb.jobs[id] = l
}

// finished notes a job whose last results this worker counted. Its lane
// stays while it has other jobs; a message of it left there (a copy
// whose ack was lost, or one forged) is taken as any, and acked when its
// results are stored, else dropped or dead-lettered.
func (w *Worker) finished(finished bool, id string) {
	if finished {
		w.log.Debug("worker: job finished", "job", id)
	}
}

// publishResults publishes b, every item answered, to the results stream
// (queue.PublishResults): a message already on its subject stays when it
// answers the batch as b does (ours from an earlier delivery, or another
// worker's), and is replaced when it does not (published by hand or
// forged, even with the right digest, or broken), so that the job ends
// with the right results.
func (w *Worker) publishResults(ctx context.Context, b *job.Batch, d job.Digest, sc *scratch) error {
	b.Digest = d
	m := w.q.Opts.ResultsMsgIn(b, sc.body) // the client copies it as it publishes
	sc.body = m.Data
	if w.opts.Signer != nil {
		m.Header.Set(proof.Header, w.opts.Signer.SignResults(b.Job, b.Index, m.Data))
	}
	ctx, cancel := context.WithTimeout(ctx, 3*apiTimeout)
	defer cancel()
	replaced, err := w.q.PublishResults(ctx, m, publishAttempt, queue.SameResults(ctx, b))
	if replaced {
		w.log.Warn("worker: the results subject of a batch held a message that does not answer it; replaced it",
			"job", b.Job, "batch", b.Index)
	}
	if err != nil {
		return fmt.Errorf("worker: publish the results of batch %d of job %s: %w", b.Index, b.Job, err)
	}
	return nil
}

// apiTimeout bounds each JetStream request of a worker: a stream that is
// gone, or a cluster without a leader, must fail the batch (it is
// redelivered) rather than hold it for ever.
const apiTimeout = 10 * time.Second

// publishAttempt bounds one attempt at publishing a batch's results.
const publishAttempt = 2 * time.Second

// manifestCache keeps the manifests a worker has read: a manifest never
// changes once its batches are published. It holds at most
// maxManifests, forgetting them all when full.
type manifestCache struct {
	mu sync.Mutex
	m  map[string]*job.Manifest
}

const maxManifests = 4096

// get returns the manifest of job id that lists batch index: the one
// kept, when it lists it, else one read anew (job.Store.ManifestOf).
func (c *manifestCache) get(ctx context.Context, s *job.Store, id string, index uint64) (*job.Manifest, error) {
	k := id + "/" + strconv.FormatUint(job.ManifestChunk(index), 10)
	c.mu.Lock()
	m := c.m[k]
	c.mu.Unlock()
	if m != nil && m.Has(index) {
		return m, nil
	}
	got, err := s.ManifestOf(ctx, id, index)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxManifests {
		c.m = map[string]*job.Manifest{}
	}
	c.m[k] = &got
	return &got, nil
}
