package reliability

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// TestManySmallJobsOfTwoOwnersSurviveSIGKILL has two owners submit many
// small jobs each, at once, of two priorities (most of one batch, the
// owner's small lane; some of a few batches, in its big slots), while
// two worker processes work through them and are SIGKILLed with a batch
// in hand twice, another started each time. Every job finishes with
// every result the solution of its puzzle and exact counts; nothing is
// lost, left in the queue or dead-lettered; no record is left active;
// and the consumers on the work stream, looked at all along, never
// outnumber the lanes the jobs went to (at most 2 owners x 2 priorities
// x 4 slots = 16), whatever the number of jobs.
func TestManySmallJobsOfTwoOwnersSurviveSIGKILL(t *testing.T) {
	const perOwner = 100
	owners := []string{"alice", "bob"}
	priorities := []job.Priority{job.PriorityNormal, job.PriorityHigh}
	maxLanes := len(owners) * len(priorities) * (1 + queue.BigSlots)
	s := newSys(t, options{env: killEnv})
	r := rng(t)

	// The jobs, drawn before anything runs: sizes of 1 to a batch (20)
	// mostly, every 8th of 2 to 3 batches; distinct hard puzzles, so that
	// a worker holds a batch long enough to be killed with it.
	type plan struct {
		owner    string
		priority job.Priority
		puzzles  []string
	}
	var plans []plan
	total := 0
	for i := range perOwner * len(owners) {
		n := 1 + r.IntN(s.batchSize)
		if i%8 == 7 {
			n = s.batchSize + 1 + r.IntN(2*s.batchSize)
		}
		plans = append(plans, plan{owner: owners[i%len(owners)], priority: priorities[r.IntN(len(priorities))]})
		plans[i].puzzles = make([]string, n)
		total += n
	}
	_, puzzles := genFile(t, hardest, total, 61)
	k := 0
	for i := range plans {
		k += copy(plans[i].puzzles, puzzles[k:k+len(plans[i].puzzles)])
	}

	watched := s.watchRecords()
	c := s.newCrew(r, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Each owner submits its jobs, one after the other, both at once
	// (in this process: a producer per owner and priority).
	ids := make([]string, len(plans))
	var wg sync.WaitGroup
	for _, owner := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prs := map[job.Priority]*producer.Producer{}
			for _, p := range priorities {
				prs[p] = producer.New(s.q, nil, producer.Options{BatchSize: s.batchSize, FirstBatch: s.batchSize,
					Priority: p, Owner: owner, Logger: quiet})
			}
			for i, pl := range plans {
				if pl.owner != owner {
					continue
				}
				sub, err := prs[pl.priority].Submit(ctx, input.NewReader(strings.NewReader(strings.Join(pl.puzzles, "\n"))))
				if err != nil {
					t.Errorf("%s: submit job %d: %v", owner, i, err)
					return
				}
				ids[i] = sub.ID
			}
		}()
	}
	submitted := make(chan struct{})
	go func() { wg.Wait(); close(submitted) }()

	// Two kills, at about a quarter and at about two thirds of the jobs
	// finished, while the consumers are counted all along.
	maxConsumers := 0
	countConsumers := func() {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		defer acancel()
		if work, err := s.q.JS.Stream(actx, s.q.Opts.Stream); err == nil {
			maxConsumers = max(maxConsumers, work.CachedInfo().State.Consumers)
		}
	}
	kills := []int{len(plans) / 4, 2 * len(plans) / 3}
	deadline := time.Now().Add(5 * time.Minute)
	for done := false; !done; time.Sleep(20 * time.Millisecond) {
		countConsumers()
		finished := watched.count(job.Finished)
		if len(kills) > 0 && finished >= kills[0] {
			m := c.holding()
			c.kill(m)
			t.Logf("SIGKILL %s with %d of %d jobs finished", m.p.name, finished, len(plans))
			c.add()
			kills = kills[1:]
		}
		select {
		case <-submitted:
			done = finished == len(plans) && len(kills) == 0
		default:
		}
		if t.Failed() {
			t.FailNow()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs finished after 5 minutes, %d kills left to do", finished, len(plans), len(kills))
		}
	}
	if c.kills != 2 {
		t.Fatalf("%d kills, want 2", c.kills)
	}

	// Every job: each result the solution of its puzzle, once, and exact
	// counts, read from JetStream apart from the record.
	lanes := map[queue.Lane]bool{}
	for i, id := range ids {
		pl := plans[i]
		if job.OwnerOf(id) != pl.owner {
			t.Fatalf("job %d of %s has the id %q", i, pl.owner, id)
		}
		var rs []result.Result
		rec, err := producer.Follow(ctx, s.q, id, func(r result.Result) error { rs = append(rs, r); return nil },
			producer.FollowOptions{Logger: quiet})
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		l := queue.LaneOf(&rec)
		if l.Priority != pl.priority {
			t.Errorf("job %s of priority %s is in lane %s", id, pl.priority, l)
		}
		lanes[l] = true
		if len(rs) != len(pl.puzzles) {
			t.Fatalf("job %s: %d results for %d puzzles", id, len(rs), len(pl.puzzles))
		}
		for j, res := range rs {
			if res.Line != j+1 || res.Status != result.StatusUnique {
				t.Fatalf("job %s: result %d: %+v", id, j, res)
			}
			if err := isSolution(pl.puzzles[j], res.Solution); err != nil {
				t.Fatalf("job %s line %d: %v", id, j+1, err)
			}
		}
		n := int64(len(pl.puzzles))
		s.checkJob(id, want{lines: n, queued: n})
	}
	s.checkDrained()

	// No record left active, and one for each job.
	recs, err := job.NewStore(s.q.JS, s.q.Jobs).List(ctx, "", 10*len(plans), nil)
	if err != nil {
		t.Fatal(err)
	}
	byState := map[job.State]int{}
	for _, rec := range recs {
		byState[rec.State]++
		if !slices.Contains(ids, rec.ID) {
			t.Errorf("a record of no job of the test: %s", rec.ID)
		}
	}
	if byState[job.Finished] != len(plans) || len(recs) != len(plans) {
		t.Errorf("records by state: %v, want %d finished", byState, len(plans))
	}
	countConsumers()
	if maxConsumers > len(lanes) || len(lanes) > maxLanes {
		t.Errorf("up to %d consumers on the work stream for %d jobs in %d lanes; want at most one a lane (and at most %d lanes)",
			maxConsumers, len(plans), len(lanes), maxLanes)
	}
	if w := c.warnings(); len(w) > 0 {
		t.Errorf("the workers logged batches failed or dead-lettered:\n%s", strings.Join(w, "\n"))
	}
	red := c.redeliveries()
	if red < 1 {
		t.Errorf("no batch was redelivered after %d kills of workers with batches in hand", c.kills)
	}
	t.Logf("%d jobs of %s (%d puzzles) in %d lanes finished with exact counts through %d kills (%v redeliveries); "+
		"at most %d consumers on the work stream", len(plans), strings.Join(owners, " and "), total, len(lanes), c.kills, red,
		maxConsumers)
}

// count returns the number of jobs the watch saw in state st.
func (l *recordLog) count(st job.State) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := map[string]bool{}
	for _, sr := range l.seen {
		if sr.rec.State == st {
			ids[sr.rec.ID] = true
		}
	}
	return len(ids)
}

// quiet discards the logs of the producers the tests run in their own
// process.
var quiet = slog.New(slog.DiscardHandler)
