package job_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestStoreReadsTheLeader checks the reads of the jobs bucket that do not
// trust a replica's "not found": the leader's read (STREAM.MSG.GET) gives
// what a direct get gives, and a key never stored, removed, or deleted is
// not found by either; ManifestOf finds a listed batch and refuses one
// that no manifest lists. On both servers: the JSON of the older one's
// API differs in places.
func TestStoreReadsTheLeader(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			q := testenv.NewQueue(t, server, queue.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := job.NewStore(q.JS, q.Jobs)

			rec := job.Record{V: 1, ID: job.NewID("alice"), State: job.Publishing, Created: time.Now().UTC()}
			rev, err := s.Create(ctx, &rec)
			if err != nil {
				t.Fatal(err)
			}
			value, lrev, err := s.LeaderGet(ctx, rec.ID)
			if err != nil || lrev != rev || !bytes.Equal(value, rec.Encode()) {
				t.Fatalf("LeaderGet = %q, %d, %v; want %q, %d", value, lrev, err, rec.Encode(), rev)
			}
			if got, grev, err := s.Get(ctx, rec.ID); err != nil || grev != rev || got.ID != rec.ID {
				t.Fatalf("Get = %+v, %d, %v", got, grev, err)
			}

			m := job.Manifest{Chunk: 0, Digests: []job.Digest{{1}, {2}}}
			if err := s.PutManifest(ctx, rec.ID, &m); err != nil {
				t.Fatal(err)
			}
			if got, err := s.ManifestOf(ctx, rec.ID, 1); err != nil || !got.Has(1) {
				t.Errorf("ManifestOf(batch 1) = %+v, %v", got, err)
			}
			for _, index := range []uint64{2, job.ManifestSpan} { // not listed; no manifest
				if got, err := s.ManifestOf(ctx, rec.ID, index); !errors.Is(err, job.ErrNotFound) {
					t.Errorf("ManifestOf(batch %d) = %+v, %v; want ErrNotFound", index, got, err)
				}
			}

			deleted := job.NewID("alice")
			if _, err := q.Jobs.Put(ctx, deleted, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			if err := q.Jobs.Delete(ctx, deleted); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{rec.ID, job.ManifestKey(rec.ID, 0), deleted, job.NewID("alice")} {
				if value, _, err := s.LeaderGet(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
					t.Errorf("LeaderGet(%s) = %q, %v; want ErrKeyNotFound", key, value, err)
				}
			}
			if _, _, err := s.Get(ctx, rec.ID); !errors.Is(err, job.ErrNotFound) {
				t.Errorf("Get of a removed job: %v; want ErrNotFound", err)
			}
		})
	}
}

// TestOneServerNeedsNoConfirmation checks that a bucket on a single
// server is not taken for a replicated one: there ApplyConfirmed is Apply
// alone (the 2.9 cluster's lost updates it guards against cannot happen),
// and its change is made.
func TestOneServerNeedsNoConfirmation(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			q := testenv.NewQueue(t, server, queue.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := job.NewStore(q.JS, q.Jobs)
			if s.Replicated(ctx) {
				t.Fatal("a bucket on one server taken for a replicated one")
			}
			rec := job.Record{V: 1, ID: job.NewID("alice"), State: job.Publishing, Created: time.Now().UTC(), Tally: job.Tally{Batches: 1}}
			if _, err := s.Create(ctx, &rec); err != nil {
				t.Fatal(err)
			}
			got, err := s.ApplyConfirmed(ctx, rec.ID, func(r *job.Record) error {
				if !r.Cancel(time.Now()) {
					return job.ErrUnchanged
				}
				return nil
			}, func(r *job.Record) bool { return r.State == job.Cancelled })
			if err != nil || got.State != job.Cancelled {
				t.Fatalf("ApplyConfirmed = %s, %v", got.State, err)
			}
			if back, _, err := s.Get(ctx, rec.ID); err != nil || back.State != job.Cancelled {
				t.Fatalf("record after ApplyConfirmed: %s, %v", back.State, err)
			}
		})
	}
}

// TestListSkipsRecordsThatDoNotDecode stores a value that is not a record
// under a job id (issue 22, finding 3: 'job list' exited 1 and GET
// /v1/jobs answered 503): the listing skips it, saying so once, and lists
// the others.
func TestListSkipsRecordsThatDoNotDecode(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			q := testenv.NewQueue(t, server, queue.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := job.NewStore(q.JS, q.Jobs)
			good := job.Record{V: 1, ID: job.NewID("alice"), State: job.Publishing, Created: time.Now().UTC()}
			if _, err := s.Create(ctx, &good); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // ids sort by the millisecond
			bobs := job.Record{V: 1, ID: job.NewID("bob"), State: job.Publishing, Created: time.Now().UTC()}
			if _, err := s.Create(ctx, &bobs); err != nil {
				t.Fatal(err)
			}
			broken := "alice.vvvvvvvvvvvvvvvvvvvvvvvvvv" // a valid id, newer than any
			if _, err := q.Jobs.Put(ctx, broken, []byte("not a record")); err != nil {
				t.Fatal(err)
			}
			// Every owner's, newest first.
			all, err := s.List(ctx, "", 10, nil)
			if err != nil || len(all) != 2 || all[0].ID != bobs.ID || all[1].ID != good.ID {
				t.Errorf("List of every owner's = %+v, %v; want bob's then alice's", all, err)
			}
			var bad []string
			recs, err := s.List(ctx, "alice", 10, func(id string, err error) {
				bad = append(bad, id)
				if !errors.Is(err, job.ErrBadRecord) {
					t.Errorf("bad record error %v, want ErrBadRecord", err)
				}
			})
			if err != nil || len(recs) != 1 || recs[0].ID != good.ID {
				t.Errorf("List of alice's = %+v, %v; want her good record alone", recs, err)
			}
			if len(bad) != 1 || bad[0] != broken {
				t.Errorf("skipped %q, want %q", bad, broken)
			}
		})
	}
}
