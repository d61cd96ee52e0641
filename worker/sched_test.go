package worker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// order records the batches a worker handled, in the order it took them.
type order struct {
	mu      sync.Mutex
	batches []handled
	after   func(n int) // called with the count after each batch (optional)
}

type handled struct {
	job       string
	batch     uint64
	outcome   string
	delivered time.Time
}

func (o *order) Batch(s *BatchStats) {
	o.mu.Lock()
	o.batches = append(o.batches, handled{s.Job, s.Batch, s.Outcome, s.Delivered})
	n := len(o.batches)
	o.mu.Unlock()
	if o.after != nil {
		o.after(n)
	}
}

// get returns the batches handled so far in the order they were taken
// (their results may be stored in another order).
func (o *order) get() []handled {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := slices.Clone(o.batches)
	slices.SortStableFunc(out, func(a, b handled) int { return a.delivered.Compare(b.delivered) })
	return out
}

// wait waits until o has n batches, or fails after d.
func (o *order) wait(t *testing.T, n int, d time.Duration) []handled {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := o.get()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches handled after %v, want %d", len(got), d, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// submitWith submits puzzles in batches of size with priority p.
func (e *env) submitWith(puzzles []string, size int, p job.Priority) string {
	e.t.Helper()
	pr := producer.New(e.q.Queue, e.cache, producer.Options{BatchSize: size, FirstBatch: size, Priority: p, Logger: quiet})
	sub, err := pr.Submit(context.Background(), input.NewReader(strings.NewReader(strings.Join(puzzles, "\n"))))
	if err != nil {
		e.t.Fatal(err)
	}
	return sub.ID
}

// TestSmallJobGetsItsTurn checks that a job submitted after a large one
// is not served after it: the worker takes the small job's batch among
// its first ones, while the large job still has most of its work.
// Before work was divided by job, the small job's batch came last.
func TestSmallJobGetsItsTurn(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
		big := e.submit(puzzles[:200], 5) // 40 batches, no worker yet
		small := e.submit(puzzles[200:205], 5)
		var o order
		e.run(e.worker(Options{Concurrency: 1, Observer: &o, NoService: true}))
		rs, _ := e.follow(small, 30*time.Second)
		check(t, puzzles[200:205], rs)
		// The observer hears of a batch after its results are stored.
		var got []handled
		pos := -1
		for deadline := time.Now().Add(10 * time.Second); pos < 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			got = o.get()
			pos = slices.IndexFunc(got, func(h handled) bool { return h.job == small })
		}
		if pos < 0 || pos > 2 {
			t.Fatalf("the small job's batch was handled %dth of %v; want among the first 3", pos+1, got)
		}
		// The big job still gets every batch done, and finishes.
		rs, rec := e.follow(big, 60*time.Second)
		check(t, puzzles[:200], rs)
		if rec.State != job.Finished || rec.DoneBatches != 40 {
			t.Errorf("big job %+v", rec)
		}
	})
}

// TestFirstBatchLane checks that a job arriving while every handler of a
// worker is in the middle of another job's batch gets its first batch
// handled at once, by the first-batch lane, instead of after that batch:
// the small job's results are all in while the big job's batch in work is
// still held (by the solve hook) unfinished. Without the lane the small
// job would wait for the release.
func TestFirstBatchLane(t *testing.T) {
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
	bigSet := map[string]bool{}
	for _, p := range puzzles[:200] {
		g, err := solver.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		bigSet[g.String()] = true
	}
	big := e.submit(puzzles[:200], 5) // 40 batches
	var hold, holding atomic.Bool
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	// Once 3 batches are done (both handlers have taken batches of the
	// big job), hold is set at once, before the big job's 37 others can
	// all be done.
	o := order{after: func(n int) {
		if n >= 3 {
			hold.Store(true)
		}
	}}
	w := e.worker(Options{Concurrency: 1, Observer: &o, NoService: true})
	w.solve = func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error) {
		// One handler at a time is held: the first to reach a big
		// puzzle once hold is set.
		if hold.Load() && bigSet[g.String()] && holding.CompareAndSwap(false, true) {
			held <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return sv.Solve(ctx, g, opts)
	}
	e.run(w)
	// Both handlers have taken batches of the big job: its lane is not new
	// to the worker any more. Then one handler's big batch is held in work:
	// the regular handler's, or, if the lane's first batch was still in
	// work, the lane's (the regular handler then takes the small job's
	// turn). Without the lane, the one handler would be held.
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no batch of the big job reached the solver")
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	small := e.submit(puzzles[200:205], 5)
	rs, rec := e.follow(small, 30*time.Second)
	check(t, puzzles[200:205], rs)
	if rec.State != job.Finished {
		t.Errorf("small job %+v", rec)
	}
	close(release)
	released = true
	rs, rec = e.follow(big, 60*time.Second)
	check(t, puzzles[:200], rs)
	if rec.State != job.Finished || rec.DoneBatches != 40 {
		t.Errorf("big job %+v", rec)
	}
}

