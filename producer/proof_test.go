package producer

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// refusals is a slog handler that counts the results a follower refuses
// and keeps why.
type refusals struct {
	mu   sync.Mutex
	why  []string
	more chan struct{} // a value per refusal
}

func newRefusals() *refusals { return &refusals{more: make(chan struct{}, 64)} }

func (r *refusals) Enabled(context.Context, slog.Level) bool { return true }
func (r *refusals) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *refusals) WithGroup(string) slog.Handler            { return r }
func (r *refusals) Handle(_ context.Context, rec slog.Record) error {
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

// severalSolutions returns puzzles (17-clue ones, minimal) with their
// first given taken away: each has several solutions.
func severalSolutions(t *testing.T, n int) []string {
	var out []string
	for _, p := range testenv.Puzzles(t, "testdata/17_clue_100.txt", n) {
		i := strings.IndexFunc(p, func(c rune) bool { return c >= '1' && c <= '9' })
		out = append(out, p[:i]+"."+p[i+1:])
	}
	return out
}

// TestForgedUniqueAndGaveUpAreRefused publishes, before any worker and
// with the right digests, results that say gave_up for puzzles the
// solver settles at once (batch 0), and unique (with a right solution)
// for puzzles that have several solutions (batch 1): issue 28 found both
// printed. A follower prints none of them, whether it trusts no key
// (roles off's default), trusts the workers' key (the forgery carries no
// proof) or sees them signed by a key it does not trust: with no trusted
// proof it solves them again, refuses the unique batch
// (results_unproven), and prints its own answers for the gave_up, as the
// reader of an honest gave_up from a worker with a smaller budget would.
// A worker then answers the batches, and the job ends with the true
// results.
func TestForgedUniqueAndGaveUpAreRefused(t *testing.T) {
	workerKey, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	forgerKey, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, forger := proof.NewSigner(workerKey), proof.NewSigner(forgerKey)
	for _, tc := range []struct {
		name      string
		trust     *proof.Trust
		forgedBy  *proof.Signer // signs the forged messages; nil: no proof
		wantCheck string
		refusals  int // batches refused (batch 1); batch 0 solved by the reader
	}{
		{"no trusted keys", nil, nil, checkAnswer, 1},
		{"the workers' key trusted", proof.NewTrust(signer.PublicKey()), nil, checkAnswer, 1},
		{"signed by an untrusted key", proof.NewTrust(signer.PublicKey()), forger, checkAnswer, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachServer(t, func(t *testing.T, e *env) {
				ctx := context.Background()
				several := severalSolutions(t, 5)
				easy := testenv.Puzzles(t, "testdata/17_clue_100.txt", 10)[5:]
				text := strings.Join(append(append([]string{}, easy...), several...), "\n")
				sub := e.submit(text, Options{BatchSize: 5})

				unique := answer(t, sub.ID, 1, strings.Join(several, "\n"))
				unique.First, unique.Digest = 5, job.Digest{}
				for i := range unique.Items {
					o := &unique.Items[i].Outcome
					if o.Status != result.StatusMultiple {
						t.Fatalf("fixture: puzzle %d is %s", i, o.Status)
					}
					unique.Items[i].Line += 5
					o.Status, o.Error = result.StatusUnique, ""
				}
				unique.Digest = unique.ComputeDigest()
				gaveUp := answer(t, sub.ID, 0, strings.Join(easy, "\n"))
				for i := range gaveUp.Items {
					o := &gaveUp.Items[i].Outcome
					o.Status, o.Solution, o.Error = result.StatusGaveUp, solver.Grid{}, "solver: gave up (forged)"
				}
				gaveUp.Digest = gaveUp.ComputeDigest()
				for _, b := range []*job.Batch{gaveUp, unique} {
					m := e.q.Opts.ResultsMsg(b)
					if tc.forgedBy != nil {
						m.Header.Set(proof.Header, tc.forgedBy.SignResults(b.Job, b.Index, m.Data))
					}
					if _, err := e.q.JS.PublishMsg(ctx, m, queue.ExpectResults()); err != nil {
						t.Fatal(err)
					}
				}

				refused := newRefusals()
				var mu sync.Mutex
				var got []result.Result
				fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := Follow(fctx, e.q.Queue, sub.ID, func(r result.Result) error {
						mu.Lock()
						got = append(got, r)
						mu.Unlock()
						return nil
					}, FollowOptions{Trust: tc.trust, Logger: slog.New(refused)})
					done <- err
				}()
				for range tc.refusals {
					select {
					case <-refused.more:
					case err := <-done:
						t.Fatalf("the follower ended before refusing both batches: %v (results %+v)", err, got)
					case <-fctx.Done():
						t.Fatal("the forged batches were never refused")
					}
				}
				// The follower handles the batches in order: batch 0 was
				// passed on (or refused) before batch 1 was refused.
				want := local(t, text, false)
				mu.Lock()
				if tc.refusals == 2 && len(got) != 0 {
					t.Fatalf("the follower passed on %d forged results, first %+v", len(got), got[0])
				}
				if tc.refusals == 1 {
					same(t, got, want[:5]) // its own answers, not gave_up
				}
				mu.Unlock()
				refused.mu.Lock()
				for _, why := range refused.why {
					if !strings.Contains(why, "check="+tc.wantCheck) || !strings.Contains(why, proof.Reason) {
						t.Errorf("refusal %q: want check=%s and %s", why, tc.wantCheck, proof.Reason)
					}
				}
				refused.mu.Unlock()

				e.worker(worker.Options{Signer: signer})
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				same(t, got, want)
			})
		})
	}
}

