package job_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// buckets are the implementations of job.Bucket the contract suite runs
// on: the one in memory, and JetStream's key-value bucket on each test
// server (a bucket of its own, removed when the test ends).
var buckets = []struct {
	name string
	new  func(t *testing.T) job.Bucket
}{
	{"memory", func(*testing.T) job.Bucket { return job.NewMemBucket() }},
	{"kv-embedded", func(t *testing.T) job.Bucket {
		q := testenv.NewQueue(t, "embedded", queue.Options{})
		return job.NewKVBucket(q.JS, q.Jobs)
	}},
	{"kv-shared", func(t *testing.T) job.Bucket {
		q := testenv.NewQueue(t, "shared", queue.Options{})
		return job.NewKVBucket(q.JS, q.Jobs)
	}},
}

// bucketContract is the contract of job.Bucket (see its doc), case by
// case: each runs on a new, empty bucket of every implementation, so that
// MemBucket is shown to behave as the JetStream bucket does.
var bucketContract = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, b job.Bucket)
}{
	{"create then get", func(t *testing.T, ctx context.Context, b job.Bucket) {
		rev, err := b.Create(ctx, "alice.a", []byte("one"))
		if err != nil || rev == 0 {
			t.Fatalf("Create = %d, %v", rev, err)
		}
		e, err := b.Get(ctx, "alice.a")
		if err != nil || e.Key != "alice.a" || string(e.Value) != "one" || e.Revision != rev {
			t.Fatalf("Get = %+v, %v; want one at %d", e, err, rev)
		}
		if e, err := b.Latest(ctx, "alice.a"); err != nil || string(e.Value) != "one" || e.Revision != rev {
			t.Fatalf("Latest = %+v, %v; want one at %d", e, err, rev)
		}
		if _, err := b.Create(ctx, "alice.a", []byte("two")); !errors.Is(err, job.ErrExists) {
			t.Fatalf("Create of a key with a value: %v; want ErrExists", err)
		}
		if e, _ := b.Get(ctx, "alice.a"); string(e.Value) != "one" {
			t.Fatalf("a refused Create changed the value to %q", e.Value)
		}
	}},
	{"a key never written is not found", func(t *testing.T, ctx context.Context, b job.Bucket) {
		if e, err := b.Get(ctx, "alice.none"); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("Get = %+v, %v; want ErrNotFound", e, err)
		}
		if e, err := b.Latest(ctx, "alice.none"); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("Latest = %+v, %v; want ErrNotFound", e, err)
		}
		if _, err := b.Update(ctx, "alice.none", []byte("x"), 1); !errors.Is(err, job.ErrConflict) {
			t.Fatalf("Update at revision 1: %v; want ErrConflict", err)
		}
		if rev, err := b.Update(ctx, "alice.none", []byte("x"), 0); err != nil || rev == 0 {
			t.Fatalf("Update at revision 0 of a new key = %d, %v; want stored", rev, err)
		}
	}},
	{"update compares and sets the revision", func(t *testing.T, ctx context.Context, b job.Bucket) {
		r1, err := b.Create(ctx, "alice.a", []byte("one"))
		if err != nil {
			t.Fatal(err)
		}
		r2, err := b.Update(ctx, "alice.a", []byte("two"), r1)
		if err != nil || r2 <= r1 {
			t.Fatalf("Update at the last revision = %d, %v; want a revision after %d", r2, err, r1)
		}
		for _, rev := range []uint64{0, r1, r2 + 1} {
			if _, err := b.Update(ctx, "alice.a", []byte("stale"), rev); !errors.Is(err, job.ErrConflict) {
				t.Errorf("Update at revision %d (last %d): %v; want ErrConflict", rev, r2, err)
			}
		}
		if e, err := b.Get(ctx, "alice.a"); err != nil || string(e.Value) != "two" || e.Revision != r2 {
			t.Fatalf("Get = %+v, %v; want two at %d", e, err, r2)
		}
	}},
	{"one sequence of revisions for every key", func(t *testing.T, ctx context.Context, b job.Bucket) {
		ra, err := b.Create(ctx, "alice.a", []byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.Put(ctx, "bob.b", []byte("b"))
		if err != nil || rb <= ra {
			t.Fatalf("Put of another key = %d, %v; want a revision after %d", rb, err, ra)
		}
		// alice.a's revision is still ra; bob.b's is no revision of it.
		if _, err := b.Update(ctx, "alice.a", []byte("x"), rb); !errors.Is(err, job.ErrConflict) {
			t.Fatalf("Update at another key's revision: %v; want ErrConflict", err)
		}
		if _, err := b.Update(ctx, "alice.a", []byte("x"), ra); err != nil {
			t.Fatalf("Update at its own revision: %v", err)
		}
	}},
	{"purge", func(t *testing.T, ctx context.Context, b job.Bucket) {
		rev, err := b.Create(ctx, "alice.a", []byte("one"))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Purge(ctx, "alice.a"); err != nil {
			t.Fatal(err)
		}
		if e, err := b.Get(ctx, "alice.a"); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("Get after Purge = %+v, %v; want ErrNotFound", e, err)
		}
		if e, err := b.Latest(ctx, "alice.a"); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("Latest after Purge = %+v, %v; want ErrNotFound", e, err)
		}
		if _, err := b.Update(ctx, "alice.a", []byte("back"), rev); !errors.Is(err, job.ErrConflict) {
			t.Fatalf("Update at the revision before Purge: %v; want ErrConflict", err)
		}
		// The purge leaves its marker, at a revision of its own: the key
		// is not new again.
		if _, err := b.Update(ctx, "alice.a", []byte("new"), 0); !errors.Is(err, job.ErrConflict) {
			t.Fatalf("Update at revision 0 after Purge: %v; want ErrConflict", err)
		}
		again, err := b.Create(ctx, "alice.a", []byte("again"))
		if err != nil || again <= rev {
			t.Fatalf("Create after Purge = %d, %v", again, err)
		}
		if err := b.Purge(ctx, "alice.never"); err != nil {
			t.Fatalf("Purge of a key never written: %v", err)
		}
	}},
	{"remove a tree of keys", func(t *testing.T, ctx context.Context, b job.Bucket) {
		for _, k := range []string{"alice.a", "alice.a.m.0", "alice.a.m.1", "alice.ab", "alice.b", "alice.b.m.0"} {
			if _, err := b.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.RemoveTree(ctx, "alice.a"); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"alice.a", "alice.a.m.0", "alice.a.m.1"} {
			if e, err := b.Get(ctx, k); !errors.Is(err, job.ErrNotFound) {
				t.Errorf("Get(%s) after RemoveTree = %+v, %v; want ErrNotFound", k, e, err)
			}
		}
		for _, k := range []string{"alice.ab", "alice.b", "alice.b.m.0"} {
			if e, err := b.Get(ctx, k); err != nil || string(e.Value) != k {
				t.Errorf("Get(%s) after RemoveTree of another = %+v, %v", k, e, err)
			}
		}
		if _, err := b.Create(ctx, "alice.a", []byte("new")); err != nil {
			t.Fatalf("Create after RemoveTree: %v", err)
		}
	}},
	{"values of a filter", func(t *testing.T, ctx context.Context, b job.Bucket) {
		for _, k := range []string{"alice.a", "alice.a.m.0", "alice.b", "bob.c", "bob.c.m.3", "bob.gone"} {
			if _, err := b.Put(ctx, k, []byte("v "+k)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Purge(ctx, "bob.gone"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			filter string
			want   []string
		}{
			{"*.*", []string{"alice.a", "alice.b", "bob.c"}},
			{"alice.*", []string{"alice.a", "alice.b"}},
			{"bob.>", []string{"bob.c", "bob.c.m.3"}},
			{"*.*.m.*", []string{"alice.a.m.0", "bob.c.m.3"}},
			{"carol.*", nil},
		} {
			es, err := b.Values(ctx, tc.filter)
			if err != nil {
				t.Fatalf("Values(%s): %v", tc.filter, err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.Key)
				if string(e.Value) != "v "+e.Key || e.Revision == 0 {
					t.Errorf("Values(%s): %+v", tc.filter, e)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Values(%s) = %q, want %q", tc.filter, got, tc.want)
			}
		}
	}},
	{"watch", func(t *testing.T, ctx context.Context, b job.Bucket) {
		put := func(k string) uint64 {
			t.Helper()
			rev, err := b.Put(ctx, k, []byte("v "+k))
			if err != nil {
				t.Fatal(err)
			}
			return rev
		}
		put("alice.a")
		put("alice.a.m.0") // not watched: a manifest's key
		rc := put("bob.c")
		rb := put("alice.b")
		ra := put("alice.a") // alice.a's last value, after the others'
		wctx, stop := context.WithCancel(ctx)
		w, err := b.Watch(wctx, "*.*")
		if err != nil {
			t.Fatal(err)
		}
		next := func() job.Entry {
			t.Helper()
			select {
			case e, ok := <-w:
				if !ok {
					t.Fatal("the watch closed")
				}
				return e
			case <-ctx.Done():
				t.Fatal("no entry from the watch")
			}
			return job.Entry{}
		}
		expect := func(what string, want job.Entry) {
			t.Helper()
			e := next()
			if e.Key != want.Key || e.Revision != want.Revision || e.Deleted != want.Deleted ||
				!want.Deleted && want.Key != "" && string(e.Value) != "v "+want.Key {
				t.Fatalf("%s: watched %+v, want %+v", what, e, want)
			}
		}
		expect("first value", job.Entry{Key: "bob.c", Revision: rc})
		expect("second value", job.Entry{Key: "alice.b", Revision: rb})
		expect("third value", job.Entry{Key: "alice.a", Revision: ra})
		expect("the values read", job.Entry{})
		rd := put("carol.d")
		expect("a new key", job.Entry{Key: "carol.d", Revision: rd})
		put("carol.d.m.0") // not watched
		if err := b.Purge(ctx, "alice.b"); err != nil {
			t.Fatal(err)
		}
		e := next()
		if e.Key != "alice.b" || !e.Deleted || e.Revision <= rd {
			t.Fatalf("purge: watched %+v, want alice.b deleted", e)
		}
		if err := b.RemoveTree(ctx, "bob.c"); err != nil {
			t.Fatal(err)
		}
		ra = put("alice.a")
		expect("a change after a tree removed (unseen)", job.Entry{Key: "alice.a", Revision: ra})
		stop()
		for range w { // closed once stopped
		}
	}},
	{"not replicated", func(t *testing.T, ctx context.Context, b job.Bucket) {
		if b.Replicated(ctx) {
			t.Fatal("a bucket on one server (or in memory) taken for a replicated one")
		}
	}},
}

// TestBucketContract runs the contract of job.Bucket on every
// implementation.
func TestBucketContract(t *testing.T) {
	for _, impl := range buckets {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range bucketContract {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					tc.run(t, ctx, impl.new(t))
				})
			}
		})
	}
}

