package queue_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestSetupLeavesSharedSettingsAlone checks that a client with other
// settings uses the streams and consumer as they are, and that a worker
// (Update) brings them to its own.
func TestSetupLeavesSharedSettingsAlone(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx := context.Background()
			q := testenv.NewQueue(t, server, queue.Options{AckWait: 30 * time.Second, Retention: time.Hour, Update: true})
			o := q.Opts
			check := func(maxAge time.Duration) {
				t.Helper()
				s, err := q.JS.Stream(ctx, o.ResultsStream())
				if err != nil {
					t.Fatal(err)
				}
				if got := s.CachedInfo().Config.MaxAge; got != maxAge {
					t.Errorf("results max age %v, want %v", got, maxAge)
				}
			}
			other := o
			other.AckWait, other.Retention, other.Update = 5*time.Second, time.Minute, false
			oq, err := queue.Setup(ctx, q.JS, other)
			if err != nil {
				t.Fatal(err)
			}
			check(time.Hour)
			plan, err := queue.Plan(ctx, q.JS, other)
			if err != nil {
				t.Fatal(err)
			}
			for _, diffs := range [][]queue.Difference{oq.Differences, plan} {
				var got []string
				for _, d := range diffs {
					if d.Setting == "max_age" {
						got = append(got, d.What+" "+d.Have+" "+d.Want)
					}
				}
				want := []string{"stream " + o.ResultsStream() + " 1h0m0s 1m0s", "bucket " + o.JobsBucket() + " 1h0m0s 1m0s"}
				if !slices.Equal(got, want) {
					t.Errorf("max_age differences %q, want %q (all: %v)", got, want, diffs)
				}
			}
			other.Update = true
			if _, err := queue.Setup(ctx, q.JS, other); err != nil {
				t.Fatal(err)
			}
			check(time.Minute)
			// A client creates what is missing.
			if err := q.JS.DeleteStream(ctx, o.DLQStream); err != nil {
				t.Fatal(err)
			}
			other.Update = false
			if _, err := queue.Setup(ctx, q.JS, other); err != nil {
				t.Fatal(err)
			}
			if _, err := q.JS.Stream(ctx, o.DLQStream); err != nil {
				t.Errorf("the dead-letter stream was not created again: %v", err)
			}
		})
	}
}

// TestSetupDropsTheSharedConsumer checks that a worker's set-up deletes
// the consumer every worker shared before work was divided into lanes
// (its filter overlaps every lane's, which a work-queue stream refuses),
// and that the work it held is then delivered by the lane's consumer.
func TestSetupDropsTheSharedConsumer(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			q := testenv.NewQueue(t, server, queue.Options{})
			o := q.Opts
			durable := o.Consumer + "-bulk"
			if _, err := q.JS.CreateConsumer(ctx, o.Stream, jetstream.ConsumerConfig{
				Durable: durable, FilterSubject: o.WorkFilter(), AckPolicy: jetstream.AckExplicitPolicy,
			}); err != nil {
				t.Fatal(err)
			}
			lane := queue.Lane{Owner: "alice", Priority: job.PriorityNormal, Slot: queue.SlotSmall}
			if _, err := q.JS.Publish(ctx, o.WorkSubject("alice.j1", lane), []byte("old")); err != nil {
				t.Fatal(err)
			}
			if _, err := q.LaneWork(ctx, lane); err == nil {
				t.Fatal("a lane's consumer beside the shared one: want the server to refuse the overlap")
			}
			nq, err := queue.Setup(ctx, q.JS, o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.JS.Consumer(ctx, o.Stream, durable); !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Fatalf("the shared consumer after set-up: %v, want it deleted", err)
			}
			c, err := nq.LaneWork(ctx, lane)
			if err != nil {
				t.Fatal(err)
			}
			batch, err := c.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for m := range batch.Messages() {
				got = append(got, string(m.Data()))
				_ = m.Ack()
			}
			if len(got) != 1 || got[0] != "old" {
				t.Errorf("fetched %q, want the message the shared consumer held", got)
			}
		})
	}
}

// TestSetupUpdatesOnlyWhatDiffers checks that a worker starting with the
// settings the streams already have sends no update (every worker start
// did, and nats-server 2.9.10 once crashed in one), and that one with
// other settings updates what they change.
func TestSetupUpdatesOnlyWhatDiffers(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx := context.Background()
			q := testenv.NewQueue(t, server, queue.Options{Retention: time.Hour, Update: true})
			o := q.Opts
			updates := streamUpdates(t, q.NC)
			if _, err := queue.Setup(ctx, q.JS, o); err != nil { // the same settings
				t.Fatal(err)
			}
			changed := o
			changed.Retention = 2 * time.Hour // the results stream and the bucket
			if _, err := queue.Setup(ctx, q.JS, changed); err != nil {
				t.Fatal(err)
			}
			bucket := "KV_" + o.JobsBucket()
			deadline := time.Now().Add(10 * time.Second)
			got := updates()
			for ; got[o.ResultsStream()] == 0 || got[bucket] == 0; got = updates() {
				if time.Now().After(deadline) {
					t.Fatalf("updates seen: %v; want %s and %s", got, o.ResultsStream(), bucket)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The first Setup's updates, had there been any, came first.
			want := map[string]int{o.ResultsStream(): 1, bucket: 1}
			for _, s := range []string{o.Stream, o.ResultsStream(), o.DLQStream, bucket} {
				if got[s] != want[s] {
					t.Errorf("%d updates of %s, want %d (all: %v)", got[s], s, want[s], got)
				}
			}
		})
	}
}

