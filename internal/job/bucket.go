package job

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is what a Store needs of the key-value bucket that holds the job
// records and manifests: the storage seam of the job logic. KVBucket is
// the JetStream key-value bucket of a deployment; MemBucket keeps it in
// memory, for tests that run the job logic without servers. Both honour
// the same contract (bucket_test.go runs one suite on each):
//
//   - a key's revision is the bucket's sequence of its last write: it
//     grows with every write to any key, so the revision of one key is
//     never another's;
//   - Create fails with ErrExists when the key has a value (a key deleted
//     by Purge may be created again);
//   - Update writes only when the key is at revision rev (0: the key never
//     had a value), else fails with ErrConflict: the compare-and-set that
//     Store.Apply's loop relies on;
//   - a read of a key without a value fails with ErrNotFound;
//   - Purge removes a key's value (its revision moves on: an Update at
//     the revision read before fails); RemoveTree removes a key and every
//     key under it at once.
//
// Keys are tokens separated by dots (a job id, "owner.serial"; a
// manifest's, "owner.serial.m.chunk"); a filter matches them as NATS
// subjects do ("*" one token, ">" the rest).
type Bucket interface {
	// Get returns key's value and revision. A replica of a replicated
	// bucket may answer, and may be behind its leader: a miss is
	// confirmed before it is returned.
	Get(ctx context.Context, key string) (Entry, error)
	// Latest returns key's value as the bucket's leader has it: newer
	// than Get's when a replica is behind (a manifest grown since).
	Latest(ctx context.Context, key string) (Entry, error)
	// Create stores the first value of key, and returns its revision.
	Create(ctx context.Context, key string, value []byte) (uint64, error)
	// Update stores value if key is at revision rev, and returns the new
	// revision.
	Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error)
	// Put stores value whatever key's revision, and returns the new one.
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	// Purge removes key's value and history.
	Purge(ctx context.Context, key string) error
	// RemoveTree removes key and every key under it (key.>) at once: in
	// JetStream, a purge of the bucket's stream (an admin's right).
	RemoveTree(ctx context.Context, key string) error
	// Values returns the last value of every key filter matches that has
	// one, in no particular order.
	Values(ctx context.Context, filter string) ([]Entry, error)
	// Replicated reports whether a change may be lost on the way (a
	// cluster's bucket: see Store.ApplyConfirmed).
	Replicated(ctx context.Context) bool
	// Watch follows the keys filter matches until ctx is done: it sends
	// the last value of each key that has one, in the order of their
	// revisions, then the zero Entry (the values there were are all
	// sent), then every change as it is made, in order: a Purge as an
	// Entry with Deleted set. RemoveTree is no change a watch sees (a
	// purge of a stream sends none). The channel is closed when the
	// watch stops: ctx done, or the watch lost.
	Watch(ctx context.Context, filter string) (<-chan Entry, error)
}

// Entry is a key's value in a Bucket at its revision. Deleted is set on
// a watch's Entry of a key purged.
type Entry struct {
	Key      string
	Value    []byte
	Revision uint64
	Deleted  bool
}

// ErrExists is matched by the error of Create when the key has a value.
var ErrExists = errors.New("key exists")

// KVBucket is a Bucket on a JetStream key-value bucket (queue.Queue.Jobs).
// Its errors match both this package's (ErrNotFound, ErrConflict,
// ErrExists) and jetstream's.
type KVBucket struct {
	js jetstream.JetStream
	kv jetstream.KeyValue
}

// NewKVBucket returns the Bucket of kv, reached through js.
func NewKVBucket(js jetstream.JetStream, kv jetstream.KeyValue) *KVBucket {
	return &KVBucket{js: js, kv: kv}
}

// kvErr adds this package's error that err's jetstream error stands for.
func kvErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %w", ErrExists, err)
	}
	return err
}

// Get is Bucket.Get: a direct get, which any replica answers, and a miss
// on a replicated bucket asked again of the leader (or read again, by a
// user who may not ask it).
func (b *KVBucket) Get(ctx context.Context, key string) (Entry, error) {
	value, rev, err := b.get(ctx, key)
	if err != nil {
		return Entry{}, kvErr(err)
	}
	return Entry{Key: key, Value: value, Revision: rev}, nil
}

// Latest is Bucket.Latest: STREAM.MSG.GET, which the leader answers, on a
// replicated bucket; a direct get on a single server's.
func (b *KVBucket) Latest(ctx context.Context, key string) (Entry, error) {
	if !b.Replicated(ctx) {
		e, err := b.kv.Get(ctx, key)
		if err != nil {
			return Entry{}, kvErr(err)
		}
		return Entry{Key: key, Value: e.Value(), Revision: e.Revision()}, nil
	}
	value, rev, err := b.leaderGet(ctx, key)
	if err != nil {
		return Entry{}, kvErr(err)
	}
	return Entry{Key: key, Value: value, Revision: rev}, nil
}