// TestPriorityShares checks that jobs with work share a worker in
// proportion to their priorities' weights (1:2:4), over a fixed number of
// batches, and that none is starved.
func TestPriorityShares(t *testing.T) {
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
	ids := map[string]job.Priority{}
	for i, p := range job.Priorities {
		ids[e.submitWith(puzzles[i*100:(i+1)*100], 2, p)] = p // 50 batches each
	}
	var o order
	e.run(e.worker(Options{Concurrency: 1, Observer: &o, NoService: true}))
	const n = 70
	got := o.wait(t, n, 30*time.Second)[:n]
	share := map[job.Priority]int{}
	for _, h := range got {
		share[ids[h.job]]++
	}
	// 70 batches at weights 1:2:4 are 10, 20 and 40.
	for p, want := range map[job.Priority]int{job.PriorityLow: 10, job.PriorityNormal: 20, job.PriorityHigh: 40} {
		if d := share[p] - want; d < -2 || d > 2 {
			t.Errorf("priority %s got %d of the first %d batches, want %d±2 (shares %v)", p, share[p], n, want, share)
		}
	}
	// Then each finishes.
	for id := range ids {
		e.follow(id, 60*time.Second)
	}
}

// submitAs submits puzzles as owner, in batches of size, with priority p.
func (e *env) submitAs(owner string, puzzles []string, size int, p job.Priority) string {
	e.t.Helper()
	pr := producer.New(e.q.Queue, e.cache, producer.Options{BatchSize: size, FirstBatch: size, Priority: p, Owner: owner, Logger: quiet})
	sub, err := pr.Submit(context.Background(), input.NewReader(strings.NewReader(strings.Join(puzzles, "\n"))))
	if err != nil {
		e.t.Fatal(err)
	}
	return sub.ID
}

// TestOwnerShares checks that turns are between owners, not jobs: alice,
// who split her work into ten jobs, and bob, with one, each get half of a
// worker's batches, whatever the number of jobs; and an owner's high
// priority weighs against another owner as its weight.
func TestOwnerShares(t *testing.T) {
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
	owner := map[string]string{}
	for i := range 10 {
		owner[e.submitAs("alice", puzzles[i*10:(i+1)*10], 2, job.PriorityNormal)] = "alice" // 5 batches each
	}
	owner[e.submitAs("bob", puzzles[100:200], 2, job.PriorityNormal)] = "bob" // 50 batches
	owner[e.submitAs("carol", puzzles[200:300], 2, job.PriorityHigh)] = "carol"
	var o order
	e.run(e.worker(Options{Concurrency: 1, Observer: &o, NoService: true}))
	const n = 48
	got := o.wait(t, n, 30*time.Second)[:n]
	share := map[string]int{}
	for _, h := range got {
		share[owner[h.job]]++
	}
	// Weights 2 (alice), 2 (bob), 4 (carol, high): 12, 12 and 24 of 48.
	for who, want := range map[string]int{"alice": 12, "bob": 12, "carol": 24} {
		if d := share[who] - want; d < -2 || d > 2 {
			t.Errorf("%s got %d of the first %d batches, want %d±2 (shares %v)", who, share[who], n, want, share)
		}
	}
	for id := range owner {
		e.follow(id, 60*time.Second)
	}
}