// TestSetupAtOnceSendsNoUpdate starts several clients on a queue that does
// not exist yet, at once, as `docker compose up` or a test starting a
// worker and a producer together does: each one creates what is missing
// or finds it created, and none sends an update (a create that found the
// stream made one, and nats-server 2.9.10 crashed in it).
func TestSetupAtOnceSendsNoUpdate(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx := context.Background()
			q := testenv.NewQueue(t, server, queue.Options{Retention: time.Hour})
			o := q.Opts
			name := testenv.Name("T")
			o.Stream, o.DLQStream = name, name+"_DLQ"
			o.Prefix, o.Consumer = strings.ToLower(name), strings.ToLower(name)
			updates := streamUpdates(t, q.NC)
			var g errgroup.Group
			var mu sync.Mutex
			var made *queue.Queue
			for i := range 6 {
				oi := o
				oi.Update = i%2 == 0 // workers and other clients
				g.Go(func() error {
					qi, err := queue.Setup(ctx, q.JS, oi)
					mu.Lock()
					defer mu.Unlock()
					made = cmp.Or(made, qi)
					return err
				})
			}
			err := g.Wait()
			if made != nil {
				t.Cleanup(func() { _ = made.Delete(context.Background()) })
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := q.NC.Flush(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond) // advisories in flight
			for s := range updates() {
				if strings.HasPrefix(s, name) || s == "KV_"+o.JobsBucket() {
					t.Errorf("stream %s was updated", s)
				}
			}
		})
	}
}

// streamUpdates records the streams updated from now on, by their update
// advisories; it returns how many updates of each have come so far.
func streamUpdates(t *testing.T, nc *nats.Conn) func() map[string]int {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.UPDATED.>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		got[m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]]++
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(got)
	}
}

func TestCreatedMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"name in use", jetstream.ErrStreamNameAlreadyInUse, true},
		{"bucket exists", jetstream.ErrBucketExists, true},
		{"subjects overlap", fmt.Errorf("create: %w", &jetstream.APIError{Code: 400, ErrorCode: 10065,
			Description: "subjects overlap with an existing stream"}), true},
		{"another API error", &jetstream.APIError{Code: 500, ErrorCode: 10049}, false},
		{"no error", nil, false},
		{"timeout", context.DeadlineExceeded, false},
	} {
		if got := queue.CreatedMeanwhile(tc.err); got != tc.want {
			t.Errorf("%s: createdMeanwhile(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestSetupWithoutConsumer checks that Options.NoConsumer leaves the work
// stream's consumers alone, and that work published before its job's
// consumer exists is delivered once it does.
func TestSetupWithoutConsumer(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			q := testenv.NewQueue(t, server, queue.Options{})
			o := q.Opts
			shared := o.Consumer + "-bulk"
			if _, err := q.JS.CreateConsumer(ctx, o.Stream, jetstream.ConsumerConfig{
				Durable: shared, FilterSubject: o.WorkFilter(), AckPolicy: jetstream.AckExplicitPolicy,
			}); err != nil {
				t.Fatal(err)
			}
			producer := o
			producer.NoConsumer = true
			if _, err := queue.Setup(ctx, q.JS, producer); err != nil {
				t.Fatal(err)
			}
			if _, err := q.JS.Consumer(ctx, o.Stream, shared); err != nil {
				t.Fatalf("after Setup with NoConsumer, the shared consumer: %v; want it left alone", err)
			}
			if err := q.JS.DeleteConsumer(ctx, o.Stream, shared); err != nil {
				t.Fatal(err)
			}
			lane := queue.Lane{Owner: "alice", Priority: job.PriorityHigh, Slot: queue.BigSlot(1)}
			if _, err := q.JS.Publish(ctx, o.WorkSubject("alice.06h3nocons", lane), []byte("early")); err != nil {
				t.Fatal(err)
			}
			c, err := q.LaneWork(ctx, lane)
			if err != nil {
				t.Fatal(err)
			}
			batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				if string(m.Data()) != "early" {
					t.Errorf("delivered %q, want the work published before the consumer", m.Data())
				}
				_ = m.Ack()
			}
			if n != 1 {
				t.Errorf("%d messages delivered, want 1 (%v)", n, batch.Error())
			}
		})
	}
}

