package job

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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

// replicatedBuckets caches Store.replicated by bucket name (a bucket's
// replicas change only by an operator's 'sudoku setup --apply').
var replicatedBuckets sync.Map

// replicated reports whether the bucket has more than one replica, or is
// on a cluster at all (where even one replica's updates may go through
// the cluster's consensus); when it cannot tell, it says so, to be safe.
func (s *Store) replicated(ctx context.Context) bool {
	name := s.kv.Bucket()
	if v, ok := replicatedBuckets.Load(name); ok {
		return v.(bool)
	}
	st, err := s.kv.Status(ctx)
	if err != nil {
		return true
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil {
		return true
	}
	info := bs.StreamInfo()
	r := info.Config.Replicas > 1 || info.Cluster != nil && info.Cluster.Name != ""
	replicatedBuckets.Store(name, r)
	return r
}

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
	value, rev, err := s.get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("job %s: read record: %w", id, err)
	}
	r, err := DecodeRecord(value)
	if err != nil {
		return r, 0, fmt.Errorf("job %s: %w: %w", id, ErrBadRecord, err)
	}
	return r, rev, nil
}

// get returns the value and revision of key; jetstream.ErrKeyNotFound
// only when the bucket's leader has no such key. The bucket allows direct
// gets, which any replica answers (kv.Get), and a replica behind its
// leader (after a server of the cluster was lost, say) answers "not
// found" for a key the leader has: a miss is asked again of the leader,
// with STREAM.MSG.GET, before it is believed.
func (s *Store) get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if err == nil {
		return e.Value(), e.Revision(), nil
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) || !s.replicated(ctx) {
		// A single server has no replica behind: a miss is one. (And a
		// producer may not read by STREAM.MSG.GET, which names no key.)
		return nil, 0, err
	}
	if f := ReadsBySequence; f != nil && !f(s.js.Conn().Opts.User) {
		// Asking the leader would be refused (and a refusal stops a
		// command): give the replica that answered time to catch up.
		return s.getAgain(ctx, key, err)
	}
	return s.leaderGet(ctx, key)
}

// ReadsBySequence reports whether NATS lets user read the jobs bucket by
// STREAM.MSG.GET, which names no key: the roles package sets it (admins,
// workers and readers may; producers and gateways, whose reads name the
// owners they may read, may not). Nil: every user may, as without roles.
var ReadsBySequence func(user string) bool

// getAgainTries and getAgainPause bound getAgain: about half a second,
// longer than a replica of a healthy cluster lags.
const (
	getAgainTries = 10
	getAgainPause = 50 * time.Millisecond
)

// getAgain reads key again, a few times, after a miss (err) on a
// replicated bucket by a user that may not ask the leader: the replica
// that answered may not have the record yet. It returns the last miss if
// the record does not appear.
func (s *Store) getAgain(ctx context.Context, key string, err error) ([]byte, uint64, error) {
	for range getAgainTries {
		select {
		case <-ctx.Done():
			return nil, 0, err
		case <-time.After(getAgainPause):
		}
		e, gerr := s.kv.Get(ctx, key)
		if gerr == nil {
			return e.Value(), e.Revision(), nil
		}
		if !errors.Is(gerr, jetstream.ErrKeyNotFound) {
			return nil, 0, gerr
		}
		err = gerr
	}
	return nil, 0, err
}