// TestForgedSolveRepliesAreRefused answers solve requests faster than
// any worker with unique for a puzzle that has several solutions and
// gave_up for one the solver settles at once (issue 28: both were
// served), unsigned or signed by a key not trusted, then with the true
// answer, signed by the worker's key: Solve takes the forgery in no case,
// whether it trusts no key or the worker's, and returns the true answer.
func TestForgedSolveRepliesAreRefused(t *testing.T) {
	workerKey, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	forgerKey, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, forger := proof.NewSigner(workerKey), proof.NewSigner(forgerKey)
	eachServer(t, func(t *testing.T, e *env) {
		several := severalSolutions(t, 1)[0]
		easy := testenv.Puzzles(t, "testdata/17_clue_100.txt", 2)[1]
		sg, _ := solver.Parse(several)
		sr, _ := solver.Solve(context.Background(), &sg, solver.Options{})
		eg, _ := solver.Parse(easy)
		for _, tc := range []struct {
			name     string
			puzzle   string
			forged   result.Result
			forgedBy *proof.Signer
			trust    *proof.Trust
			want     result.Status
		}{
			{"unique of several, no keys", several, result.Result{Status: result.StatusUnique, Puzzle: sg.String(), Key: sg.Key(),
				Solution: sr.Solution.Digits()}, nil, nil, result.StatusMultiple},
			{"unique of several, keys", several, result.Result{Status: result.StatusUnique, Puzzle: sg.String(), Key: sg.Key(),
				Solution: sr.Solution.Digits()}, nil, proof.NewTrust(signer.PublicKey()), result.StatusMultiple},
			{"unique of several, untrusted key", several, result.Result{Status: result.StatusUnique, Puzzle: sg.String(), Key: sg.Key(),
				Solution: sr.Solution.Digits()}, forger, proof.NewTrust(signer.PublicKey()), result.StatusMultiple},
			{"gave_up, no keys", easy, result.Result{Status: result.StatusGaveUp, Puzzle: eg.String(), Key: eg.Key(),
				Error: "solver: gave up (forged)"}, nil, nil, result.StatusUnique},
			{"gave_up, keys", easy, result.Result{Status: result.StatusGaveUp, Puzzle: eg.String(), Key: eg.Key(),
				Error: "solver: gave up (forged)"}, nil, proof.NewTrust(signer.PublicKey()), result.StatusUnique},
		} {
			t.Run(tc.name, func(t *testing.T) {
				data, _ := json.Marshal(&tc.forged)
				reply := nats.NewMsg("")
				reply.Data = data
				if tc.forgedBy != nil {
					reply.Header.Set(proof.Header, tc.forgedBy.SignReply(data))
				}
				// The true answer, as a worker signs it, after the forgery.
				g, _ := solver.Parse(tc.puzzle)
				sr, err := solver.Solve(context.Background(), &g, solver.Options{})
				truth, _ := json.Marshal(result.FromSolve(&g, sr, err))
				right := nats.NewMsg("")
				right.Data = truth
				right.Header.Set(proof.Header, signer.SignReply(truth))
				sub, err := e.q.NC.Subscribe(e.q.Opts.SolveSubject(), func(m *nats.Msg) {
					for _, r := range []nats.Msg{*reply, *right} {
						r.Subject = m.Reply
						_ = e.q.NC.PublishMsg(&r)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = sub.Unsubscribe() }()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				r, err := Solve(ctx, e.q.NC, e.q.Opts, tc.puzzle, SolveOptions{NoLookup: true, Trust: tc.trust, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != tc.want {
					t.Fatalf("Solve = %s (%+v), want the true %s", r.Status, r, tc.want)
				}
			})
		}
	})
}
