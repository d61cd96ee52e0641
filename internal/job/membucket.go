package job

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MemBucket is a Bucket in memory: the seam's stand-in for the JetStream
// key-value bucket, so that tests run the job logic (Store.Apply's
// compare-and-set, the producer's and the workers' transitions) without
// servers. It keeps the bucket's contract (see Bucket) as KVBucket does:
// one sequence of revisions for every key, ErrConflict on an Update at a
// revision not the key's last, ErrExists on a Create of a key with a
// value, ErrNotFound on a read of a key without one, and a Purge's marker
// that moves the key's revision on. It is never replicated. The zero
// value is an empty bucket; it is safe for concurrent use.
type MemBucket struct {
	mu      sync.Mutex
	seq     uint64
	keys    map[string]memEntry
	watches map[*memWatch]struct{}
}

// memEntry is a key's last write: its value, or the marker of a purge.
type memEntry struct {
	value  []byte
	rev    uint64
	purged bool
}

// NewMemBucket returns an empty MemBucket.
func NewMemBucket() *MemBucket { return &MemBucket{} }

// NewMemStore returns a Store on a new MemBucket.
func NewMemStore() *Store { return NewStoreOn(NewMemBucket()) }

// Get is Bucket.Get.
func (b *MemBucket) Get(ctx context.Context, key string) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.keys[key]
	if !ok || e.purged {
		return Entry{}, fmt.Errorf("%w: key %s", ErrNotFound, key)
	}
	return Entry{Key: key, Value: slices.Clone(e.value), Revision: e.rev}, nil
}

// Latest is Bucket.Latest: Get, as a bucket in memory has no replicas.
func (b *MemBucket) Latest(ctx context.Context, key string) (Entry, error) { return b.Get(ctx, key) }

// Create is Bucket.Create.
func (b *MemBucket) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return b.write(ctx, key, value, func(e memEntry, ok bool) error {
		if ok && !e.purged {
			return fmt.Errorf("%w: key %s", ErrExists, key)
		}
		return nil
	})
}

// Update is Bucket.Update.
func (b *MemBucket) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	return b.write(ctx, key, value, func(e memEntry, _ bool) error {
		if e.rev != rev {
			return fmt.Errorf("%w: key %s is at revision %d, not %d", ErrConflict, key, e.rev, rev)
		}
		return nil
	})
}

// Put is Bucket.Put.
func (b *MemBucket) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return b.write(ctx, key, value, func(memEntry, bool) error { return nil })
}

// write stores value under key, at the next revision, if ok (given the
// key's last write and whether it has one) lets it.
func (b *MemBucket) write(ctx context.Context, key string, value []byte, ok func(memEntry, bool) error) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !validKey(key) {
		return 0, fmt.Errorf("invalid key %q", key)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, has := b.keys[key]
	if err := ok(e, has); err != nil {
		return 0, err
	}
	b.seq++
	if b.keys == nil {
		b.keys = map[string]memEntry{}
	}
	b.keys[key] = memEntry{value: slices.Clone(value), rev: b.seq}
	b.notifyLocked(Entry{Key: key, Value: slices.Clone(value), Revision: b.seq})
	return b.seq, nil
}

// Purge is Bucket.Purge: the key's marker takes the next revision.
func (b *MemBucket) Purge(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validKey(key) {
		return fmt.Errorf("invalid key %q", key)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	if b.keys == nil {
		b.keys = map[string]memEntry{}
	}
	b.keys[key] = memEntry{rev: b.seq, purged: true}
	b.notifyLocked(Entry{Key: key, Revision: b.seq, Deleted: true})
	return nil
}

// RemoveTree is Bucket.RemoveTree: the keys go without a marker, as a
// purge of a JetStream bucket's stream leaves none.
func (b *MemBucket) RemoveTree(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.keys {
		if k == key || strings.HasPrefix(k, key+".") {
			delete(b.keys, k)
		}
	}
	return nil
}

// Values is Bucket.Values.
func (b *MemBucket) Values(ctx context.Context, filter string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Entry
	for k, e := range b.keys {
		if !e.purged && matchKey(filter, k) {
			out = append(out, Entry{Key: k, Value: slices.Clone(e.value), Revision: e.rev})
		}
	}
	return out, nil
}

// Watch is Bucket.Watch.
func (b *MemBucket) Watch(ctx context.Context, filter string) (<-chan Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &memWatch{filter: filter, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	for k, e := range b.keys {
		if !e.purged && matchKey(filter, k) {
			w.queue = append(w.queue, Entry{Key: k, Value: slices.Clone(e.value), Revision: e.rev})
		}
	}
	slices.SortFunc(w.queue, func(x, y Entry) int { return cmp.Compare(x.Revision, y.Revision) })
	w.queue = append(w.queue, Entry{})
	if b.watches == nil {
		b.watches = map[*memWatch]struct{}{}
	}
	b.watches[w] = struct{}{}
	b.mu.Unlock()
	out := make(chan Entry)
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.watches, w)
			b.mu.Unlock()
		}()
		for {
			w.mu.Lock()
			q := w.queue
			w.queue = nil
			w.mu.Unlock()
			for _, e := range q {
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// memWatch is a watch of a MemBucket: the changes not yet sent, and a
// token when there are.
type memWatch struct {
	filter string
	mu     sync.Mutex
	queue  []Entry
	wake   chan struct{}
}

// notifyLocked queues e for the watches of its key; b.mu is held.
func (b *MemBucket) notifyLocked(e Entry) {
	for w := range b.watches {
		if !matchKey(w.filter, e.Key) {
			continue
		}
		e.Value = slices.Clone(e.Value) // each its own
		w.mu.Lock()
		w.queue = append(w.queue, e)
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Replicated is Bucket.Replicated: never.
func (b *MemBucket) Replicated(context.Context) bool { return false }

// validKey reports whether key is a key JetStream takes: tokens of
// letters, digits and -_=/ separated by single dots.
func validKey(key string) bool {
	if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
		return false
	}
	for _, c := range []byte(key) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '=', c == '/', c == '.':
		default:
			return false
		}
	}
	return true
}

// matchKey reports whether filter matches key as a NATS subject filter
// matches a subject: "*" is one token, a last ">" one or more.
func matchKey(filter, key string) bool {
	f, k := strings.Split(filter, "."), strings.Split(key, ".")
	for i, t := range f {
		if t == ">" && i == len(f)-1 {
			return len(k) > i
		}
		if i >= len(k) || t != "*" && t != k[i] {
			return false
		}
	}
	return len(f) == len(k)
}
