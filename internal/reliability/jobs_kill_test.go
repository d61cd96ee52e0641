package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// The tests of this file strike the shared service of issue 21 (fair
// turns across jobs, priorities, cancel, a job finished by the worker
// that stores its last results) with worker SIGKILLs: a batch in a killed
// worker's hands is redelivered after the ack wait (or dropped, its job
// cancelled), and no batch may be lost or counted twice.

// killEnv are the settings of the workers of these tests: one handler
// each (and the first-batch lane), so that a worker holds few batches at
// a time (one solving, up to two committing), and more deliveries than
// kills, so that no batch goes to the dead letters for the kills.
var killEnv = []string{"SUDOKU_WORKER_CONCURRENCY=1", "SUDOKU_QUEUE_MAX_DELIVER=10"}

// crew is the worker processes of a test, each serving its metrics on a
// port of its own, which the test kills with SIGKILL and replaces.
type crew struct {
	s       *sys
	r       *rand.Rand
	live    []*member
	started int
	kills   int
	// lost is what the killed workers had counted of
	// sudoku_redeliveries_total, as read just before each kill.
	lost float64
}

// member is one worker of a crew.
type member struct {
	p    *proc
	addr string // of its /metrics
	// redelivered is its sudoku_redeliveries_total at the last look.
	redelivered float64
}

// newCrew starts n workers.
func (s *sys) newCrew(r *rand.Rand, n int) *crew {
	s.t.Helper()
	c := &crew{s: s, r: r}
	for range n {
		c.add()
	}
	return c
}

// add starts one more worker.
func (c *crew) add() *member {
	c.s.t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(c.s.t))
	m := &member{addr: addr, p: c.s.startWorker(fmt.Sprintf("worker-%d", c.started), "SUDOKU_METRICS_ADDR="+addr)}
	c.started++
	c.live = append(c.live, m)
	return m
}

// metrics reads the samples named exactly series from the /metrics of
// the worker serving on addr, in one scrape.
func metrics(addr string, series ...string) ([]float64, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make([]float64, len(series))
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for i, name := range series {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				if out[i], err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
					return nil, err
				}
				found++
			}
		}
	}
	if found != len(series) {
		return nil, fmt.Errorf("%s/metrics lacks some of %v", addr, series)
	}
	return out, sc.Err()
}