// TestSmallJobBesideItsOwnersLargeOne checks that an owner's small job
// does not wait for the owner's own large job queued before it: they are
// in different lanes, which take turns.
func TestSmallJobBesideItsOwnersLargeOne(t *testing.T) {
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
	big := e.submitAs("alice", puzzles[:200], 2, job.PriorityNormal) // 100 batches
	small := e.submitAs("alice", puzzles[200:202], 2, job.PriorityNormal)
	var o order
	e.run(e.worker(Options{Concurrency: 1, Observer: &o, NoService: true}))
	got := o.wait(t, 6, 30*time.Second)
	pos := slices.IndexFunc(got, func(h handled) bool { return h.job == small })
	if pos < 0 || pos > 3 {
		t.Errorf("alice's small job's batch was taken %dth, want among the first 4, beside her large job's: %v", pos+1, got)
	}
	e.follow(small, 30*time.Second)
	e.follow(big, 60*time.Second)
}

// TestCancel checks that a cancelled job's pending work leaves the queue
// at once, that no batch of it goes to the dead letters, that its counts
// are exactly what was done, and that its results so far are readable.
func TestCancel(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
		id := e.submit(puzzles, 5) // 60 batches
		cancelled := make(chan producer.Status, 1)
		var o order
		var atCancel int // batches handled when Cancel returned
		o.after = func(n int) {
			if n == 3 {
				rec, err := producer.Cancel(ctx, e.q.Queue, id)
				if err != nil {
					t.Error(err)
				}
				atCancel = len(o.get())
				cancelled <- rec
			}
		}
		e.run(e.worker(Options{Concurrency: 1, Observer: &o, NoService: true}))
		rec := <-cancelled
		if rec.State != job.Cancelled || rec.Finished == nil {
			t.Fatalf("cancelled record %+v", rec)
		}
		// No batch of it is solved after the cancel but those in work
		// then (the handler's and those committing: 1 + 2 with one
		// handler); the rest leave the work stream, dropped unsolved.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			n, err := e.q.WorkLeft(ctx, id, e.lane(id))
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d batches of the cancelled job left in the work stream (%v)", n, err)
			}
		}
		// A batch acked when its consumer was already gone stays in the
		// stream, and comes back as stray work: its results stored, it is
		// acked again (counted once), not solved again. So batches are
		// counted by index.
		got := o.get()
		ackedBatches := map[uint64]bool{}
		for _, h := range got {
			switch h.outcome {
			case OutcomeAcked:
				ackedBatches[h.batch] = true
			case OutcomeDropped:
			default:
				t.Errorf("batch %+v, want it acked or dropped: no dead letter and no retry", h)
			}
		}
		if acked := len(ackedBatches); acked > atCancel+3 {
			t.Errorf("%d batches solved, %d when cancelled: want the job to stop: %v", acked, atCancel, got)
		}
		if dls := e.deadLetters(); len(dls) != 0 {
			t.Errorf("%d dead letters: %+v", len(dls), dls[0])
		}
		// The record counts exactly what was done: the results stored.
		final, _, err := job.NewStore(e.q.JS, e.q.Jobs).Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		stored := 0
		for i := range uint64(final.Batches) {
			if _, err := e.q.Results.GetLastMsgForSubject(ctx, e.q.Opts.ResultSubject(id, i)); err == nil {
				stored++
				if !final.HasDone(i) {
					t.Errorf("batch %d's results are stored but not counted", i)
				}
			}
		}
		if final.State != job.Cancelled || int(final.DoneBatches) != stored || final.LinesDone() != int64(5*stored) ||
			final.Counts[result.StatusUnique] != final.LinesDone() || stored < 3 {
			t.Errorf("record %+v; %d batches stored", final, stored)
		}
		// Its results so far are readable, then the reader says cancelled.
		var rs []result.Result
		_, err = producer.Follow(ctx, e.q.Queue, id, func(r result.Result) error { rs = append(rs, r); return nil },
			producer.FollowOptions{Logger: quiet})
		if !errors.Is(err, job.ErrCancelled) {
			t.Errorf("Follow of a cancelled job = %v, want ErrCancelled", err)
		}
		if int64(len(rs)) != final.LinesDone() {
			t.Errorf("Follow passed on %d results, want the %d done", len(rs), final.LinesDone())
		}
		for _, r := range rs {
			testenv.CheckSolution(t, puzzles[r.Line-1], r.Solution)
		}
	})
}

