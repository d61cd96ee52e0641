package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

var quiet = slog.New(slog.DiscardHandler)

// env is a queue on one server and a cache shared by its workers.
type env struct {
	t     *testing.T
	q     *testenv.Queue
	cache *cache.Guard
	trust *proof.Trust // the keys follow trusts (nil: none)
}

func newEnv(t *testing.T, server string) *env {
	t.Helper()
	return &env{t: t, q: testenv.NewQueue(t, server, queue.Options{}),
		cache: cache.NewGuard(cache.NewMemory(0), cache.GuardOptions{Logger: quiet})}
}

func eachServer(t *testing.T, f func(t *testing.T, e *env)) {
	for _, s := range testenv.Servers {
		t.Run(s, func(t *testing.T) { f(t, newEnv(t, s)) })
	}
}

// run starts w until the test ends (or stop), once it is ready.
// lane returns the lane of job id: its record's, or, for a job without
// one, its owner's small lane of normal priority.
func (e *env) lane(id string) queue.Lane {
	e.t.Helper()
	rec, _, err := job.NewStore(e.q.JS, e.q.Jobs).Get(context.Background(), id)
	if err != nil {
		return queue.Lane{Owner: job.OwnerOf(id), Priority: job.PriorityNormal, Slot: queue.SlotSmall}
	}
	return queue.LaneOf(&rec)
}

// strayLane is the lane of the stray work tests publish.
var strayLane = queue.Lane{Owner: "stray", Priority: job.PriorityNormal, Slot: queue.SlotSmall}

func (e *env) run(w *Worker) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		e.t.Fatalf("worker: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("worker Run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) worker(opts Options) *Worker {
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	return New(e.q.NC, e.q.Queue, e.cache, opts)
}

func (e *env) submit(puzzles []string, size int) string {
	e.t.Helper()
	p := producer.New(e.q.Queue, e.cache, producer.Options{BatchSize: size, FirstBatch: size, Logger: quiet})
	sub, err := p.Submit(context.Background(), input.NewReader(strings.NewReader(strings.Join(puzzles, "\n"))))
	if err != nil {
		e.t.Fatal(err)
	}
	return sub.ID
}

// follow collects a job's results, failing after d.
func (e *env) follow(id string, d time.Duration) ([]result.Result, job.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var rs []result.Result
	rec, err := producer.Follow(ctx, e.q.Queue, id, func(r result.Result) error { rs = append(rs, r); return nil },
		producer.FollowOptions{Logger: quiet, Trust: e.trust})
	if err != nil {
		e.t.Fatal(err)
	}
	return rs, rec
}

// check fails unless rs solve puzzles, in order.
func check(t *testing.T, puzzles []string, rs []result.Result) {
	t.Helper()
	if len(rs) != len(puzzles) {
		t.Fatalf("%d results for %d puzzles", len(rs), len(puzzles))
	}
	for i, r := range rs {
		if r.Status != result.StatusUnique || r.Line != i+1 {
			t.Fatalf("result %d: %+v", i, r)
		}
		testenv.CheckSolution(t, puzzles[i], r.Solution)
	}
}

// observer counts what workers did.
type observer struct {
	mu       sync.Mutex
	outcomes map[string]int
	puzzles  int
	solved   int
	errs     []error
}

func (o *observer) Batch(s *BatchStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.outcomes == nil {
		o.outcomes = map[string]int{}
	}
	o.outcomes[s.Outcome]++
	o.solved += len(s.SolveTimes)
	if s.Outcome == OutcomeAcked {
		o.puzzles += s.Puzzles
	}
	if s.Err != nil {
		o.errs = append(o.errs, s.Err)
	}
}

func (o *observer) get(outcome string) (n, puzzles, solved int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcomes[outcome], o.puzzles, o.solved
}

// String says what o saw: the outcomes and errors.
func (o *observer) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("outcomes %v, errors %v", o.outcomes, o.errs)
}

