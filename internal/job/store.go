package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound is matched by the errors of a job (or manifest) that has no
// record: never submitted, removed, or expired.
var ErrNotFound = errors.New("no such job")

// ErrConflict is matched by the error of Update when the record changed
// since it was read.
var ErrConflict = errors.New("job record changed meanwhile")

// Store reads and writes job records and manifests in the jobs bucket. It
// is safe for concurrent use.
type Store struct {
	js jetstream.JetStream
	kv jetstream.KeyValue
}

// NewStore returns a store on the jobs bucket kv (queue.Queue.Jobs).
func NewStore(js jetstream.JetStream, kv jetstream.KeyValue) *Store { return &Store{js: js, kv: kv} }

// Create stores the record of a new job; it fails if the id is taken.
func (s *Store) Create(ctx context.Context, r *Record) (rev uint64, err error) {
	rev, err = s.kv.Create(ctx, r.ID, r.Encode())
	if err != nil {
		return 0, fmt.Errorf("job %s: create record: %w", r.ID, err)
	}
	return rev, nil
}

// Update stores r if the record is still at revision rev, and returns the
// new revision; ErrConflict when it is not.
func (s *Store) Update(ctx context.Context, r *Record, rev uint64) (uint64, error) {
	n, err := s.kv.Update(ctx, r.ID, r.Encode(), rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("job %s: %w", r.ID, ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("job %s: update record: %w", r.ID, err)
	}
	return n, nil
}

// Get returns a job's record and its revision.
func (s *Store) Get(ctx context.Context, id string) (Record, uint64, error) {
	if !ValidID(id) {
		return Record{}, 0, fmt.Errorf("%w: %q is not a job id", ErrNotFound, id)
	}
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("job %s: read record: %w", id, err)
	}
	r, err := DecodeRecord(e.Value())
	if err != nil {
		return r, 0, fmt.Errorf("job %s: %w", id, err)
	}
	return r, e.Revision(), nil
}

// PutManifest stores a manifest of job id.
func (s *Store) PutManifest(ctx context.Context, id string, m *Manifest) error {
	if _, err := s.kv.Put(ctx, ManifestKey(id, m.Chunk), m.Encode()); err != nil {
		return fmt.Errorf("job %s: store manifest %d: %w", id, m.Chunk, err)
	}
	return nil
}

// Manifest returns manifest chunk of job id; ErrNotFound when there is
// none.
func (s *Store) Manifest(ctx context.Context, id string, chunk uint64) (Manifest, error) {
	e, err := s.kv.Get(ctx, ManifestKey(id, chunk))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Manifest{}, fmt.Errorf("%w: %s has no manifest %d", ErrNotFound, id, chunk)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("job %s: read manifest %d: %w", id, chunk, err)
	}
	return DecodeManifest(chunk, e.Value())
}

// List returns the records of the newest jobs, newest first, at most
// limit of them.
func (s *Store) List(ctx context.Context, limit int) ([]Record, error) {
	keys, err := s.kv.ListKeysFiltered(ctx, "*")
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var ids []string
	for k := range keys.Keys() {
		if ValidID(k) {
			ids = append(ids, k)
		}
	}
	// Ids sort by creation time.
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(b, a) })
	var out []Record
	for _, id := range ids {
		if len(out) >= limit {
			break
		}
		r, _, err := s.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Delete removes a job's record and manifests.
func (s *Store) Delete(ctx context.Context, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: %q is not a job id", ErrNotFound, id)
	}
	st, err := s.js.Stream(ctx, "KV_"+s.kv.Bucket())
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	prefix := "$KV." + s.kv.Bucket() + "." + id
	for _, subj := range []string{prefix + ".m.>", prefix} {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return fmt.Errorf("job %s: remove record: %w", id, err)
		}
	}
	return nil
}
