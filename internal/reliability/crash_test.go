package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// TestWorkerSIGKILL kills workers with SIGKILL at random points of a job,
// several times, starting a new one each time: the job completes, every
// puzzle has exactly one result, and the counts are exact.
func TestWorkerSIGKILL(t *testing.T) {
	const n, kills = 8000, 5
	// Every kill may cost a message in the victim's hands one delivery;
	// more deliveries than kills leave none short of them.
	s := newSys(t, options{env: []string{"SUDOKU_WORKER_CONCURRENCY=1", fmt.Sprintf("SUDOKU_QUEUE_MAX_DELIVER=%d", kills+3)}})
	r := rng(t)
	file, puzzles := genFile(t, hardest, n, 1)
	id := s.submit(file)
	batches := n / s.batchSize

	workers := []*proc{s.startWorker("worker-0"), s.startWorker("worker-1")}
	started := 2
	for k := range kills {
		// Points spread over the job, each moved at random by up to 5%.
		frac := (float64(k)+1)/(kills+2) + (r.Float64()-0.5)/10
		target := int(frac * float64(batches))
		s.waitFor(fmt.Sprintf("job %s to reach %d batches done", id, target), time.Minute, func() bool {
			return s.batchesDone(id) >= target
		})
		// Sometimes at once, sometimes a moment later: in the middle of a
		// solve, a results publish or an ack.
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
		i := r.IntN(len(workers))
		workers[i].kill()
		t.Logf("SIGKILL %s with %d of %d batches done", workers[i].name, s.batchesDone(id), batches)
		workers[i] = s.startWorker(fmt.Sprintf("worker-%d", started))
		started++
	}
	if d := s.batchesDone(id); d >= batches {
		t.Fatalf("the job finished (%d batches done) before the last kill: make it longer", d)
	}

	code, out, stderr := s.run(2*time.Minute, "", "job", "wait", id)
	if code != cli.ExitOK {
		t.Fatalf("job wait: exit %d: %s", code, tail(stderr, 20))
	}
	checkSolutions(t, puzzles, out)
	checkSummary(t, stderr, id, fmt.Sprintf("%d unique", n))
	st := s.checkJob(id, want{lines: n, queued: n})
	s.checkDrained()
	t.Logf("%d kills; job %s: %d puzzles in %d batches, all unique, each counted once", kills, id, st.Lines, st.Batches)
}