// await returns o.get(outcome) once ok accepts it, or as it is after 5s:
// a worker tells its observer of a batch after storing its results and
// acking, so a reader of the results may be done first.
func (o *observer) await(outcome string, ok func(n, puzzles, solved int) bool) (n, puzzles, solved int) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, puzzles, solved = o.get(outcome)
		if ok(n, puzzles, solved) || time.Now().After(deadline) {
			return n, puzzles, solved
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTwoWorkersShareAJob(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 600)
		var o1, o2 observer
		// A millisecond a puzzle: the job lasts long enough for both to
		// take turns, whichever hears of it first.
		slow := func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error) {
			time.Sleep(time.Millisecond)
			return sv.Solve(ctx, g, opts)
		}
		w1 := e.worker(Options{Concurrency: 1, Observer: &o1, NoService: true})
		w2 := e.worker(Options{Concurrency: 1, Observer: &o2})
		w1.solve, w2.solve = slow, slow
		e.run(w1)
		e.run(w2)
		id := e.submit(puzzles, 20)
		rs, rec := e.follow(id, 60*time.Second)
		check(t, puzzles, rs)
		// The observers hear of a batch after its results are stored:
		// wait for both to have heard of every one.
		var b1, p1, b2, p2 int
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			b1, p1, _ = o1.get(OutcomeAcked)
			b2, p2, _ = o2.get(OutcomeAcked)
			if p1+p2 >= 600 || time.Now().After(deadline) {
				break
			}
		}
		if b1+b2 < 30 || p1+p2 < 600 || b1 == 0 || b2 == 0 {
			t.Errorf("worker 1 acked %d batches (%d puzzles), worker 2 %d (%d): want both to share 30 (%s; %s)", b1, p1, b2, p2, o1.String(), o2.String())
		}
		if rec.Counts[result.StatusUnique] != 600 {
			t.Errorf("counts %v", rec.Counts)
		}
	})
}

// deadLetters returns the dead letters of e's queue.
func (e *env) deadLetters() []*queue.DeadLetter {
	var out []*queue.DeadLetter
	if err := e.q.EachDeadLetter(context.Background(), func(dl *queue.DeadLetter) error {
		out = append(out, dl)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// waitDeadLetters waits until there are n dead letters.
func (e *env) waitDeadLetters(n int) []*queue.DeadLetter {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		dls := e.deadLetters()
		if len(dls) >= n || time.Now().After(deadline) {
			return dls
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestForgedBatchesAreDeadLettered(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 100)
		victim := e.submit(puzzles[:40], 10) // batches 0-3, no worker yet
		other, _ := solver.Parse(puzzles[50])
		forge := func(id string, index, first uint64, lines int) *job.Batch {
			b := &job.Batch{Job: id, Index: index, First: first}
			for i := range lines {
				b.Items = append(b.Items, job.Item{Line: int(first) + i + 1, Kind: job.Solve, Grid: other})
			}
			return b
		}
		// real returns the victim's batch index as its producer built it,
		// with flags.
		real := func(index, flags uint64) *job.Batch {
			b := forge(victim, index, index*10, 10)
			b.Flags = flags
			for j := range b.Items {
				b.Items[j].Grid, _ = solver.Parse(puzzles[int(index)*10+j])
			}
			return b
		}
		cases := []struct {
			reason  string
			subject string // "" for the batch's own
			b       *job.Batch
		}{
			{queue.ReasonOutOfRange, "", forge(victim, 4, 40, 10)},                                                // past the job's batches
			{queue.ReasonOutOfRange, "", forge(victim, 1000, 10000, 1)},                                           // past its manifests
			{queue.ReasonMismatch, "", forge(victim, 1, 10, 10)},                                                  // in range, other puzzles
			{queue.ReasonMismatch, "", forge(victim, 2, 25, 10)},                                                  // in range, items out of place
			{queue.ReasonUnknownJob, "", forge(job.NewID("someone"), 0, 0, 3)},                                    // no such job
			{queue.ReasonMismatch, e.q.Opts.WorkSubject(job.NewID(job.DefaultOwner), e.lane(victim)), real(0, 0)}, // another job's subject
			{queue.ReasonMismatch, e.q.Opts.WorkSubject(job.NewID("someone"), strayLane), real(0, 0)},             // another owner's
			{queue.ReasonMismatch, "", real(1, job.FlagFirstSolution)},                                            // another mode
		}
		for i, c := range cases {
			m := e.q.Opts.WorkMsg(c.b, e.lane(c.b.Job))
			if c.subject != "" {
				m.Subject = c.subject
			}
			m.Header.Set(nats.MsgIdHdr, "forged-"+string(rune('a'+i)))
			if _, err := e.q.JS.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		var o observer
		e.run(e.worker(Options{Observer: &o}))
		rs, rec := e.follow(victim, 30*time.Second)
		check(t, puzzles[:40], rs)
		if rec.Counts[result.StatusUnique] != 40 || rec.Lines != 40 {
			t.Errorf("victim's record %+v", rec)
		}
		dls := e.waitDeadLetters(len(cases))
		if len(dls) != len(cases) {
			t.Fatalf("%d dead letters, want %d", len(dls), len(cases))
		}
		got := map[string]int{}
		for _, dl := range dls {
			got[dl.Reason]++
			if dl.Error == "" || dl.Deliveries != 1 {
				t.Errorf("dead letter %+v: want the error and 1 delivery", dl)
			}
		}
		want := map[string]int{queue.ReasonOutOfRange: 2, queue.ReasonMismatch: 5, queue.ReasonUnknownJob: 1}
		for r, n := range want {
			if got[r] != n {
				t.Errorf("%d dead letters for %s, want %d (all: %v)", got[r], r, n, got)
			}
		}
		var rejected int
		o.mu.Lock()
		for _, err := range o.errs {
			var re *RejectError
			if errors.As(err, &re) {
				rejected++
			}
		}
		o.mu.Unlock()
		if rejected != len(cases) {
			t.Errorf("%d RejectErrors observed, want %d", rejected, len(cases))
		}
	})
}

func TestUndecodableMessageIsDeadLettered(t *testing.T) {
	e := newEnv(t, "shared")
	e.run(e.worker(Options{}))
	for _, body := range [][]byte{nil, []byte("hello"), {job.WorkVersion, 0, 3, 'a', '.', 'j', 0, 0, 0}} {
		if _, err := e.q.JS.Publish(context.Background(), e.q.Opts.WorkSubject("stray.0", strayLane), body); err != nil {
			t.Fatal(err)
		}
	}
	dls := e.waitDeadLetters(3)
	if len(dls) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dls))
	}
	for _, dl := range dls {
		if dl.Reason != queue.ReasonUndecodable || dl.BodyError == "" || !strings.Contains(dl.Error, "undecodable") {
			t.Errorf("dead letter %+v", dl)
		}
	}
}

