package reliability

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
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

	workers := []*proc{s.startWorker("worker-0"), s.startWorker("worker-1")}
	started := 2
	killed := 0
	for k := range kills {
		// Points spread over the job, each moved at random by up to 5%.
		frac := (float64(k)+1)/(kills+2) + (r.Float64()-0.5)/10
		target := int64(frac * n)
		s.waitFor(fmt.Sprintf("job %s to reach %d puzzles done", id, target), time.Minute, func() bool {
			return s.done(id) >= target
		})
		// Sometimes at once, sometimes a moment later: in the middle of a
		// solve, a Redis write or an ack.
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
		i := r.IntN(len(workers))
		workers[i].kill()
		killed++
		t.Logf("SIGKILL %s with %d of %d puzzles done", workers[i].name, s.done(id), n)
		workers[i] = s.startWorker(fmt.Sprintf("worker-%d", started))
		started++
	}
	if d := s.done(id); d >= n {
		t.Fatalf("the job finished (%d done) before the last kill: make it longer", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, out, stderr := s.run(ctx, "", "job", "wait", id)
	if code != cli.ExitOK {
		t.Fatalf("job wait: exit %d: %s", code, stderr)
	}
	checkSolutions(t, puzzles, out)
	j := s.checkJob(id, n)
	s.checkDrained()
	t.Logf("%d kills; job %s: %d puzzles in %d batches, all unique, each counted once", killed, id, j.Done, j.Batches)
}

// TestProducerSIGKILL kills a producer with SIGKILL while it publishes a
// job, then runs the same submit again: that job completes, every puzzle
// has exactly one result and the counts are exact. The killed job's
// batches already published are processed too (their results serve the
// second job as cache hits), and nothing stays in the queue.
func TestProducerSIGKILL(t *testing.T) {
	const n = 30000
	// Batches of 10: 3000 messages to publish, enough to strike in the
	// middle of it.
	s := newSys(t, options{env: []string{"SUDOKU_QUEUE_BATCH_SIZE=10"}})
	r := rng(t)
	file, puzzles := genFile(t, clue17, n, 2)

	// No worker yet: the messages stay in the stream, where the test
	// counts them.
	p := s.start("producer", nil, "submit", file)
	target := uint64(100 + r.IntN(1500))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s.waitFor(fmt.Sprintf("%d messages published", target), time.Minute, func() bool {
		str, err := s.js.Stream(ctx, s.name)
		return err == nil && str.CachedInfo().State.Msgs >= target || p.exited()
	})
	p.kill()
	if p.code == 0 {
		t.Fatal("the producer finished before it could be killed: make the job longer")
	}
	str, err := s.js.Stream(ctx, s.name)
	if err != nil {
		t.Fatal(err)
	}
	published := str.CachedInfo().State.Msgs
	jobs, err := s.store.Jobs(ctx, 10)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs after the kill: %v, %v", jobs, err)
	}
	first := jobs[0]
	if first.Sealed || first.IsFinished() {
		t.Fatalf("the killed producer's job %s is sealed: %+v", first.ID, first)
	}
	t.Logf("SIGKILL producer after %d of %d batches published (job %s: %d lines read, %d queued)",
		published, n/10, first.ID, first.Total, first.Queued)

	s.startWorker("worker-0")
	s.startWorker("worker-1")
	code, out, stderr := s.run(ctx, "", "submit", "--wait", file)
	if code != cli.ExitOK {
		t.Fatalf("second submit: exit %d: %s", code, stderr)
	}
	checkSolutions(t, puzzles, out)
	jobs, err = s.store.Jobs(ctx, 10)
	if err != nil || len(jobs) != 2 || jobs[1].ID != first.ID {
		t.Fatalf("jobs: %+v, %v", jobs, err)
	}
	second := s.checkJob(jobs[0].ID, n)
	cached := second.Total - second.Queued
	if cached < 0 {
		t.Fatalf("job %s queued %d puzzles of %d lines", second.ID, second.Queued, second.Total)
	}
	// Every batch the killed producer published is processed: the queue
	// drains, and its job counts them. It is never sealed, so never
	// finished (`job list` shows it "publishing"), and its Queued counts
	// the batches of its last chunk of input that it recorded but did not
	// live to publish.
	s.checkDrained()
	first = s.job(first.ID)
	if first.Done == 0 || first.Done > first.Queued || first.Sealed {
		t.Errorf("the killed job: %d of %d queued done, sealed %v", first.Done, first.Queued, first.Sealed)
	}
	t.Logf("second job %s: %d lines, %d cached (solved for the killed job), %d queued; killed job %s: %d of %d done",
		second.ID, second.Total, cached, second.Queued, first.ID, first.Done, first.Queued)
}