// holding waits up to a minute for a live worker with a batch in hand
// (sudoku_in_flight at least 1: from its delivery to its ack or drop,
// the commit included), looking at them in random order, and returns
// it, having noted its redeliveries so far.
func (c *crew) holding() *member {
	c.s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, i := range c.r.Perm(len(c.live)) {
			m := c.live[i]
			v, err := metrics(m.addr, "sudoku_redeliveries_total", "sudoku_in_flight")
			if err == nil && v[1] >= 1 {
				m.redelivered = v[0]
				return m
			}
		}
		if time.Now().After(deadline) {
			c.s.t.Fatal("no worker had a batch in hand for a minute")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// kill kills m with SIGKILL (m.redelivered read just before).
func (c *crew) kill(m *member) {
	c.s.t.Helper()
	m.p.kill()
	c.kills++
	c.lost += m.redelivered
	c.live = slices.DeleteFunc(c.live, func(x *member) bool { return x == m })
}

// killAll kills every live worker at once (their redeliveries as last
// read).
func (c *crew) killAll() {
	c.s.t.Helper()
	for _, m := range slices.Clone(c.live) {
		c.kill(m)
	}
}

// redeliveries returns the messages handled that had been delivered
// before, over every worker of the crew: the live ones' counters, and
// the killed ones' as read before their kill. It fails the test when a
// live worker does not answer.
func (c *crew) redeliveries() float64 {
	c.s.t.Helper()
	n := c.lost
	for _, m := range c.live {
		v, err := metrics(m.addr, "sudoku_redeliveries_total")
		if err != nil {
			c.s.t.Fatalf("%s: %v", m.p.name, err)
		}
		n += v[0]
	}
	return n
}

// idle reports whether no live worker has a batch in hand.
func (c *crew) idle() bool {
	for _, m := range c.live {
		v, err := metrics(m.addr, "sudoku_in_flight")
		if err != nil || v[0] != 0 {
			return false
		}
	}
	return true
}

// warnings returns the lines of the workers still running that log a
// batch dead-lettered or handed back as failed (which a kill, a
// redelivery or a cancel must not cause).
func (c *crew) warnings() []string {
	var out []string
	for _, m := range c.live {
		for _, sub := range []string{"moved to the dead-letter stream", "batch failed"} {
			out = append(out, lines(m.p.stderr.String(), sub)...)
		}
	}
	return out
}

// held says how many batches of the lanes of jobs are delivered and not
// acked (a lane's consumer counts those of all its jobs): right after a
// kill, those of the killed workers among them.
func (s *sys) held(jobs ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := s.q.Backlog(ctx)
	if err != nil {
		return err.Error()
	}
	var parts []string
	seen := map[string]bool{}
	for _, id := range jobs {
		name, err := s.q.JobConsumer(ctx, id)
		if err != nil {
			parts = append(parts, err.Error())
			continue
		}
		if !seen[name] {
			seen[name] = true
			parts = append(parts, fmt.Sprintf("%d in lane %s (job %s)", b.Lanes[name].AckPending, name, id))
		}
	}
	return strings.Join(parts, ", ")
}

// record returns job id's record and its revision in the jobs bucket.
func (s *sys) record(id string) (job.Record, uint64) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, rev, err := job.NewStore(s.q.JS, s.q.Jobs).Get(ctx, id)
	if err != nil {
		s.t.Fatalf("job %s: %v", id, err)
	}
	return rec, rev
}

// waitState waits up to d for job id's record to say state, polling the
// record alone (producer.JobStatus), and returns its status.
func (s *sys) waitState(id string, state job.State, d time.Duration) producer.Status {
	s.t.Helper()
	var st producer.Status
	deadline := time.Now().Add(d)
	for {
		st = s.status(id)
		if st.State == state {
			return st
		}
		if st.State.Ended() || time.Now().After(deadline) {
			s.t.Fatalf("job %s is %s, not %s, after %v:\n%s", id, st.State, state, d, s.describe(id))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordLog is what a watch of the jobs bucket saw of the job records,
// in the order the bucket took them.
type recordLog struct {
	mu   sync.Mutex
	seen []seenRecord
}

type seenRecord struct {
	rev uint64
	rec job.Record
}

// watchRecords watches the test's job records until the test ends. The
// bucket keeps one revision of a key: a watch that falls behind misses
// revisions overwritten meanwhile, but every record it sees was written,
// at the revision it says.
func (s *sys) watchRecords() *recordLog {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// Records only: their keys are job ids, "owner.serial" (a
	// manifest's has four tokens).
	w, err := s.q.Jobs.Watch(ctx, "*.*", jetstream.UpdatesOnly())
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	l := &recordLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				if rec, err := job.DecodeRecord(e.Value()); err == nil {
					l.mu.Lock()
					l.seen = append(l.seen, seenRecord{e.Revision(), rec})
					l.mu.Unlock()
				}
			}
		}
	}()
	s.t.Cleanup(func() {
		cancel()
		_ = w.Stop()
		<-done
	})
	return l
}

// after returns the first record of job id the watch saw at a revision
// above rev, and whether it saw one.
func (l *recordLog) after(id string, rev uint64) (seenRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sr := range l.seen {
		if sr.rev > rev && sr.rec.ID == id {
			return sr, true
		}
	}
	return seenRecord{}, false
}

// other returns the id of the first job the watch saw other than id, or
// "".
func (l *recordLog) other(id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sr := range l.seen {
		if sr.rec.ID != id {
			return sr.rec.ID
		}
	}
	return ""
}

// saw reports whether the watch saw job id in state st.
func (l *recordLog) saw(id string, st job.State) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sr := range l.seen {
		if sr.rec.ID == id && sr.rec.State == st {
			return true
		}
	}
	return false
}