// TestPrioritiesWithinAnOwner checks that an owner's high-priority job
// gets its turns before the owner's low-priority job submitted earlier,
// while another owner has work too: over the first 30 batches alice, her
// weight that of her highest priority with work (4), has 20 and bob
// (normal, 2) 10; within alice's, her high job has 4 turns for each of
// her low job's (16 and 4); and her high job is done while her low job
// still has most of its batches.
func TestPrioritiesWithinAnOwner(t *testing.T) {
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
	low := e.submitAs("alice", puzzles[:100], 2, job.PriorityLow) // 50 batches each
	high := e.submitAs("alice", puzzles[100:200], 2, job.PriorityHigh)
	bob := e.submitAs("bob", puzzles[200:300], 2, job.PriorityNormal)
	name := map[string]string{low: "alice's low job", high: "alice's high job", bob: "bob's job"}
	var o order
	e.run(e.worker(Options{Concurrency: 1, Observer: &o, NoService: true}))
	const n = 30
	got := o.wait(t, n, 30*time.Second)[:n]
	share := map[string]int{}
	for _, h := range got {
		share[name[h.job]]++
	}
	for who, want := range map[string]int{"alice's high job": 16, "alice's low job": 4, "bob's job": 10} {
		if d := share[who] - want; d < -3 || d > 3 {
			t.Errorf("%s got %d of the first %d batches, want %d±3 (shares %v)", who, share[who], n, want, share)
		}
	}
	_, rec := e.follow(high, 60*time.Second)
	if rec.State != job.Finished {
		t.Fatalf("alice's high job: %+v", rec)
	}
	all := o.get()
	lowDone := 0
	for _, h := range all[:slices.IndexFunc(all, func(h handled) bool { return h.job == high && h.batch == 49 })+1] {
		if h.job == low {
			lowDone++
		}
	}
	// At 4:1, 50 batches of the high job go with about 12 of the low one.
	if lowDone > 25 {
		t.Errorf("alice's low job had %d of its 50 batches taken by the time her high job's last was: want it behind", lowDone)
	}
	e.follow(low, 60*time.Second)
	e.follow(bob, 60*time.Second)
}

// TestManyTinyJobsFewConsumers checks that consumers on the work stream
// go by lane, not by job: 2,000 jobs of one to three puzzles, of two
// owners at two priorities each (four lanes: each job fits in a batch),
// submitted while a worker runs, all finish, and the work stream never
// has more than a handful of consumers (at most 8), during the run or
// once every job has ended.
func TestManyTinyJobsFewConsumers(t *testing.T) {
	const jobs, maxConsumers = 2000, 8
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
	e.run(e.worker(Options{Concurrency: 2, NoService: true}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work, err := e.q.JS.Stream(ctx, e.q.Opts.Stream)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	consumers := func() int {
		info, err := work.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, info.State.Consumers)
		return info.State.Consumers
	}

	// Four submitters, an owner and a priority each; every puzzle goes
	// to the workers (Force), cached or not.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for k, sub := range []struct {
		owner string
		p     job.Priority
	}{{"alice", job.PriorityNormal}, {"alice", job.PriorityHigh}, {"bob", job.PriorityNormal}, {"bob", job.PriorityLow}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr := producer.New(e.q.Queue, e.cache, producer.Options{BatchSize: 4, Priority: sub.p, Owner: sub.owner,
				Force: true, Logger: quiet})
			for i := k; i < jobs; i += 4 {
				first := (i * 7) % 297
				in := strings.Join(puzzles[first:first+1+i%3], "\n")
				if _, err := pr.Submit(ctx, input.NewReader(strings.NewReader(in))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	submitted := make(chan struct{})
	go func() { wg.Wait(); close(submitted) }()
	store := job.NewStore(e.q.JS, e.q.Jobs)
	var byState map[job.State]int
	for done := false; !done; {
		select {
		case err := <-errs:
			t.Fatalf("submit: %v", err)
		case <-submitted:
			recs, err := store.List(ctx, "", 2*jobs, nil)
			if err != nil {
				t.Fatal(err)
			}
			byState = map[job.State]int{}
			for _, r := range recs {
				byState[r.State]++
			}
			done = byState[job.Finished] == jobs
		case <-time.After(50 * time.Millisecond):
		}
		consumers()
		if ctx.Err() != nil {
			t.Fatalf("the jobs not all finished after 5 minutes: %v", byState)
		}
		if !done {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if n := consumers(); n > maxConsumers || most > maxConsumers {
		t.Errorf("%d jobs ended leave %d consumers on the work stream, %d at most along the way; want at most %d",
			jobs, n, most, maxConsumers)
	}
	t.Logf("%d jobs finished; at most %d consumers on the work stream", jobs, most)
}