// TestProducerSIGKILL kills a producer with SIGKILL while it publishes a
// job. The job's record says "publishing" and stops moving; its published
// batches are still processed; a `job wait` started right after the kill
// writes their results, in order, and then, once the record has had no
// heartbeat for job.StaleAfter, ends with exit status 1 saying the job
// failed because its producer stopped (it does not wait for ever), and
// the record says "failed" from then on. The same submit run again
// completes, with exactly the killed job's puzzles answered from the
// cache, and nothing stays in the queue.
func TestProducerSIGKILL(t *testing.T) {
	t.Parallel()
	const n = 30000
	// Batches of 10: 3000 messages to publish, enough to strike in the
	// middle of it.
	s := newSys(t, options{env: []string{"SUDOKU_QUEUE_BATCH_SIZE=10"}})
	r := rng(t)
	file, puzzles := genFile(t, clue17, n, 2)

	// No worker yet: the messages stay in the work stream, where the test
	// counts them.
	p := s.start("producer", nil, "submit", file)
	target := uint64(100 + r.IntN(1500))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s.waitFor(fmt.Sprintf("%d messages published", target), time.Minute, func() bool {
		str, err := s.q.JS.Stream(ctx, s.q.Opts.Stream)
		return err == nil && str.CachedInfo().State.Msgs >= target || p.exited()
	})
	p.kill()
	killedAt := time.Now()
	if p.code == 0 {
		t.Fatal("the producer finished before it could be killed: make the job longer")
	}
	str, err := s.q.JS.Stream(ctx, s.q.Opts.Stream)
	if err != nil {
		t.Fatal(err)
	}
	published := str.CachedInfo().State.Msgs
	recs, err := s.jobs(ctx)
	if err != nil || len(recs) != 1 {
		t.Fatalf("jobs after the kill: %v, %v", recs, err)
	}
	killed := recs[0]
	if killed.State != job.Publishing || killed.Lines >= n {
		t.Fatalf("the killed producer's job: %+v; want publishing, fewer than %d lines", killed, n)
	}
	t.Logf("SIGKILL producer after %d of %d batches published (job %s records %d lines, %d batches)",
		published, n/10, killed.ID, killed.Lines, killed.Batches)

	// Its published batches are processed, and a waiter gets their
	// results before it learns the job failed.
	s.startWorker("worker-0")
	s.startWorker("worker-1")
	waiter := s.start("job-wait", nil, "job", "wait", killed.ID)
	s.checkDrained()
	done := s.batchesDone(killed.ID)
	if done != int(published) {
		t.Errorf("%d batches of the killed job have results; %d were published", done, published)
	}
	solved := int64(done) * 10 // all its batches are full
	// The workers fill the cache after each ack: wait for the last writes.
	s.waitFor(fmt.Sprintf("%d solutions in the cache", solved), 10*time.Second, func() bool { return s.cached() == solved })

	// The same input again: every puzzle the killed job had solved comes
	// from the cache, exactly, and the rest from the workers.
	code, out, stderr := s.run(2*time.Minute, "", "submit", "--wait", file)
	if code != cli.ExitOK {
		t.Fatalf("second submit: exit %d: %s", code, tail(stderr, 20))
	}
	checkSolutions(t, puzzles, out)
	second := jobIDRe.FindStringSubmatch(stderr)[1]
	checkSummary(t, stderr, second, fmt.Sprintf("%d unique (%d from the workers, %d from the cache)", n, n-solved, solved))
	s.checkJob(second, want{lines: n, queued: n - solved, cached: solved})

	// The waiter wrote what there was, in order, then gave up on the job
	// once its record had had no heartbeat for job.StaleAfter.
	code = waiter.wait(job.StaleAfter + time.Minute)
	waited := time.Since(killedAt)
	werr := waiter.stderr.String()
	if code != cli.ExitFailure || !strings.Contains(werr, "job "+killed.ID+" failed and will never finish") ||
		!strings.Contains(werr, "its producer stopped publishing") {
		t.Fatalf("job wait of the killed job: exit %d after %v, want 1 saying it failed; stderr:\n%s", code, waited, tail(werr, 20))
	}
	if waited < job.StaleAfter-job.HeartbeatEvery {
		t.Errorf("job wait gave up %v after the kill, before the record could be stale (%v)", waited, job.StaleAfter)
	}
	checkSolutions(t, puzzles[:solved], waiter.stdout.String())
	st := s.status(killed.ID)
	if st.State != job.Failed || !strings.Contains(st.Error, "its producer stopped publishing") || st.Done != solved {
		t.Errorf("the killed job after job wait: %+v", st)
	}
	status, _ := s.mustRun(cli.ExitOK, "job", "status", killed.ID)
	if !strings.Contains(status, "state     failed") || !strings.Contains(status, "its producer stopped publishing") {
		t.Errorf("job status of the killed job:\n%s", status)
	}
	s.checkDrained()
	t.Logf("job wait of the killed job %s: %d results, then exit 1 %v after the kill: %s", killed.ID, solved,
		waited.Round(time.Second), strings.TrimSpace(lastLine(werr)))
	t.Logf("second job %s: %d lines, %d cached (solved for the killed job), %d queued", second, n, solved, n-solved)
}

// jobs returns the records of the test's jobs, every owner's, newest first.
func (s *sys) jobs(ctx context.Context) ([]job.Record, error) {
	return job.NewStore(s.q.JS, s.q.Jobs).List(ctx, "", 100, nil)
}

// cached returns the number of results in the test's part of Redis, or
// -1 when Redis does not answer.
func (s *sys) cached() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int64
	pattern := cache.NewRedis(s.rdb, cache.RedisOptions{Prefix: s.prefix}).Pattern()
	iter := s.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if iter.Err() != nil {
		return -1
	}
	return n
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}