// TestFairnessSurvivesSIGKILL runs a big job (1800 batches) on two
// workers, kills one with a batch in hand (and starts another), submits a
// small job (20 batches), and kills every worker once a batch of the
// small job is in a worker's hands (starting two more). The small job
// still gets its turns: it finishes, with exact counts, while the big job
// has batches left. The order is that of the jobs bucket, which takes
// every record update in turn: the first record of the big job written
// after the small job's finished one (as read once finished: the
// revision of its end or a later one) still has batches to do. Then the
// big job finishes too with exact counts and one result per puzzle, the
// killed workers' batches were redelivered (the workers' redelivery
// counters) and counted once, nothing is left in the queue and nothing
// went to the dead letters.
func TestFairnessSurvivesSIGKILL(t *testing.T) {
	const bigN, smallN = 36000, 400
	// The small job's batches killed in hand come back after the ack
	// wait, with the big job running meanwhile: a short one keeps the
	// big job's lead small, so that it still has work left then on a
	// fast machine without the race detector (on a slow one, or with it,
	// the big job is slower too).
	s := newSys(t, options{env: append(slices.Clone(killEnv), "SUDOKU_QUEUE_ACK_WAIT=1s")})
	r := rng(t)
	bigFile, bigPuzzles := genFile(t, hardest, bigN, 21)
	smallFile, smallPuzzles := genFile(t, hardest, smallN, 22)
	watched := s.watchRecords()
	big := s.submit(bigFile)
	c := s.newCrew(r, 2)

	// A kill while the big job runs alone.
	s.waitFor("the big job under way", 2*time.Minute, func() bool { return s.batchesDone(big) >= 20+r.IntN(20) })
	m := c.holding()
	c.kill(m)
	t.Logf("SIGKILL %s with %d batches of the big job done; in the killed worker's hands and the other's: %s",
		m.p.name, s.batchesDone(big), s.held(big))
	c.add()

	// The small job, and a kill of every worker once one holds a batch
	// of it (or, should the test never see one in hand, once half of it
	// is done). The workers' redeliveries are read before, so as to kill
	// them at once: any counted between are left out, which can only
	// make the check of redeliveries below stricter.
	// The test learns of the small job from its record, created before
	// its first batch is published (the workers may be done with it by
	// the time the submitting process has exited).
	for _, m := range c.live {
		if v, err := metrics(m.addr, "sudoku_redeliveries_total"); err == nil {
			m.redelivered = v[0]
		}
	}
	submitter := s.start("submit small", nil, "submit", smallFile)
	var small string
	s.waitFor("the small job's record", time.Minute, func() bool { small = watched.other(big); return small != "" })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The small job is larger than a batch: it goes to a big slot of the
	// owner, the least busy, so not the big job's. Its lane is its own,
	// and what its consumer holds in work is the small job's.
	smallLane, bigLane := s.lane(small), s.lane(big)
	if smallLane == bigLane {
		t.Fatalf("the small job is in the big job's lane %s: it would wait for it", bigLane)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		cons, err := s.q.JS.Consumer(ctx, s.q.Opts.Stream, s.q.Opts.LaneConsumer(smallLane))
		if err == nil && cons.CachedInfo().NumAckPending > 0 || s.batchesDone(small) >= smallN/s.batchSize/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no batch of the small job in a worker's hands after a minute:\n%s", s.describe(small))
		}
	}
	c.killAll()
	t.Logf("SIGKILL every worker with %d batches of the big job and %d of the small one done; in their hands: %s",
		s.batchesDone(big), s.batchesDone(small), s.held(big, small))
	c.add()
	c.add()
	if code := submitter.wait(2 * time.Minute); code != cli.ExitOK || strings.TrimSpace(submitter.stdout.String()) != small {
		t.Fatalf("submit of the small job: exit %d, printed %q, want %s", code, submitter.stdout.String(), small)
	}

	// The small job finishes, without a reader, before the big one.
	s.waitState(small, job.Finished, 2*time.Minute)
	smallRec, smallRev := s.record(small)
	s.waitState(big, job.Finished, 5*time.Minute)
	bigRec, bigRev := s.record(big)
	s.waitFor("the watch to see the big job finished", 30*time.Second, func() bool { return watched.saw(big, job.Finished) })
	next, ok := watched.after(big, smallRev)
	if !ok || next.rec.DoneBatches >= next.rec.Batches || next.rec.State != job.Published {
		t.Fatalf("the small job finished at revision %d of the jobs bucket, the big one at %d; the big job's next record: "+
			"%s, %d of %d batches done (seen %v): the small job waited for it to drain (or the big job is too short for "+
			"this machine: the small one waits an ack wait for its batches killed in hand)",
			smallRev, bigRev, next.rec.State, next.rec.DoneBatches, next.rec.Batches, ok)
	}
	t.Logf("the small job finished (revision %d of the jobs bucket, or before) with the big job at %d of %d batches (revision %d)",
		smallRev, next.rec.DoneBatches, next.rec.Batches, next.rev)
	if _, rev := s.record(small); rev != smallRev {
		t.Errorf("the small job's finished record was written again (revision %d, then %d): %+v", smallRev, rev, smallRec)
	}

	// Exact counts, every result once, nothing left, nothing dead.
	s.checkJob(small, want{lines: smallN, queued: smallN})
	s.checkJob(big, want{lines: bigN, queued: bigN})
	for _, j := range []struct {
		id      string
		puzzles []string
	}{{small, smallPuzzles}, {big, bigPuzzles}} {
		code, out, stderr := s.run(2*time.Minute, "", "job", "wait", j.id)
		if code != cli.ExitOK {
			t.Fatalf("job wait %s: exit %d: %s", j.id, code, tail(stderr, 20))
		}
		checkSolutions(t, j.puzzles, out)
	}
	s.checkDrained()
	if w := c.warnings(); len(w) > 0 {
		t.Errorf("the workers logged batches failed or dead-lettered:\n%s", strings.Join(w, "\n"))
	}
	red := c.redeliveries()
	if red < 1 {
		t.Errorf("no batch was redelivered after %d kills of workers with batches in hand", c.kills)
	}
	t.Logf("%d kills, %v redeliveries; big job %s: %d batches, small job %s: %d batches, each finished with exact counts",
		c.kills, red, big, bigRec.Batches, small, smallRec.Batches)
}