// Create is Bucket.Create.
func (b *KVBucket) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := b.kv.Create(ctx, key, value)
	return rev, kvErr(err)
}

// Update is Bucket.Update.
func (b *KVBucket) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	n, err := b.kv.Update(ctx, key, value, rev)
	return n, kvErr(err)
}

// Put is Bucket.Put.
func (b *KVBucket) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := b.kv.Put(ctx, key, value)
	return rev, kvErr(err)
}

// Purge is Bucket.Purge: kv.Purge, what a key's owner may do.
func (b *KVBucket) Purge(ctx context.Context, key string) error {
	return kvErr(b.kv.Purge(ctx, key))
}

// RemoveTree is Bucket.RemoveTree: a purge of the bucket's stream, of the
// keys under key, then of key.
func (b *KVBucket) RemoveTree(ctx context.Context, key string) error {
	st, err := b.js.Stream(ctx, "KV_"+b.kv.Bucket())
	if err != nil {
		return err
	}
	prefix := "$KV." + b.kv.Bucket() + "." + key
	for _, subj := range []string{prefix + ".>", prefix} {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return err
		}
	}
	return nil
}

// Values is Bucket.Values: one watch of the bucket (the keys' last
// values, in one consumer), however many there are, not a request each.
func (b *KVBucket) Values(ctx context.Context, filter string) ([]Entry, error) {
	w, err := b.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []Entry
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e == nil {
			return out, nil // the current values are all read
		}
		out = append(out, Entry{Key: e.Key(), Value: e.Value(), Revision: e.Revision()})
	}
}

// Watch is Bucket.Watch: a watch of the bucket (jetstream's
// KeyValue.Watch), its entries passed on.
func (b *KVBucket) Watch(ctx context.Context, filter string) (<-chan Entry, error) {
	w, err := b.kv.Watch(ctx, filter)
	if err != nil {
		return nil, err
	}
	out := make(chan Entry)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for {
			var e Entry
			select {
			case <-ctx.Done():
				return
			case kve, ok := <-w.Updates():
				if !ok {
					return
				}
				if kve != nil {
					e = Entry{Key: kve.Key(), Value: kve.Value(), Revision: kve.Revision(),
						Deleted: kve.Operation() != jetstream.KeyValuePut}
				}
			}
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// replicatedBuckets caches KVBucket.Replicated by bucket name (a bucket's
// replicas change only by an operator's 'sudoku setup --apply').
var replicatedBuckets sync.Map

// Replicated is Bucket.Replicated: whether the bucket has more than one
// replica, or is on a cluster at all (where even one replica's updates
// may go through the cluster's consensus); when it cannot tell, it says
// so, to be safe.
func (b *KVBucket) Replicated(ctx context.Context) bool {
	name := b.kv.Bucket()
	if v, ok := replicatedBuckets.Load(name); ok {
		return v.(bool)
	}
	st, err := b.kv.Status(ctx)
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

// get returns the value and revision of key; jetstream.ErrKeyNotFound
// only when the bucket's leader has no such key. The bucket allows direct
// gets, which any replica answers (kv.Get), and a replica behind its
// leader (after a server of the cluster was lost, say) answers "not
// found" for a key the leader has: a miss is asked again of the leader,
// with STREAM.MSG.GET, before it is believed.
func (b *KVBucket) get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := b.kv.Get(ctx, key)
	if err == nil {
		return e.Value(), e.Revision(), nil
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) || !b.Replicated(ctx) {
		// A single server has no replica behind: a miss is one. (And a
		// producer may not read by STREAM.MSG.GET, which names no key.)
		return nil, 0, err
	}
	if f := ReadsBySequence; f != nil && !f(b.js.Conn().Opts.User) {
		// Asking the leader would be refused (and a refusal stops a
		// command): give the replica that answered time to catch up.
		return b.getAgain(ctx, key, err)
	}
	return b.leaderGet(ctx, key)
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
func (b *KVBucket) getAgain(ctx context.Context, key string, err error) ([]byte, uint64, error) {
	for range getAgainTries {
		select {
		case <-ctx.Done():
			return nil, 0, err
		case <-time.After(getAgainPause):
		}
		e, gerr := b.kv.Get(ctx, key)
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
func (b *KVBucket) leaderGet(ctx context.Context, key string) ([]byte, uint64, error) {
	bucket := b.kv.Bucket()
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
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(b.js.Options().DefaultTimeout, 5*time.Second))
		defer cancel()
	}
	reply, err := b.js.Conn().RequestWithContext(ctx, b.apiPrefix()+".STREAM.MSG.GET.KV_"+bucket, req)
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

// apiPrefix is the subject prefix of b's JetStream API requests.
func (b *KVBucket) apiPrefix() string {
	o := b.js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".")
	case o.Domain != "":
		return "$JS." + o.Domain + ".API"
	}
	return "$JS.API"
}
