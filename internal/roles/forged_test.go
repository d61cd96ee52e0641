package roles_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// refusalLog is a slog handler that signals each results batch a
// follower refuses, with its attributes.
type refusalLog struct {
	mu   sync.Mutex
	why  []string
	more chan struct{}
}

func (r *refusalLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *refusalLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *refusalLog) WithGroup(string) slog.Handler            { return r }
func (r *refusalLog) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "producer: results refused" {
		return nil
	}
	var b strings.Builder
	rec.Attrs(func(a slog.Attr) bool { b.WriteString(a.String() + " "); return true })
	r.mu.Lock()
	r.why = append(r.why, b.String())
	r.mu.Unlock()
	r.more <- struct{}{}
	return nil
}

// TestForgedAnswersWithRolesOn: on servers set up with the files `roles
// init` writes, the gateway (which may publish any owner's results)
// forges the results of producer-berlin's job with the right digests:
// unique for puzzles with several solutions, gave_up for easy ones.
// producer-berlin's follower prints neither, with the roles folder's
// trusted keys (no proof) or with none (it solves them again). The
// worker can neither delete the forgery nor publish over it (results are
// immutable but for admin). A job the worker answers, signed with its
// key from the folder, is taken.
func TestForgedAnswersWithRolesOn(t *testing.T) {
	puzzles := testenv.Puzzles(t, "../../producer/testdata/17_clue_100.txt", 20)
	var several []string
	for _, p := range puzzles[:5] {
		i := strings.IndexFunc(p, func(c rune) bool { return c >= '1' && c <= '9' })
		several = append(several, p[:i]+"."+p[i+1:])
	}
	easy := puzzles[5:10]
	text := strings.Join(append(append([]string{}, easy...), several...), "\n")
	for _, kind := range []string{"embedded", "nats-server"} {
		t.Run(kind, func(t *testing.T) {
			d := deploy(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			admin, alice, gateway, wk := d.connect(t, "admin"), d.connect(t, "producer-berlin"), d.connect(t, "gateway"), d.connect(t, "worker")
			if _, err := admin.setup(ctx, true, true); err != nil {
				t.Fatal(admin.ref.Explain(err))
			}
			aq, err := alice.setup(ctx, false, true)
			if err != nil {
				t.Fatal(alice.ref.Explain(err))
			}
			noCache := cache.NewGuard(nil, cache.GuardOptions{})
			quiet := slog.New(slog.DiscardHandler)
			submit := func(text string) string {
				t.Helper()
				p := producer.New(aq, noCache, producer.Options{Owner: "producer-berlin", BatchSize: 5, Logger: quiet})
				sub, err := p.Submit(ctx, input.NewReader(strings.NewReader(text)))
				if err != nil {
					t.Fatal(alice.ref.Explain(err))
				}
				return sub.ID
			}
			trust, err := proof.LoadTrust(filepath.Join(d.dir, roles.ProofTrustedFile))
			if err != nil {
				t.Fatal(err)
			}
			signer, err := proof.LoadSigner(filepath.Join(d.dir, "worker", roles.ProofKeyFile))
			if err != nil {
				t.Fatal(err)
			}

			id := submit(text)
			forged := forge(t, id, easy, several)
			for _, b := range forged {
				if _, err := gateway.js.PublishMsg(ctx, opts.ResultsMsg(b), queue.ExpectResults()); err != nil {
					t.Fatal(gateway.ref.Explain(err))
				}
			}
			for _, tr := range []struct {
				name     string
				trust    *proof.Trust
				check    string
				refusals int
			}{{"trusted keys", trust, "check=answer", 1}, {"no keys", nil, "check=answer", 1}} {
				log := &refusalLog{more: make(chan struct{}, 16)}
				fctx, stop := context.WithCancel(ctx)
				var got []result.Result
				done := make(chan error, 1)
				go func() {
					_, err := producer.Follow(fctx, aq, id, func(r result.Result) error { got = append(got, r); return nil },
						producer.FollowOptions{Trust: tr.trust, Logger: slog.New(log)})
					done <- err
				}()
				for range tr.refusals {
					select {
					case <-log.more:
					case err := <-done:
						t.Fatalf("%s: the follower ended before refusing both batches: %v", tr.name, err)
					case <-ctx.Done():
						t.Fatalf("%s: the forged batches were never refused", tr.name)
					}
				}
				stop()
				<-done
				// In order: batch 0 was passed on or refused before batch 1.
				for _, r := range got {
					if r.Status != result.StatusUnique {
						t.Errorf("%s: the follower passed on %+v", tr.name, r)
					}
				}
				if want := 5 * (2 - tr.refusals); len(got) != want {
					t.Errorf("%s: %d results passed on, want %d", tr.name, len(got), want)
				}
				for _, why := range log.why {
					if !strings.Contains(why, tr.check) || !strings.Contains(why, proof.Reason) {
						t.Errorf("%s: refusal %q, want %s and %s", tr.name, why, tr.check, proof.Reason)
					}
				}
			}

			// The worker cannot take the forgery away, nor write over it.
			wq, err := wk.setup(ctx, false, true)
			if err != nil {
				t.Fatal(wk.ref.Explain(err))
			}
			subject := opts.ResultSubject(id, 1)
			before, err := wq.Results.GetLastMsgForSubject(ctx, subject)
			if err != nil {
				t.Fatal(err)
			}
			truth := answerBatch(t, id, 1, several)
			m := opts.ResultsMsg(truth)
			m.Header.Set(proof.Header, signer.SignResults(id, 1, m.Data))
			// Each refused: JetStream's API answers nothing to a request
			// the server does not let through, so each waits its own
			// short deadline.
			refused := func(what string, op func(context.Context) error) {
				t.Helper()
				octx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if err := op(octx); err == nil {
					t.Errorf("the worker could %s", what)
				}
			}
			refused("publish results over stored ones", func(c context.Context) error { _, err := wk.js.PublishMsg(c, m); return err })
			refused("delete stored results", func(c context.Context) error { return wq.Results.DeleteMsg(c, before.Sequence) })
			refused("erase stored results", func(c context.Context) error { return wq.Results.SecureDeleteMsg(c, before.Sequence) })
			after, err := wq.Results.GetLastMsgForSubject(ctx, subject)
			if err != nil {
				t.Fatalf("the stored results are gone: %v", err)
			}
			if after.Sequence != before.Sequence {
				t.Errorf("the stored results changed: sequence %d then %d", before.Sequence, after.Sequence)
			}

			// A job the worker answers, with its key: taken on its proof.
			wlog := &recordLog{}
			w := worker.New(wk.nc, wq, noCache, worker.Options{Signer: signer, Logger: slog.New(wlog), Concurrency: 2, ShutdownTimeout: 2 * time.Second})
			wctx, wstop := context.WithCancel(ctx)
			wdone := make(chan error, 1)
			go func() { wdone <- w.Run(wctx) }()
			stopped := false
			defer func() {
				if !stopped {
					wstop()
					<-wdone
				}
			}()
			id2 := submit(text)
			var got []result.Result
			rec, err := producer.Follow(ctx, aq, id2, func(r result.Result) error { got = append(got, r); return nil },
				producer.FollowOptions{Trust: trust, Logger: quiet})
			if err != nil {
				t.Fatal(alice.ref.Explain(err))
			}
			if len(got) != 10 || rec.Counts[result.StatusMultiple] != 5 || rec.Counts[result.StatusUnique] != 5 {
				t.Errorf("the worker's job: %d results, counts %v; want 10, 5 multiple and 5 unique", len(got), rec.Counts)
			}

			// The worker met the forgery on the first job's results and
			// may not delete it: it says so at once (its delete refused)
			// and hands the batch back, instead of waiting for the
			// delete's 30 s deadline with the batch in work; so it stops
			// within its drain, with nothing refused meanwhile. (It used
			// to sit out the shutdown timeout: 30 s by default.)
			if !wlog.wait(ctx, func(r string) bool {
				return strings.Contains(r, "batch failed") && strings.Contains(r, queue.ErrResultsImmutable.Error())
			}) {
				t.Fatalf("the worker never said that the forged results cannot be deleted:\n%s", wlog)
			}
			refusals := wk.ref.Count()
			wstop()
			if err := <-wdone; err != nil {
				t.Errorf("worker: %v", err)
			}
			stopped = true
			if wlog.has(func(r string) bool { return strings.Contains(r, "shutdown timeout") }) {
				t.Errorf("the worker abandoned batches at its shutdown:\n%s", wlog)
			}
			if n := wk.ref.Count(); n != refusals {
				t.Errorf("%d operations of the worker refused while it stopped:\n%s", n-refusals, wlog)
			}
		})
	}
}

// recordLog is a slog handler that keeps each record as a line of text.
type recordLog struct {
	mu    sync.Mutex
	lines []string
}

func (r *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recordLog) WithGroup(string) slog.Handler            { return r }
func (r *recordLog) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	r.mu.Unlock()
	return nil
}