// cancelledRe is what `sudoku job cancel` says of a job it cancelled.
var cancelledRe = regexp.MustCompile(`(?m)^job ([A-Za-z0-9_-]+\.[0-9a-v]{26}) cancelled: (\d+) of (\d+) lines done$`)

// TestCancelSurvivesSIGKILL cancels a running job around the SIGKILL of
// a worker with a batch in hand: killed then cancelled (with `sudoku job
// cancel`), and cancelled then killed (with producer.Cancel, the moment
// after: a command takes longer to start than a batch to solve). Either
// way, once the batches the workers held are done and the sweep has
// dropped the job's leftover work: the record says cancelled and stays
// so, its counts sum to its lines done and are exactly the results stored
// (each batch with results counted once, none counted without them, their
// Sudoku-Counts headers adding up to the record's counts); the job's work
// has left the work stream (nothing of it left in its lane), and its
// lane, without an active job, loses its consumer once idle (a worker
// drops it: queue.Queue.DropIdleLane); nothing went to the dead letters; and `job wait` writes exactly the lines done, each the
// solution of its puzzle, then exits with status 3 (cli.ExitCancelled).
func TestCancelSurvivesSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name      string
		killFirst bool
	}{
		{"kill then cancel", true},
		{"cancel then kill", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 8000
			// Batches of 100 hard puzzles, long enough for a kill to
			// find one in hand.
			s := newSys(t, options{env: append(slices.Clone(killEnv), "SUDOKU_QUEUE_BATCH_SIZE=100")})
			r := rng(t)
			file, puzzles := genFile(t, hardest, n, 31)
			id := s.submit(file)
			lane := s.lane(id)
			c := s.newCrew(r, 2)
			s.waitFor("the job under way", 2*time.Minute, func() bool { return s.batchesDone(id) >= 10+r.IntN(10) })

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			victim := c.holding()
			if tc.killFirst {
				c.kill(victim)
				t.Logf("SIGKILL %s with %d batches done; in its hands and the other's: %s", victim.p.name, s.batchesDone(id), s.held(id))
				_, stderr := s.mustRun(cli.ExitOK, "job", "cancel", id)
				m := cancelledRe.FindStringSubmatch(stderr)
				if m == nil || m[1] != id || m[3] != strconv.Itoa(n) {
					t.Fatalf("job cancel %s said:\n%s", id, stderr)
				}
				t.Logf("job cancel: %s", m[0])
			} else {
				rec, err := producer.Cancel(ctx, s.q, id)
				if err != nil || rec.State != job.Cancelled {
					t.Fatalf("cancel: %+v, %v", rec, err)
				}
				c.kill(victim)
				left, _ := s.q.WorkLeft(ctx, id, lane)
				t.Logf("cancelled with %d lines done, then SIGKILL %s; %d messages of the job left in the work stream",
					rec.Done, victim.p.name, left)
			}
			c.add()

			// The batches in the live workers' hands end (finished or
			// dropped), and the sweep drops those left in the work
			// stream: the killed worker's among them.
			s.waitFor("the job's work gone and the workers idle", time.Minute, func() bool {
				left, err := s.q.WorkLeft(ctx, id, lane)
				return err == nil && left == 0 && c.idle()
			})
			rec, rev := s.record(id)
			if rec.State != job.Cancelled || rec.Finished.IsZero() {
				t.Fatalf("record after the cancel: %+v", rec)
			}
			if rec.DoneBatches >= rec.Batches {
				t.Fatalf("the job finished (%d of %d batches) before the cancel: make it longer", rec.DoneBatches, rec.Batches)
			}
			// Counted exactly: the record against the results stream.
			batches, counts := s.tally(id)
			for i := range uint64(rec.Batches) {
				if batches[i] != rec.HasDone(i) {
					t.Errorf("batch %d: results stored %v, counted %v", i, batches[i], rec.HasDone(i))
				}
			}
			st := s.status(id)
			if int64(len(batches)) != rec.DoneBatches || st.BatchesDone != rec.DoneBatches ||
				counts.String() != job.Counts(rec.Counts).String() ||
				st.Done != rec.LinesDone() || rec.Counts[result.StatusUnique] != rec.LinesDone() {
				t.Errorf("record: %d batches done, counts %v (%d lines done); status: %d batches, %d lines; "+
					"results stream: %d batches, counts %v", rec.DoneBatches, job.Counts(rec.Counts), rec.LinesDone(),
					st.BatchesDone, st.Done, len(batches), counts)
			}
			// The lane has no other job: a worker drops its consumer
			// once it has been without one for a while (30 s).
			s.waitFor("the cancelled job's lane's consumer dropped", 2*time.Minute, func() bool {
				_, err := s.q.JS.Consumer(ctx, s.q.Opts.Stream, s.q.Opts.LaneConsumer(lane))
				return errors.Is(err, jetstream.ErrConsumerNotFound)
			})

			// job wait writes what was done, then says cancelled.
			code, out, stderr := s.run(2*time.Minute, "", "job", "wait", "--format", "jsonl", id)
			if code != cli.ExitCancelled {
				t.Fatalf("job wait of the cancelled job: exit %d, want %d; stderr:\n%s", code, cli.ExitCancelled, tail(stderr, 20))
			}
			if !strings.Contains(stderr, "cancelled") {
				t.Errorf("job wait of the cancelled job does not say it was cancelled:\n%s", tail(stderr, 10))
			}
			checkCancelledOutput(t, puzzles, out, rec.LinesDone())

			s.checkDrained()
			if w := c.warnings(); len(w) > 0 {
				t.Errorf("the workers logged batches failed or dead-lettered:\n%s", strings.Join(w, "\n"))
			}
			if after, rev2 := s.record(id); rev2 != rev {
				t.Errorf("the cancelled job's record changed after its work was gone: %+v", after)
			}
			t.Logf("job %s cancelled with %d of %d batches counted (%d of %d lines), %d with results stored; job wait exit %d",
				id, rec.DoneBatches, rec.Batches, rec.LinesDone(), rec.Lines, len(batches), code)
		})
	}
}