// TestOneDeadLetterPerMessage checks that a message dead-lettered on two
// deliveries (its ack wait ran out before the first one was handled) is
// in the dead-letter stream once.
func TestOneDeadLetterPerMessage(t *testing.T) {
	e := &env{t: t, q: testenv.NewQueue(t, "embedded", queue.Options{AckWait: time.Second}),
		cache: cache.NewGuard(nil, cache.GuardOptions{Logger: quiet})}
	if _, err := e.q.JS.Publish(context.Background(), e.q.Opts.WorkSubject("stray.0", strayLane), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	// The first delivery, held and not acknowledged, by the consumer a
	// worker takes the stray work of job "stray.0" with: its lane's.
	c, err := e.q.LaneWork(context.Background(), strayLane)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var first jetstream.Msg
	for m := range batch.Messages() {
		first = m
	}
	if first == nil {
		t.Fatal("no first delivery")
	}
	// The second, after the ack wait, to a worker: a dead letter.
	w := e.worker(Options{})
	e.run(w)
	if dls := e.waitDeadLetters(1); len(dls) != 1 {
		t.Fatalf("%d dead letters after the second delivery, want 1", len(dls))
	}
	// Then the first delivery's handling ends the same way.
	tk := &task{w: w, m: first, start: time.Now(), delivered: 1}
	tk.deadLetter(queue.ReasonUndecodable, errors.New("undecodable: test")) // published and acked, or dropped as a duplicate
	if dls := e.deadLetters(); len(dls) != 1 {
		t.Errorf("%d dead letters, want 1: %+v", len(dls), dls)
	}
}

func TestRedeliveredBatchIsNotSolvedAgain(t *testing.T) {
	// A batch whose results are stored (its ack was lost) is acked
	// without being solved again.
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 10)
	var o observer
	stop := e.run(e.worker(Options{Observer: &o}))
	id := e.submit(puzzles, 10)
	e.follow(id, 20*time.Second)
	stop()
	_, _, solvedBefore := o.get(OutcomeAcked)
	if solvedBefore != 10 {
		t.Fatalf("solved %d puzzles, want 10", solvedBefore)
	}
	// Deliver batch 0 again, as a redelivery would.
	b := &job.Batch{Job: id}
	for i, p := range puzzles {
		g, _ := solver.Parse(p)
		b.Items = append(b.Items, job.Item{Line: i + 1, Kind: job.Solve, Grid: g})
	}
	lane := e.lane(id)
	m := e.q.Opts.WorkMsg(b, lane)
	m.Header.Set(nats.MsgIdHdr, "again")
	if _, err := e.q.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	// A first delivery that ends without an ack: the next one is a
	// redelivery.
	c, err := e.q.LaneWork(context.Background(), lane)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for msg := range batch.Messages() {
		_ = msg.Nak()
	}
	var o2 observer // and no cache: it would answer the puzzles too
	e.run(New(e.q.NC, e.q.Queue, nil, Options{Observer: &o2, Logger: quiet}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, _, _ := o2.get(OutcomeAcked); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch was not acked")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, solved := o2.get(OutcomeAcked); solved != 0 {
		t.Errorf("the redelivered batch was solved again (%d puzzles)", solved)
	}
	rs, _ := e.follow(id, 10*time.Second)
	check(t, puzzles, rs)
}

func TestPanicBecomesGaveUp(t *testing.T) {
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 10)
	poison, _ := solver.Parse(puzzles[3])
	// The worker's gave_up is taken on its proof: a reader without its
	// key solves the puzzle itself and prints its own answer.
	k, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer := proof.NewSigner(k)
	e.trust = proof.NewTrust(signer.PublicKey())
	w := e.worker(Options{Signer: signer})
	w.solve = func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error) {
		if *g == poison {
			panic(errors.New("boom"))
		}
		return sv.Solve(ctx, g, opts)
	}
	e.run(w)
	rs, rec := e.follow(e.submit(puzzles, 10), 20*time.Second)
	if rec.Counts[result.StatusGaveUp] != 1 || rec.Counts[result.StatusUnique] != 9 {
		t.Fatalf("counts = %v", rec.Counts)
	}
	if rs[3].Status != result.StatusGaveUp || !strings.Contains(rs[3].Error, "internal error: boom") {
		t.Fatalf("result of the puzzle that panicked = %+v", rs[3])
	}
	// A gave_up is no answer: it is not cached.
	if hits := e.cache.Get(context.Background(), []job.Key{job.KeyOf(&poison)}); hits != nil && hits[0] != nil {
		t.Errorf("a gave_up result was cached: %+v", hits[0])
	}
}