// TestResultsCannotBeReplaced publishes a batch's results, then another
// message on the same subject (issue 22, finding 6: a plain publish
// replaced the stored results): it is refused and the first stays.
func TestResultsCannotBeReplaced(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx := context.Background()
			q := testenv.NewQueue(t, server, queue.Options{})
			subject := q.Opts.ResultSubject("alice.0123456789abcdefghijklmnop", 3)
			if _, err := q.JS.Publish(ctx, subject, []byte("first"), queue.ExpectResults()); err != nil {
				t.Fatal(err)
			}
			if _, err := q.JS.Publish(ctx, subject, []byte("forged")); err == nil {
				t.Error("a second publish on a results subject was accepted")
			}
			if _, err := q.NC.Request(subject, []byte("forged, core"), 2*time.Second); err != nil && !errors.Is(err, nats.ErrNoResponders) {
				t.Logf("core publish: %v", err)
			}
			m, err := q.Results.GetLastMsgForSubject(ctx, subject)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Data) != "first" {
				t.Errorf("the subject holds %q, want the first results", m.Data)
			}
			// A delete frees it (a worker's, of results that do not answer
			// the batch).
			if err := q.Results.DeleteMsg(ctx, m.Sequence); err != nil {
				t.Fatal(err)
			}
			if _, err := q.JS.Publish(ctx, subject, []byte("again"), queue.ExpectResults()); err != nil {
				t.Errorf("publish after a delete: %v", err)
			}
		})
	}
}

// TestPublishResultsReplacesWhatDoesNotAnswer publishes a batch's results
// on a subject that already holds a message (issue 22, finding 7:
// garbage published on a new job's results subjects before its producer
// wrote them stalled the job): a message that does not answer the batch
// alike is replaced; the batch's own results stay.
func TestPublishResultsReplacesWhatDoesNotAnswer(t *testing.T) {
	ours := &job.Batch{Job: "alice.0123456789abcdefghijklmnop", Index: 2, First: 40}
	g, err := solver.Parse("..............3.85..1.2.......5.7.....4...1...9.......5......73..2.1........4...9")
	if err != nil {
		t.Fatal(err)
	}
	r, err := solver.Solve(context.Background(), &g, solver.Options{})
	ours.Items = []job.Item{{Line: 41, Kind: job.Known, Outcome: job.FromSolve(&g, r, err)}}
	ours.Digest = ours.ComputeDigest()
	forged := *ours
	forged.Items = []job.Item{{Line: 41, Kind: job.Known, Outcome: job.Outcome{Status: result.StatusNone, Puzzle: g}}}
	for _, server := range testenv.Servers {
		for _, tc := range []struct {
			name     string
			stored   []byte // nil: nothing there
			replaced bool
		}{
			{"empty", nil, false},
			{"garbage", []byte("garbage"), true},
			{"forged none, right digest", (&queue.Options{}).ResultsMsg(&forged).Data, true},
			{"ours already", (&queue.Options{}).ResultsMsg(ours).Data, false},
		} {
			t.Run(server+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				q := testenv.NewQueue(t, server, queue.Options{})
				m := q.Opts.ResultsMsg(ours)
				if tc.stored != nil {
					if _, err := q.JS.Publish(ctx, m.Subject, tc.stored); err != nil {
						t.Fatal(err)
					}
				}
				replaced, err := q.PublishResults(ctx, m, 2*time.Second, queue.SameResults(ctx, ours))
				if err != nil || replaced != tc.replaced {
					t.Errorf("PublishResults: replaced %v, %v; want %v, nil", replaced, err, tc.replaced)
				}
				rm, err := q.Results.GetLastMsgForSubject(ctx, m.Subject)
				if err != nil {
					t.Fatal(err)
				}
				if string(rm.Data) != string(m.Data) {
					t.Errorf("the subject holds %q, want our results", rm.Data)
				}
			})
		}
	}
}

// TestEveryStreamIsBounded sets the queue up with limits (issue 22,
// finding 4: the dead-letter stream had no max_age or max_bytes, and the
// results stream no size limit): each stream carries them.
func TestEveryStreamIsBounded(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx := context.Background()
			q := testenv.NewQueue(t, server, queue.Options{Retention: time.Hour, MaxBytes: 64 << 20,
				ResultsMaxBytes: 128 << 20, DLQMaxAge: 24 * time.Hour, DLQMaxBytes: 32 << 20})
			for _, want := range []struct {
				stream   string
				maxAge   time.Duration
				maxBytes int64
			}{
				{q.Opts.Stream, 0, 64 << 20},
				{q.Opts.ResultsStream(), time.Hour, 128 << 20},
				{q.Opts.DLQStream, 24 * time.Hour, 32 << 20},
			} {
				s, err := q.JS.Stream(ctx, want.stream)
				if err != nil {
					t.Fatal(err)
				}
				if c := s.CachedInfo().Config; c.MaxAge != want.maxAge || c.MaxBytes != want.maxBytes {
					t.Errorf("stream %s: max_age %v, max_bytes %d; want %v, %d", want.stream, c.MaxAge, c.MaxBytes, want.maxAge, want.maxBytes)
				}
			}
		})
	}
}
