package job

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound is matched by the errors of a job (or manifest) that has no
// record: never submitted, removed, or expired.
var ErrNotFound = errors.New("no such job")

// ErrBadRecord is matched by the error of a job whose record does not
// decode.
var ErrBadRecord = errors.New("the record does not decode")

// ErrConflict is matched by the error of Update when the record changed
// since it was read.
var ErrConflict = errors.New("job record changed meanwhile")

// Store reads and writes job records and manifests in the jobs bucket,
// through the Bucket seam. It is safe for concurrent use.
type Store struct {
	b Bucket
}

// NewStore returns a store on the jobs bucket kv (queue.Queue.Jobs).
func NewStore(js jetstream.JetStream, kv jetstream.KeyValue) *Store {
	return &Store{b: NewKVBucket(js, kv)}
}

// NewStoreOn returns a store on b: a MemBucket in tests.
func NewStoreOn(b Bucket) *Store { return &Store{b: b} }

// Create stores the record of a new job; it fails if the id is taken.
func (s *Store) Create(ctx context.Context, r *Record) (rev uint64, err error) {
	rev, err = s.b.Create(ctx, r.ID, r.Encode())
	if err != nil {
		return 0, fmt.Errorf("job %s: create record: %w", r.ID, err)
	}
	return rev, nil
}

// Update stores r if the record is still at revision rev, and returns the
// new revision; ErrConflict when it is not.
func (s *Store) Update(ctx context.Context, r *Record, rev uint64) (uint64, error) {
	n, err := s.b.Update(ctx, r.ID, r.Encode(), rev)
	if errors.Is(err, ErrConflict) {
		return 0, fmt.Errorf("job %s: %w", r.ID, ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("job %s: update record: %w", r.ID, err)
	}
	return n, nil
}

// ErrCancelled is matched by the errors of work on a job that was
// cancelled.
var ErrCancelled = errors.New("job cancelled")

// ErrUnchanged, returned by the function given to Apply, leaves the
// record as it is; Apply then returns it and no error.
var ErrUnchanged = errors.New("record unchanged")

// Apply changes job id's record with fn, by compare-and-set on its
// revision: fn is called on the record as it is now, and again on a
// newer one when another client changed it meanwhile, so that every
// change is applied to the latest record and none is lost. It returns the
// record as stored. fn's error other than ErrUnchanged stops Apply and is
// returned.
//
// Each attempt's read and write are bounded by applyAttempt, and one that
// runs out is tried again while ctx lasts: a reply lost with a server
// that restarted must not hold the caller for ctx's whole time. A write
// that was stored after all makes the next attempt's revision stale, and
// fn then sees its own change (its changes must be idempotent).
func (s *Store) Apply(ctx context.Context, id string, fn func(*Record) error) (Record, error) {
	return s.ApplyFrom(ctx, id, Record{}, 0, fn)
}

// ApplyFrom is Apply, first trying fn on hint, the record at revision rev
// as the caller knows it (a watch of the bucket), instead of reading it:
// one request instead of two when nobody changed it since. rev 0 is no
// hint.
func (s *Store) ApplyFrom(ctx context.Context, id string, hint Record, rev uint64, fn func(*Record) error) (Record, error) {
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, applyAttempt)
		var r Record
		var err error
		hinted := attempt == 0 && rev > 0 && hint.ID == id
		if hinted {
			r = hint
			// fn changes r in place: none of hint's memory is shared.
			r.Done, r.Manifest = slices.Clone(hint.Done), slices.Clone(hint.Manifest)
			r.Counts = maps.Clone(hint.Counts)
		} else {
			r, rev, err = s.Get(actx, id)
		}
		if err == nil {
			if err = fn(&r); errors.Is(err, ErrUnchanged) {
				cancel()
				return r, nil
			} else if err != nil {
				cancel()
				return r, err
			}
			_, err = s.Update(actx, &r, rev)
		}
		cancel()
		lost := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		if err == nil || attempt >= maxApply || !lost && !errors.Is(err, ErrConflict) {
			return r, err
		}
		if lost || hinted {
			continue // a hint out of date is no contention
		}
		// Many writers of one record (workers storing its batches at the
		// same moment): a short random pause spreads them.
		select {
		case <-time.After(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 5)))):
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
}

// ApplyConfirmed is Apply, then checks a moment later that the record
// still holds the change (holds reports whether it does), and applies it
// again if not, a few times. A change of state (published, cancelled,
// failed) must not be undone: on nats-server before 2.9.21 a cluster may
// take two updates of the same revision made at once (see
// Record.Recount), the later one writing back the state the earlier
// changed. On a single server, which checks the revision where it
// stores the update and takes no such pair, it is Apply alone.
func (s *Store) ApplyConfirmed(ctx context.Context, id string, fn func(*Record) error, holds func(*Record) bool) (Record, error) {
	r, err := s.Apply(ctx, id, fn)
	if err != nil || !s.replicated(ctx) {
		return r, err
	}
	for wait := confirmAfter; err == nil && wait <= 8*confirmAfter; wait *= 2 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return r, nil // applied; not confirmed
		}
		got, _, gerr := s.Get(ctx, id)
		if gerr != nil || holds(&got) {
			return r, nil
		}
		r, err = s.Apply(ctx, id, fn)
	}
	return r, err
}

// replicated reports whether the bucket's changes may be lost on the
// way (Bucket.Replicated).
func (s *Store) replicated(ctx context.Context) bool { return s.b.Replicated(ctx) }

// confirmAfter is how long ApplyConfirmed first waits to read the record
// again: longer than it takes a cluster to apply an update made at the
// same moment as ours.
const confirmAfter = 25 * time.Millisecond