func TestSolveEndpoint(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		e.run(e.worker(Options{}))
		p := testenv.Puzzles(t, "testdata/17_clue_300.txt", 1)[0]
		for _, tc := range []struct {
			name, body string
			status     result.Status
		}{
			{"text", p, result.StatusUnique},
			{"json", `{"puzzle": "` + p + `"}`, result.StatusUnique},
			{"json first", `{"puzzle": "` + strings.Repeat(".", 81) + `", "first": true}`, result.StatusSolved},
		} {
			m, err := e.q.NC.Request(e.q.Opts.SolveSubject(), []byte(tc.body), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var r result.Result
			if err := json.Unmarshal(m.Data, &r); err != nil || r.Status != tc.status {
				t.Fatalf("%s: reply %s (%v)", tc.name, m.Data, err)
			}
			puzzle := p
			if tc.status == result.StatusSolved {
				puzzle = strings.Repeat(".", 81)
			}
			testenv.CheckSolution(t, puzzle, r.Solution)
		}
		for _, tc := range []struct{ body, code, says string }{
			{"12", queue.CodeInvalidPuzzle, "2 cells, want 81"},
			{`{"puzzle": 5}`, queue.CodeBadRequest, "JSON"},
			{`{"puzle": "x"}`, queue.CodeBadRequest, "unknown field"},
		} {
			m, err := e.q.NC.Request(e.q.Opts.SolveSubject(), []byte(tc.body), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			se := queue.ServiceErrorOf(m)
			if se == nil || se.Code != tc.code || !strings.Contains(se.Description, tc.says) {
				t.Errorf("request %q: error %+v, want code %s saying %q", tc.body, se, tc.code, tc.says)
			}
		}
	})
}