// has reports whether a record kept so far matches.
func (r *recordLog) has(match func(string) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.lines, match)
}

// wait waits until a record matches, or ctx ends (false).
func (r *recordLog) wait(ctx context.Context, match func(string) bool) bool {
	for !r.has(match) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// String returns the records, a line each.
func (r *recordLog) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// forge returns results of job id's two batches with their right
// digests: gave_up for easy, which the solver settles, and unique (with a
// right solution) for several, which have several solutions.
func forge(t *testing.T, id string, easy, several []string) []*job.Batch {
	t.Helper()
	gaveUp := answerBatch(t, id, 0, easy)
	for i := range gaveUp.Items {
		o := &gaveUp.Items[i].Outcome
		o.Status, o.Solution, o.Error = result.StatusGaveUp, solver.Grid{}, "solver: gave up (forged)"
	}
	gaveUp.Digest = gaveUp.ComputeDigest()
	unique := answerBatch(t, id, 1, several)
	for i := range unique.Items {
		o := &unique.Items[i].Outcome
		if o.Status != result.StatusMultiple {
			t.Fatalf("fixture: puzzle %d is %s", i, o.Status)
		}
		o.Status, o.Error = result.StatusUnique, ""
	}
	unique.Digest = unique.ComputeDigest()
	return []*job.Batch{gaveUp, unique}
}

// answerBatch returns the results a worker publishes for puzzles, batch
// index of job id (of 5 puzzles each: lines index*5+1...).
func answerBatch(t *testing.T, id string, index uint64, puzzles []string) *job.Batch {
	t.Helper()
	b := &job.Batch{Job: id, Index: index, First: index * 5}
	for i, p := range puzzles {
		g, err := solver.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := solver.Solve(context.Background(), &g, solver.Options{})
		b.Items = append(b.Items, job.Item{Line: int(index)*5 + i + 1, Kind: job.Known, Outcome: job.FromSolve(&g, r, err)})
	}
	b.Digest = b.ComputeDigest()
	return b
}
