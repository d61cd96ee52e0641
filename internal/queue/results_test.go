package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// resultStores are the implementations of queue.ResultStore the
// contract suite runs on, each with the options of its queue: the one in
// memory, and the results stream on each test server (a queue of its
// own, removed when the test ends).
var resultStores = []struct {
	name string
	new  func(t *testing.T) (queue.ResultStore, queue.Options)
}{
	{"memory", func(*testing.T) (queue.ResultStore, queue.Options) {
		q := queue.InMemory(queue.Options{Prefix: "mem"})
		return q.ResultStore(), q.Opts
	}},
	{"js-embedded", func(t *testing.T) (queue.ResultStore, queue.Options) {
		q := testenv.NewQueue(t, "embedded", queue.Options{})
		return q.ResultStore(), q.Opts
	}},
	{"js-shared", func(t *testing.T) (queue.ResultStore, queue.Options) {
		q := testenv.NewQueue(t, "shared", queue.Options{})
		return q.ResultStore(), q.Opts
	}},
}

// resultsMsg is the message of batch index's results of job id, with
// body and a counts header.
func resultsMsg(o queue.Options, id string, index uint64, body string) *nats.Msg {
	m := nats.NewMsg(o.ResultSubject(id, index))
	m.Data = []byte(body)
	m.Header.Set(queue.HdrCounts, "unique="+fmt.Sprint(index))
	return m
}

// resultsContract is the contract of queue.ResultStore (see its doc).
var resultsContract = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, rs queue.ResultStore, o queue.Options)
}{
	{"the first results stay", func(t *testing.T, ctx context.Context, rs queue.ResultStore, o queue.Options) {
		seq, err := rs.Publish(ctx, resultsMsg(o, "alice.a", 0, "first"))
		if err != nil || seq == 0 {
			t.Fatalf("Publish = %d, %v", seq, err)
		}
		if _, err := rs.Publish(ctx, resultsMsg(o, "alice.a", 0, "second")); !errors.Is(err, queue.ErrResultsExist) {
			t.Fatalf("Publish on a subject with results: %v; want ErrResultsExist", err)
		}
		m, err := rs.Last(ctx, o.ResultSubject("alice.a", 0))
		if err != nil || string(m.Data) != "first" || m.Sequence != seq || m.Header.Get(queue.HdrCounts) != "unique=0" ||
			m.Subject != o.ResultSubject("alice.a", 0) {
			t.Fatalf("Last = %+v, %v; want the first at %d", m, err, seq)
		}
		next, err := rs.Publish(ctx, resultsMsg(o, "alice.a", 1, "other"))
		if err != nil || next <= seq {
			t.Fatalf("Publish of another batch = %d, %v; want a sequence after %d", next, err, seq)
		}
	}},
	{"no results", func(t *testing.T, ctx context.Context, rs queue.ResultStore, o queue.Options) {
		if m, err := rs.Last(ctx, o.ResultSubject("alice.none", 0)); !errors.Is(err, queue.ErrNoResults) {
			t.Fatalf("Last = %+v, %v; want ErrNoResults", m, err)
		}
	}},
	{"delete, then publish again", func(t *testing.T, ctx context.Context, rs queue.ResultStore, o queue.Options) {
		seq, err := rs.Publish(ctx, resultsMsg(o, "alice.a", 0, "forged"))
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Delete(ctx, seq); err != nil {
			t.Fatal(err)
		}
		if err := rs.Delete(ctx, seq); !errors.Is(err, queue.ErrNoResults) {
			t.Fatalf("Delete of a message deleted: %v; want ErrNoResults", err)
		}
		if _, err := rs.Last(ctx, o.ResultSubject("alice.a", 0)); !errors.Is(err, queue.ErrNoResults) {
			t.Fatalf("Last after Delete: %v; want ErrNoResults", err)
		}
		again, err := rs.Publish(ctx, resultsMsg(o, "alice.a", 0, "right"))
		if err != nil || again <= seq {
			t.Fatalf("Publish after Delete = %d, %v", again, err)
		}
		if m, err := rs.Last(ctx, o.ResultSubject("alice.a", 0)); err != nil || string(m.Data) != "right" {
			t.Fatalf("Last = %+v, %v; want right", m, err)
		}
	}},
	{"read a job's results in order", func(t *testing.T, ctx context.Context, rs queue.ResultStore, o queue.Options) {
		var seqs []uint64
		for i, index := range []uint64{2, 0, 1} {
			seq, err := rs.Publish(ctx, resultsMsg(o, "alice.a", index, fmt.Sprint("a", index)))
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, seq)
			if _, err := rs.Publish(ctx, resultsMsg(o, "bob.b", uint64(i), "b")); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			from        uint64
			headersOnly bool
			want        []string
		}{
			{0, false, []string{"a2", "a0", "a1"}},
			{seqs[1], false, []string{"a0", "a1"}},
			{seqs[2] + 1, false, nil},
			{0, true, []string{"unique=2", "unique=0", "unique=1"}},
		} {
			var got []string
			var last uint64
			err := rs.Read(ctx, o.ResultsFilter("alice.a"), tc.from, tc.headersOnly, func(m queue.StoredResults) error {
				if m.Sequence <= last {
					t.Errorf("sequence %d after %d", m.Sequence, last)
				}
				last = m.Sequence
				if tc.headersOnly {
					got = append(got, m.Header.Get(queue.HdrCounts))
				} else {
					got = append(got, string(m.Data))
				}
				return nil
			})
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("Read from %d (headers only: %v) = %q, %v; want %q", tc.from, tc.headersOnly, got, err, tc.want)
			}
		}
		stop := errors.New("stop")
		n := 0
		err := rs.Read(ctx, o.ResultsFilter("alice.a"), 0, false, func(queue.StoredResults) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("Read stopped by fn: %v after %d; want stop after 1", err, n)
		}
	}},
	{"purge a job's results", func(t *testing.T, ctx context.Context, rs queue.ResultStore, o queue.Options) {
		for _, id := range []string{"alice.a", "alice.ab", "bob.b"} {
			for index := range uint64(2) {
				if _, err := rs.Publish(ctx, resultsMsg(o, id, index, id)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := rs.Purge(ctx, o.ResultsFilter("alice.a")); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			id   string
			left bool
		}{{"alice.a", false}, {"alice.ab", true}, {"bob.b", true}} {
			for index := range uint64(2) {
				_, err := rs.Last(ctx, o.ResultSubject(tc.id, index))
				if left := err == nil; left != tc.left {
					t.Errorf("results %d of %s after the purge of alice.a's: %v; want left: %v", index, tc.id, err, tc.left)
				}
			}
		}
		if _, err := rs.Publish(ctx, resultsMsg(o, "alice.a", 0, "again")); err != nil {
			t.Errorf("Publish after the purge: %v", err)
		}
	}},
}

// TestResultStoreContract runs the contract of queue.ResultStore on
// every implementation.
func TestResultStoreContract(t *testing.T) {
	for _, impl := range resultStores {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range resultsContract {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					rs, o := impl.new(t)
					tc.run(t, ctx, rs, o)
				})
			}
		})
	}
}