// TestIdleHandlersShareABatch checks that one batch is solved by every
// handler of a worker, not by the one that took it alone: a job of few
// batches of hard puzzles must still use every core.
func TestIdleHandlersShareABatch(t *testing.T) {
	for _, concurrency := range []int{1, 4} {
		t.Run(fmt.Sprint("concurrency ", concurrency), func(t *testing.T) {
			e := newEnv(t, "embedded")
			puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
			var mu sync.Mutex
			solvers := map[*solver.Solver]int{}
			var o observer
			w := e.worker(Options{Concurrency: concurrency, Observer: &o})
			w.solve = func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error) {
				mu.Lock()
				solvers[sv]++
				mu.Unlock()
				time.Sleep(200 * time.Microsecond) // a hard puzzle
				return sv.Solve(ctx, g, opts)
			}
			e.run(w)
			rs, rec := e.follow(e.submit(puzzles, len(puzzles)), 30*time.Second)
			check(t, puzzles, rs)
			if rec.Batches != 1 || rec.Counts[result.StatusUnique] != 300 {
				t.Fatalf("record: %d batches, counts %v", rec.Batches, rec.Counts)
			}
			if _, _, solved := o.await(OutcomeAcked, func(_, _, solved int) bool { return solved >= 300 }); solved != 300 {
				t.Errorf("the observer saw %d puzzles solved, want 300", solved)
			}
			mu.Lock()
			defer mu.Unlock()
			if concurrency == 1 && len(solvers) != 1 || concurrency > 1 && len(solvers) < 2 {
				t.Errorf("with concurrency %d the batch was solved by %d handlers (%v)", concurrency, len(solvers), solvers)
			}
		})
	}
}

// TestForgedMaxDeliveriesAdvisory publishes work, then advisories as
// anyone allowed on $JS.EVENT.> could (issue 22, finding 10: forged
// advisories moved a running job's pending work to the dead letters):
// one for work not delivered yet, one naming no consumer, and one with
// fewer deliveries than the consumer allows are ignored; the advisory of
// a message really delivered MaxDeliver times without an ack moves it.
func TestForgedMaxDeliveriesAdvisory(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		o := e.q.Opts
		durable := o.Consumer + "-bulk"
		w := e.worker(Options{NakDelays: []time.Duration{10 * time.Millisecond}})
		w.q.Opts.AckWait = 100 * time.Millisecond // the grace's ack waits
		c, err := e.q.JS.CreateOrUpdateConsumer(ctx, o.Stream, jetstream.ConsumerConfig{Durable: durable,
			FilterSubject: o.WorkFilter(), AckPolicy: jetstream.AckExplicitPolicy, AckWait: 100 * time.Millisecond, MaxDeliver: 2})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for i := range 2 {
			ack, err := e.q.JS.Publish(ctx, o.WorkSubject("stray.0123456789abcdefghijklmno"+fmt.Sprint(i), strayLane), []byte("work"))
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, ack.Sequence)
		}
		advisory := func(consumer string, seq, deliveries uint64) []byte {
			data, _ := json.Marshal(maxDeliveriesAdvisory{Stream: o.Stream, Consumer: consumer, StreamSeq: seq, Deliveries: deliveries})
			return data
		}
		for _, tc := range []struct {
			name string
			data []byte
		}{
			{"not delivered yet", advisory(durable, seqs[0], 2)},
			{"no such consumer", advisory("nobody", seqs[0], 2)},
		} {
			if w.maxDelivered(tc.data) {
				t.Errorf("%s: the advisory moved the message", tc.name)
			}
		}
		// Deliver the first message twice, never acked: the server gives
		// it up.
		for delivered := 0; delivered < 2; {
			batch, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range batch.Messages() {
				if md, _ := m.Metadata(); md.Sequence.Stream == seqs[0] {
					delivered++
				}
			}
		}
		if w.maxDelivered(advisory(durable, seqs[0], 1)) {
			t.Error("an advisory with fewer deliveries than the consumer allows moved the message")
		}
		if !w.maxDelivered(advisory(durable, seqs[0], 2)) {
			t.Error("the advisory of a message given up did not move it")
		}
		s, err := e.q.JS.Stream(ctx, o.Stream)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetMsg(ctx, seqs[1]); err != nil {
			t.Errorf("the second message, never delivered: %v", err)
		}
		if dls := e.deadLetters(); len(dls) != 1 || dls[0].Reason != queue.ReasonMaxDeliver {
			t.Errorf("dead letters %+v, want the given-up message", dls)
		}
	})
}