// storeContract is the job logic of Store over each Bucket: what the
// producer and the workers rely on.
var storeContract = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, s *job.Store)
}{
	{"apply again on a record changed meanwhile", func(t *testing.T, ctx context.Context, s *job.Store) {
		rec := newRecord(t, ctx, s, 2)
		calls := 0
		got, err := s.Apply(ctx, rec.ID, func(r *job.Record) error {
			calls++
			if calls == 1 {
				// Another writer counts batch 1 between our read and
				// our write: our write must not undo it.
				if _, err := s.Apply(ctx, rec.ID, func(r *job.Record) error {
					r.AddResults(1, job.Counts{result.StatusUnique: 10}, time.Now())
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			r.AddResults(0, job.Counts{result.StatusUnique: 10}, time.Now())
			return nil
		})
		if err != nil || calls != 2 {
			t.Fatalf("Apply = %v after %d calls of fn; want 2 calls", err, calls)
		}
		if got.DoneBatches != 2 || got.State != job.Finished {
			t.Fatalf("Apply returned %d batches done, %s; want 2, finished", got.DoneBatches, got.State)
		}
		back, _, err := s.Get(ctx, rec.ID)
		if err != nil || back.DoneBatches != 2 || back.State != job.Finished {
			t.Fatalf("stored: %d batches done, %s, %v; want 2, finished", back.DoneBatches, back.State, err)
		}
	}},
	{"many writers at once lose nothing", func(t *testing.T, ctx context.Context, s *job.Store) {
		const n = 16
		rec := newRecord(t, ctx, s, n)
		var wg sync.WaitGroup
		finished := make(chan uint64, n)
		for i := range uint64(n) {
			wg.Go(func() {
				_, err := s.Apply(ctx, rec.ID, func(r *job.Record) error {
					if !r.AddResults(i, job.Counts{result.StatusUnique: 10}, time.Now()) {
						return job.ErrUnchanged
					}
					if r.State == job.Finished {
						finished <- i
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		close(finished)
		back, _, err := s.Get(ctx, rec.ID)
		if err != nil || back.DoneBatches != n || back.State != job.Finished || back.Counts[result.StatusUnique] != 10*n {
			t.Fatalf("after %d writers: %+v, %v", n, back, err)
		}
	}},
	{"unchanged writes nothing", func(t *testing.T, ctx context.Context, s *job.Store) {
		rec := newRecord(t, ctx, s, 1)
		_, rev, err := s.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, rec.ID, func(*job.Record) error { return job.ErrUnchanged }); err != nil {
			t.Fatal(err)
		}
		stop := errors.New("stop")
		if _, err := s.Apply(ctx, rec.ID, func(r *job.Record) error { r.Cancel(time.Now()); return stop }); !errors.Is(err, stop) {
			t.Fatalf("Apply with fn's error: %v", err)
		}
		if back, now, err := s.Get(ctx, rec.ID); err != nil || now != rev || back.State != job.Published {
			t.Fatalf("record at revision %d (was %d), %s, %v; want unchanged", now, rev, back.State, err)
		}
	}},
	{"a job without a record", func(t *testing.T, ctx context.Context, s *job.Store) {
		id := job.NewID("alice")
		if _, _, err := s.Get(ctx, id); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("Get: %v; want ErrNotFound", err)
		}
		if _, _, err := s.Get(ctx, "not a job id"); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("Get of a bad id: %v; want ErrNotFound", err)
		}
		if _, err := s.Apply(ctx, id, func(*job.Record) error { return nil }); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("Apply: %v; want ErrNotFound", err)
		}
		if _, err := s.ManifestOf(ctx, id, 0); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("ManifestOf: %v; want ErrNotFound", err)
		}
	}},
	{"create once", func(t *testing.T, ctx context.Context, s *job.Store) {
		rec := newRecord(t, ctx, s, 1)
		if _, err := s.Create(ctx, &rec); !errors.Is(err, job.ErrExists) {
			t.Fatalf("Create of a job that has a record: %v; want ErrExists", err)
		}
	}},
	{"manifests", func(t *testing.T, ctx context.Context, s *job.Store) {
		rec := newRecord(t, ctx, s, job.ManifestSpan+1)
		if err := s.PutManifest(ctx, rec.ID, &job.Manifest{Chunk: 0, Digests: []job.Digest{{1}, {2}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutManifest(ctx, rec.ID, &job.Manifest{Chunk: 1, Digests: []job.Digest{{3}}}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			index uint64
			want  job.Digest
		}{{1, job.Digest{2}}, {job.ManifestSpan, job.Digest{3}}} {
			m, err := s.ManifestOf(ctx, rec.ID, tc.index)
			if d, ok := m.Lookup(tc.index); err != nil || !ok || d != tc.want {
				t.Errorf("ManifestOf(%d) = %+v, %v", tc.index, m, err)
			}
		}
		for _, index := range []uint64{2, job.ManifestSpan + 1, 2 * job.ManifestSpan} {
			if m, err := s.ManifestOf(ctx, rec.ID, index); !errors.Is(err, job.ErrNotFound) {
				t.Errorf("ManifestOf(%d) = %+v, %v; want ErrNotFound", index, m, err)
			}
		}
		// A small job's manifest is in its record.
		small := job.NewRecord(job.NewID("alice"), job.Options{}, time.Now())
		small.Manifest = (&job.Manifest{Digests: []job.Digest{{9}}}).Encode()
		if _, err := s.Create(ctx, &small); err != nil {
			t.Fatal(err)
		}
		if m, err := s.ManifestOf(ctx, small.ID, 0); err != nil || m.Digests[0] != (job.Digest{9}) {
			t.Errorf("ManifestOf a small job = %+v, %v", m, err)
		}
	}},
	{"list by owner, newest first", func(t *testing.T, ctx context.Context, s *job.Store) {
		var alices []string
		for i := range 3 {
			rec := job.NewRecord(job.NewID("alice"), job.Options{}, time.Now())
			if _, err := s.Create(ctx, &rec); err != nil {
				t.Fatal(err)
			}
			alices = append(alices, rec.ID)
			bobs := job.NewRecord(job.NewID("bob"), job.Options{}, time.Now())
			if _, err := s.Create(ctx, &bobs); err != nil {
				t.Fatal(err)
			}
			if err := s.PutManifest(ctx, rec.ID, &job.Manifest{Digests: []job.Digest{{byte(i)}}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // ids sort by the millisecond
		}
		slices.Reverse(alices)
		for _, limit := range []int{1, 3, 10} {
			recs, err := s.List(ctx, "alice", limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.ID)
			}
			if want := alices[:min(limit, 3)]; !slices.Equal(got, want) {
				t.Errorf("List(alice, %d) = %q, want %q", limit, got, want)
			}
		}
		if all, err := s.List(ctx, "", 100, nil); err != nil || len(all) != 6 {
			t.Errorf("List of every owner's: %d records, %v; want 6", len(all), err)
		}
	}},
	{"delete keys, as an owner", func(t *testing.T, ctx context.Context, s *job.Store) {
		rec := newRecord(t, ctx, s, job.ManifestSpan+1)
		for chunk := range uint64(2) {
			if err := s.PutManifest(ctx, rec.ID, &job.Manifest{Chunk: chunk, Digests: []job.Digest{{1}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteKeys(ctx, rec.ID, rec.Batches); err != nil {
			t.Fatal(err)
		}
		assertGone(t, ctx, s, rec.ID)
	}},
	{"delete, as an admin", func(t *testing.T, ctx context.Context, s *job.Store) {
		rec := newRecord(t, ctx, s, job.ManifestSpan+1)
		other := newRecord(t, ctx, s, 1)
		for chunk := range uint64(2) {
			if err := s.PutManifest(ctx, rec.ID, &job.Manifest{Chunk: chunk, Digests: []job.Digest{{1}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Delete(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		assertGone(t, ctx, s, rec.ID)
		if _, _, err := s.Get(ctx, other.ID); err != nil {
			t.Fatalf("another job's record after Delete: %v", err)
		}
	}},
}

// newRecord stores the record of a new published job of alice's with
// the given number of batches of 10 lines.
func newRecord(t *testing.T, ctx context.Context, s *job.Store, batches int64) job.Record {
	t.Helper()
	rec := job.NewRecord(job.NewID("alice"), job.Options{}, time.Now())
	rec.Lines, rec.Batches = 10*batches, batches
	rec.Publish(time.Now())
	if _, err := s.Create(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// assertGone fails the test unless job id has neither record nor
// manifests.
func assertGone(t *testing.T, ctx context.Context, s *job.Store, id string) {
	t.Helper()
	if _, _, err := s.Get(ctx, id); !errors.Is(err, job.ErrNotFound) {
		t.Errorf("Get of a deleted job: %v; want ErrNotFound", err)
	}
	for _, index := range []uint64{0, job.ManifestSpan} {
		if m, err := s.ManifestOf(ctx, id, index); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("ManifestOf(%d) of a deleted job = %+v, %v; want ErrNotFound", index, m, err)
		}
	}
}

// TestStoreContract runs the job logic of Store on every implementation
// of job.Bucket.
func TestStoreContract(t *testing.T) {
	for _, impl := range buckets {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range storeContract {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					tc.run(t, ctx, job.NewStoreOn(impl.new(t)))
				})
			}
		})
	}
}

// TestMemBucketCopies checks that MemBucket keeps its own copies: a
// caller that changes a slice it passed or got does not change the
// bucket, as it cannot change a server's.
func TestMemBucketCopies(t *testing.T) {
	ctx := context.Background()
	b := job.NewMemBucket()
	value := []byte("one")
	if _, err := b.Put(ctx, "alice.a", value); err != nil {
		t.Fatal(err)
	}
	value[0] = 'X'
	e, err := b.Get(ctx, "alice.a")
	if err != nil || !bytes.Equal(e.Value, []byte("one")) {
		t.Fatalf("Get = %q, %v after the caller changed its value", e.Value, err)
	}
	e.Value[0] = 'Y'
	if e, _ := b.Get(ctx, "alice.a"); string(e.Value) != "one" {
		t.Fatalf("Get = %q after the caller changed what Get returned", e.Value)
	}
	if _, err := b.Put(ctx, "alice..a", nil); err == nil {
		t.Fatal("an invalid key taken")
	}
}