// maxApply bounds the attempts of Apply at one change; applyAttempt bounds
// each.
const (
	maxApply     = 100
	applyAttempt = 2 * time.Second
)

// Get returns a job's record and its revision.
func (s *Store) Get(ctx context.Context, id string) (Record, uint64, error) {
	if !ValidID(id) {
		return Record{}, 0, fmt.Errorf("%w: %q is not a job id", ErrNotFound, id)
	}
	e, err := s.b.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Record{}, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("job %s: read record: %w", id, err)
	}
	r, err := DecodeRecord(e.Value)
	if err != nil {
		return r, 0, fmt.Errorf("job %s: %w: %w", id, ErrBadRecord, err)
	}
	return r, e.Revision, nil
}

// PutManifest stores a manifest of job id.
func (s *Store) PutManifest(ctx context.Context, id string, m *Manifest) error {
	if _, err := s.b.Put(ctx, ManifestKey(id, m.Chunk), m.Encode()); err != nil {
		return fmt.Errorf("job %s: store manifest %d: %w", id, m.Chunk, err)
	}
	return nil
}

// ManifestOf returns the manifest of job id that lists batch index: the
// chunk's manifest as a replica has it, or as the bucket's leader has it
// when the replica's does not list the batch (a replica behind its
// leader, or a manifest grown since). ErrNotFound when the leader's does
// not list it either.
func (s *Store) ManifestOf(ctx context.Context, id string, index uint64) (Manifest, error) {
	chunk := ManifestChunk(index)
	key := ManifestKey(id, chunk)
	e, err := s.b.Get(ctx, key)
	switch {
	case err == nil:
		m, err := DecodeManifest(chunk, e.Value)
		if err != nil || m.Has(index) {
			return m, err
		}
		if s.replicated(ctx) {
			// A replica's, that may be behind: the leader's, then. (The
			// leader's own, on a single server: it does not list the
			// batch.)
			e, err = s.b.Latest(ctx, key)
		}
	case !errors.Is(err, ErrNotFound):
		return Manifest{}, fmt.Errorf("job %s: read manifest %d: %w", id, chunk, err)
	}
	value := e.Value
	if errors.Is(err, ErrNotFound) && chunk == 0 {
		// A small job's manifest is in its record (Record.Manifest).
		if r, _, rerr := s.Get(ctx, id); rerr == nil && len(r.Manifest) > 0 {
			value, err = r.Manifest, nil
		}
	}
	if errors.Is(err, ErrNotFound) {
		return Manifest{}, fmt.Errorf("%w: %s has no manifest %d", ErrNotFound, id, chunk)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("job %s: read manifest %d: %w", id, chunk, err)
	}
	m, err := DecodeManifest(chunk, value)
	if err == nil && !m.Has(index) {
		err = fmt.Errorf("%w: manifest %d of %s does not list batch %d", ErrNotFound, chunk, id, index)
	}
	return m, err
}

// List returns the records of the newest jobs of owner ("" for every
// owner's), newest first, at most limit of them. It reads them at once
// (Bucket.Values: on JetStream, one watch of the bucket), however many
// there are, not a request each. A record that does not decode
// (ErrBadRecord: written by hand, by another version, or broken) is
// skipped and passed to bad (if not nil): it never fails the listing.
func (s *Store) List(ctx context.Context, owner string, limit int, bad func(id string, err error)) ([]Record, error) {
	filter := cmp.Or(owner, "*") + ".*" // records only: manifests' keys have four tokens
	entries, err := s.b.Values(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var out []Record
	for _, e := range entries {
		if !ValidID(e.Key) {
			continue
		}
		r, err := DecodeRecord(e.Value)
		if err == nil && r.ID != e.Key {
			err = fmt.Errorf("record of %s under the key of %s", r.ID, e.Key)
		}
		if err != nil {
			if bad != nil {
				bad(e.Key, fmt.Errorf("job %s: %w: %w", e.Key, ErrBadRecord, err))
			}
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return CompareIDs(b.ID, a.ID) })
	return out[:min(limit, len(out))], nil
}

// DeleteKeys removes a job's record and the manifests of its batches
// key by key (Bucket.Purge of each): what its owner may do, whose right
// is to its own keys, not to purge the bucket's stream (Delete).
func (s *Store) DeleteKeys(ctx context.Context, id string, batches int64) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: %q is not a job id", ErrNotFound, id)
	}
	for chunk := uint64(0); batches > 0 && chunk <= ManifestChunk(uint64(batches-1)); chunk++ {
		if err := s.b.Purge(ctx, ManifestKey(id, chunk)); err != nil {
			return fmt.Errorf("job %s: remove manifest %d: %w", id, chunk, err)
		}
	}
	if err := s.b.Purge(ctx, id); err != nil {
		return fmt.Errorf("job %s: remove record: %w", id, err)
	}
	return nil
}

// Delete removes a job's record and manifests at once
// (Bucket.RemoveTree).
func (s *Store) Delete(ctx context.Context, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: %q is not a job id", ErrNotFound, id)
	}
	if err := s.b.RemoveTree(ctx, id); err != nil {
		return fmt.Errorf("job %s: remove record: %w", id, err)
	}
	return nil
}

// Watch follows the job records (not the manifests) until ctx is done:
// the records there are, the zero Entry, then every change
// (Bucket.Watch).
func (s *Store) Watch(ctx context.Context) (<-chan Entry, error) {
	// A record's key is the job's id, two tokens (owner and serial); the
	// manifests' keys have four.
	return s.b.Watch(ctx, "*.*")
}