// leaderGet reads key from the leader of the bucket's stream.
func (s *Store) leaderGet(ctx context.Context, key string) ([]byte, uint64, error) {
	bucket := s.kv.Bucket()
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{"$KV." + bucket + "." + key})
	if err != nil {
		return nil, 0, err
	}
	if _, ok := ctx.Deadline(); !ok {
		// As the client's own requests: only the leader answers, and
		// while a cluster elects one nobody does.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(s.js.Options().DefaultTimeout, 5*time.Second))
		defer cancel()
	}
	reply, err := s.js.Conn().RequestWithContext(ctx, s.apiPrefix()+".STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return nil, 0, err
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
		Msg   *struct {
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
			Seq    uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("STREAM.MSG.GET of %s: %w", key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, 0, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return nil, 0, resp.Error
	case resp.Msg == nil:
		return nil, 0, jetstream.ErrInvalidJetStreamResponse
	}
	if len(resp.Msg.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Msg.Header)
		if err != nil {
			return nil, 0, fmt.Errorf("STREAM.MSG.GET of %s: %w", key, err)
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return nil, 0, jetstream.ErrKeyNotFound
		}
	}
	return resp.Msg.Data, resp.Msg.Seq, nil
}

// apiPrefix is the subject prefix of s's JetStream API requests.
func (s *Store) apiPrefix() string {
	o := s.js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".")
	case o.Domain != "":
		return "$JS." + o.Domain + ".API"
	}
	return "$JS.API"
}

// PutManifest stores a manifest of job id.
func (s *Store) PutManifest(ctx context.Context, id string, m *Manifest) error {
	if _, err := s.kv.Put(ctx, ManifestKey(id, m.Chunk), m.Encode()); err != nil {
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
	e, err := s.kv.Get(ctx, key)
	switch {
	case err == nil:
		m, err := DecodeManifest(chunk, e.Value())
		if err != nil || m.Has(index) {
			return m, err
		}
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return Manifest{}, fmt.Errorf("job %s: read manifest %d: %w", id, chunk, err)
	}
	var value []byte
	if s.replicated(ctx) {
		// A replica's, that may be behind: the leader's, then.
		value, _, err = s.leaderGet(ctx, key)
	} else if err == nil {
		value = e.Value() // the leader's own: it does not list the batch
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) && chunk == 0 {
		// A small job's manifest is in its record (Record.Manifest).
		if r, _, rerr := s.Get(ctx, id); rerr == nil && len(r.Manifest) > 0 {
			value, err = r.Manifest, nil
		}
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
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
// owner's), newest first, at most limit of them. It reads them with one
// watch of the bucket (the records' last values, in one consumer),
// however many there are, not a request each. A record that does not
// decode (ErrBadRecord: written by hand, by another version, or broken)
// is skipped and passed to bad (if not nil): it never fails the listing.
func (s *Store) List(ctx context.Context, owner string, limit int, bad func(id string, err error)) ([]Record, error) {
	filter := cmp.Or(owner, "*") + ".*" // records only: manifests' keys have four tokens
	w, err := s.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []Record
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return nil, fmt.Errorf("list jobs: %w", ctx.Err())
		}
		if e == nil {
			break // the current values are all read
		}
		if !ValidID(e.Key()) {
			continue
		}
		r, err := DecodeRecord(e.Value())
		if err == nil && r.ID != e.Key() {
			err = fmt.Errorf("record of %s under the key of %s", r.ID, e.Key())
		}
		if err != nil {
			if bad != nil {
				bad(e.Key(), fmt.Errorf("job %s: %w: %w", e.Key(), ErrBadRecord, err))
			}
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return CompareIDs(b.ID, a.ID) })
	return out[:min(limit, len(out))], nil
}

// DeleteKeys removes a job's record and the manifests of its batches
// key by key (kv.Purge of each): what its owner may do, whose right is
// to its own keys, not to purge the bucket's stream (Delete).
func (s *Store) DeleteKeys(ctx context.Context, id string, batches int64) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: %q is not a job id", ErrNotFound, id)
	}
	for chunk := uint64(0); batches > 0 && chunk <= ManifestChunk(uint64(batches-1)); chunk++ {
		if err := s.kv.Purge(ctx, ManifestKey(id, chunk)); err != nil {
			return fmt.Errorf("job %s: remove manifest %d: %w", id, chunk, err)
		}
	}
	if err := s.kv.Purge(ctx, id); err != nil {
		return fmt.Errorf("job %s: remove record: %w", id, err)
	}
	return nil
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