// checkCancelledOutput checks the JSON lines a `job wait` of a cancelled
// job wrote: want of them, each of a different line, in order, and each
// the solution of its puzzle.
func checkCancelledOutput(t *testing.T, puzzles []string, out string, want int64) {
	t.Helper()
	var got int64
	last := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("job wait wrote %q: %v", sc.Text(), err)
		}
		if r.Line <= last || r.Line > len(puzzles) {
			t.Fatalf("job wait wrote line %d after line %d (of %d)", r.Line, last, len(puzzles))
		}
		last = r.Line
		if err := isSolution(puzzles[r.Line-1], r.Solution); err != nil || r.Status != result.StatusUnique {
			t.Fatalf("line %d (%s): %v", r.Line, r.Status, err)
		}
		got++
	}
	if got != want {
		t.Fatalf("job wait wrote %d results, want the %d lines done", got, want)
	}
}

// TestNoReaderFinishesDespiteSIGKILL submits a job that nobody reads (no
// `job wait`, ever), and kills a worker with a batch in hand three times
// in its course, starting another each time: the record still reaches
// finished, by the workers alone, with exact counts; its batches killed
// in hand were redelivered and counted once; nothing is left in the
// queue.
func TestNoReaderFinishesDespiteSIGKILL(t *testing.T) {
	const n, kills = 8000, 3
	s := newSys(t, options{env: killEnv})
	r := rng(t)
	file, _ := genFile(t, hardest, n, 41)
	id := s.submit(file)
	batches := s.status(id).Batches
	c := s.newCrew(r, 2)
	for k := range kills {
		// Points spread over the job, each moved at random by up to 5%,
		// the last at about the middle: redelivery takes the ack wait.
		frac := (float64(k)+1)/(2*kills) + (r.Float64()-0.5)/10
		target := int(frac * float64(batches))
		s.waitFor(fmt.Sprintf("job %s at %d batches done", id, target), 2*time.Minute, func() bool {
			return s.batchesDone(id) >= target
		})
		m := c.holding()
		c.kill(m)
		t.Logf("SIGKILL %s with %d of %d batches done; in its hands and the other's: %s", m.p.name, s.batchesDone(id), batches, s.held(id))
		c.add()
	}
	if d := s.batchesDone(id); int64(d) >= batches {
		t.Fatalf("the job finished (%d batches done) before the last kill: make it longer", d)
	}
	s.waitState(id, job.Finished, 3*time.Minute)
	st := s.checkJob(id, want{lines: n, queued: n})
	status, _ := s.mustRun(cli.ExitOK, "job", "status", id)
	if !strings.Contains(status, "state     finished") {
		t.Errorf("job status:\n%s", status)
	}
	s.checkDrained()
	if w := c.warnings(); len(w) > 0 {
		t.Errorf("the workers logged batches failed or dead-lettered:\n%s", strings.Join(w, "\n"))
	}
	red := c.redeliveries()
	if red < 1 {
		t.Errorf("no batch was redelivered after %d kills of workers with batches in hand", c.kills)
	}
	t.Logf("%d kills, %v redeliveries; job %s finished without a reader: %d puzzles in %d batches, each counted once",
		c.kills, red, id, st.Lines, st.Batches)
}

// TestPrioritySharesSurviveSIGKILL submits a job of each priority (low,
// normal, high: weights 1, 2, 4), each with more batches than the test
// counts, before any worker runs; two workers share themselves between
// them, one is killed with a batch in hand early in the count and
// another started. Over the first 140 batches done (the workers' events,
// in the order the test receives them) the shares are those of the
// weights, 20, 40 and 80, within ±25%, and each priority has at least a
// dozen. Why the bounds hold: each worker's stride schedule gives each job
// its share within a batch; the two workers' events interleave; the
// killed worker's batch comes back only after the ack wait (one batch
// short for its job); the new worker starts every job at the same pass,
// so its first turns are shared by weight too; each worker's first-batch
// lane takes one batch of each job out of turn; and the window's edges
// cut at most a batch or two of each worker. That is a few batches off
// at most, where ±25% allows 5, 10 and 20. Then every job finishes with
// exact counts.
func TestPrioritySharesSurviveSIGKILL(t *testing.T) {
	const per, window, killAt = 1500, 140, 30
	// Batches of 10: 150 a job, more than the 80 of the high one's
	// share.
	s := newSys(t, options{env: append(slices.Clone(killEnv), "SUDOKU_QUEUE_BATCH_SIZE=10")})
	r := rng(t)
	prio := map[string]job.Priority{}
	var ids []string
	for i, p := range job.Priorities {
		file, _ := genFile(t, hardest, per, uint64(51+i))
		out, _ := s.mustRun(cli.ExitOK, "submit", "--priority", string(p), file)
		id := strings.TrimSpace(out)
		if !job.ValidID(id) {
			t.Fatalf("submit printed %q, not a job id", out)
		}
		prio[id] = p
		ids = append(ids, id)
	}

	// The workers' events: one per batch they store and ack.
	type done struct {
		job   string
		batch uint64
	}
	events := make(chan done, 10*per)
	sub, err := s.nc.Subscribe(s.q.Opts.EventsFilter(), func(m *nats.Msg) {
		var e queue.Event
		if json.Unmarshal(m.Data, &e) == nil {
			select {
			case events <- done{e.Job, e.Batch}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	c := s.newCrew(r, 2)
	seen := map[done]bool{}
	share := map[job.Priority]int{}
	timeout := time.After(3 * time.Minute)
	for len(seen) < window {
		select {
		case e := <-events:
			if p, ok := prio[e.job]; ok && !seen[e] {
				seen[e] = true
				share[p]++
			}
		case <-timeout:
			t.Fatalf("%d batches done after 3 minutes, want %d", len(seen), window)
		}
		if len(seen) == killAt {
			m := c.holding()
			c.kill(m)
			t.Logf("SIGKILL %s after %d batches; in its hands and the other's: %s", m.p.name, killAt, s.held(ids...))
			c.add()
		}
	}
	t.Logf("shares of the first %d batches: %v", window, share)
	for p, w := range map[job.Priority]int{job.PriorityLow: 20, job.PriorityNormal: 40, job.PriorityHigh: 80} {
		lo, hi := w-w/4, w+w/4
		if share[p] < lo || share[p] > hi || share[p] < 12 {
			t.Errorf("priority %s had %d of the first %d batches, want %d..%d (and at least 12)", p, share[p], window, lo, hi)
		}
	}

	for _, id := range ids {
		s.waitState(id, job.Finished, 3*time.Minute)
		s.checkJob(id, want{lines: per, queued: per})
	}
	s.checkDrained()
	if w := c.warnings(); len(w) > 0 {
		t.Errorf("the workers logged batches failed or dead-lettered:\n%s", strings.Join(w, "\n"))
	}
	t.Logf("%d kills, %v redeliveries; 3 jobs of %d puzzles finished with exact counts", c.kills, c.redeliveries(), per)
}
