package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

var quiet = slog.New(slog.DiscardHandler)

// env is a queue on one server, a cache, and workers on demand.
type env struct {
	t     *testing.T
	q     *testenv.Queue
	cache *cache.Guard
}

func newEnv(t *testing.T, server string) *env {
	t.Helper()
	q := testenv.NewQueue(t, server, queue.Options{})
	return &env{t: t, q: q, cache: cache.NewGuard(cache.NewMemory(0), cache.GuardOptions{Logger: quiet})}
}

// eachServer runs f on the embedded and on the shared NATS server.
func eachServer(t *testing.T, f func(t *testing.T, e *env)) {
	for _, s := range testenv.Servers {
		t.Run(s, func(t *testing.T) { f(t, newEnv(t, s)) })
	}
}

// worker runs a worker until the test ends.
func (e *env) worker(opts worker.Options) { e.t.Cleanup(e.startWorker(opts)) }

// startWorker runs a worker until stop is called.
func (e *env) startWorker(opts worker.Options) (stop func()) {
	opts.Logger = quiet
	w := worker.New(e.q.NC, e.q.Queue, e.cache, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		e.t.Fatalf("worker: %v", err)
	}
	return func() { cancel(); <-done }
}

func (e *env) producer(opts Options) *Producer {
	opts.Logger = quiet
	return New(e.q.Queue, e.cache, opts)
}

func (e *env) submit(text string, opts Options) Submitted {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := e.producer(opts).Submit(ctx, input.NewReader(strings.NewReader(text)))
	if err != nil {
		e.t.Fatal(err)
	}
	return sub
}

func (e *env) follow(id string, opts FollowOptions) ([]result.Result, job.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var rs []result.Result
	opts.Logger = quiet
	rec, err := Follow(ctx, e.q.Queue, id, func(r result.Result) error { rs = append(rs, r); return nil }, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return rs, rec
}

// local solves each line of text as solve --local does: the expected
// results, in order.
func local(t *testing.T, text string, first bool) []result.Result {
	t.Helper()
	var out []result.Result
	in := input.NewReader(strings.NewReader(text))
	for {
		it, err := in.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		g, err := solver.Parse(it.Text)
		if it.Err != nil {
			err = it.Err
		}
		if err != nil {
			out = append(out, result.Invalid(it.Line, it.Text, err))
			continue
		}
		r, err := solver.Solve(context.Background(), &g, solver.Options{FirstSolution: first})
		res := result.FromSolve(&g, r, err)
		res.Line = it.Line
		out = append(out, res)
	}
}

// same fails unless got and want agree line by line, ignoring where the
// answers came from (Cached, Guesses), and the puzzle and key when got
// leaves them out (FollowOptions.Full off).
func same(t *testing.T, got, want []result.Result) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		g.Cached, g.Guesses, w.Guesses = false, 0, 0
		if g.Key == "" && w.Status != result.StatusInvalid {
			w.Puzzle, w.Key = "", ""
		}
		if g != w {
			t.Fatalf("result %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestSubmitAndFollow(t *testing.T) {
	puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 100)
	// Repeats near and far, invalid lines, blank lines and comments.
	var b strings.Builder
	for i, p := range puzzles {
		fmt.Fprintln(&b, p)
		switch i % 10 {
		case 3:
			fmt.Fprintln(&b, puzzles[i-1]) // a repeat in the same batch
		case 5:
			fmt.Fprintln(&b, "12x"+p[3:]) // invalid
		case 7:
			fmt.Fprintln(&b, "\n# a comment")
		}
	}
	fmt.Fprintln(&b, puzzles[0]) // a repeat far back, in another batch
	text := b.String()
	want := local(t, text, false)
	eachServer(t, func(t *testing.T, e *env) {
		e.worker(worker.Options{})
		sub := e.submit(text, Options{BatchSize: 16})
		if sub.Lines != int64(len(want)) || sub.Invalid != 10 || sub.Repeated != 11 || sub.Cached != 0 ||
			sub.Queued != 100 || sub.Batches != (int64(len(want))+15)/16 {
			t.Errorf("submitted %+v", sub)
		}
		if len(sub.InvalidLines) != 10 || sub.InvalidLines[0].Line != 8 {
			t.Errorf("invalid lines %+v", sub.InvalidLines)
		}
		got, rec := e.follow(sub.ID, FollowOptions{Full: true})
		same(t, got, want)
		// The record counts each line once: the repeats of a line in
		// another batch as such (the one far back at least), the others
		// by their status.
		if rec.State != job.Finished || rec.Finished.IsZero() || rec.Counts[job.RepeatStatus] == 0 ||
			rec.Counts[result.StatusUnique]+rec.Counts[job.RepeatStatus] != 111 || rec.Counts[result.StatusInvalid] != 10 ||
			rec.Lines != int64(len(want)) || rec.LinesDone() != rec.Lines {
			t.Errorf("record %+v", rec)
		}
		for _, r := range got {
			if r.Status == result.StatusUnique && r.Key == "" {
				t.Fatalf("Full left the key out: %+v", r)
			}
		}
		// Again, like a later 'job wait': the same, and still finished.
		again, rec2 := e.follow(sub.ID, FollowOptions{})
		for i := range again {
			if again[i].Solution != got[i].Solution || again[i].Line != got[i].Line || again[i].Status != got[i].Status {
				t.Fatalf("second read, line %d: %+v, first %+v", i, again[i], got[i])
			}
		}
		if !rec2.Finished.Equal(rec.Finished) {
			t.Errorf("finished again: %v then %v", rec.Finished, rec2.Finished)
		}
		st, err := JobStatus(context.Background(), e.q.Queue, sub.ID)
		if err != nil || st.Done != rec.Lines || st.Unsolved != 10 {
			t.Errorf("status %+v, %v", st, err)
		}
		// The readers deleted their consumers: none is left for the
		// server to keep up to date.
		info, err := e.q.Results.Info(context.Background())
		if err != nil || info.State.Consumers != 0 {
			t.Errorf("the results stream has %d consumers after the readers (%v)", info.State.Consumers, err)
		}
	})
}

func TestFirstSolutionMode(t *testing.T) {
	text := strings.Repeat(".", 81) + "\n" + testenv.Puzzles(t, "testdata/17_clue_100.txt", 1)[0] + "\n"
	e := newEnv(t, "embedded")
	e.worker(worker.Options{})
	sub := e.submit(text, Options{FirstSolution: true})
	got, _ := e.follow(sub.ID, FollowOptions{})
	same(t, got, local(t, text, true))
	if got[0].Status != result.StatusSolved {
		t.Errorf("first solution of an empty grid: %s", got[0].Status)
	}
}

func TestCachedJobNeedsNoWorker(t *testing.T) {
	puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 40)
	text := strings.Join(puzzles, "\n") + "\nnot a puzzle\n"
	eachServer(t, func(t *testing.T, e *env) {
		// Fill the cache with a worker, then stop it.
		stop := e.startWorker(worker.Options{})
		e.follow(e.submit(text, Options{}).ID, FollowOptions{})
		stop()
		sub := e.submit(text, Options{BatchSize: 8})
		if sub.Cached != 40 || sub.Queued != 0 || sub.Invalid != 1 {
			t.Fatalf("submitted %+v", sub)
		}
		got, rec := e.follow(sub.ID, FollowOptions{})
		same(t, got, local(t, text, false))
		if rec.Cached != 40 || rec.State != job.Finished {
			t.Errorf("record %+v", rec)
		}
		for _, r := range got[:40] {
			if !r.Cached {
				t.Fatalf("a cached result not marked cached: %+v", r)
			}
		}
		// Force solves them again: with no worker, the job waits.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		forced, err := e.producer(Options{Force: true}).Submit(ctx, input.NewReader(strings.NewReader(text)))
		if err != nil || forced.Queued != 40 || forced.Cached != 0 {
			t.Fatalf("forced %+v, %v", forced, err)
		}
	})
}

func TestCacheDownJobGoesOn(t *testing.T) {
	// Redis is only a cache: with a cache that fails every call, jobs go
	// on, slower.
	e := newEnv(t, "embedded")
	rdb := cache.NewRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond}),
		cache.RedisOptions{})
	e.cache = cache.NewGuard(rdb, cache.GuardOptions{Logger: quiet, Timeout: 200 * time.Millisecond})
	e.worker(worker.Options{})
	text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 50), "\n")
	sub := e.submit(text, Options{})
	got, _ := e.follow(sub.ID, FollowOptions{})
	same(t, got, local(t, text, false))
}

func TestFollowWaitsForPublishing(t *testing.T) {
	// A reader that starts before the producer has published everything
	// (and before any worker runs) gets everything once they do, and
	// learns that publishing is over without waiting for its next poll
	// (an hour here) once it has passed every batch on.
	for _, poll := range []time.Duration{50 * time.Millisecond, time.Hour} {
		t.Run(fmt.Sprint("poll ", poll), func(t *testing.T) { followWaitsForPublishing(t, poll) })
	}
}

func followWaitsForPublishing(t *testing.T, poll time.Duration) {
	e := newEnv(t, "shared")
	pr, pw := io.Pipe()
	puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 60)
	p := e.producer(Options{BatchSize: 4})
	subc := make(chan Submitted, 1)
	go func() {
		sub, err := p.Submit(context.Background(), input.NewReader(pr))
		if err != nil {
			t.Error(err)
		}
		subc <- sub
	}()
	// Half the input, then the reader, then a worker, then the rest.
	for _, s := range puzzles[:30] {
		fmt.Fprintln(pw, s)
	}
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for id == "" && time.Now().Before(deadline) {
		recs, _ := Jobs(context.Background(), e.q.Queue, "", 1, quiet)
		if len(recs) == 1 {
			id = recs[0].ID
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("no job record while publishing")
	}
	type out struct {
		rs  []result.Result
		err error
	}
	outc := make(chan out, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var rs []result.Result
		_, err := Follow(ctx, e.q.Queue, id, func(r result.Result) error { rs = append(rs, r); return nil },
			FollowOptions{Poll: poll, Logger: quiet})
		outc <- out{rs, err}
	}()
	time.Sleep(200 * time.Millisecond)
	e.worker(worker.Options{})
	for _, s := range puzzles[30:] {
		fmt.Fprintln(pw, s)
	}
	pw.Close()
	if sub := <-subc; sub.ID != id || sub.Lines != 60 {
		t.Errorf("submitted %+v", sub)
	}
	o := <-outc
	if o.err != nil {
		t.Fatal(o.err)
	}
	same(t, o.rs, local(t, strings.Join(puzzles, "\n"), false))
}

// failingReader fails after n lines.
type failingReader struct {
	r io.Reader
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("disk on fire")
	}
	return n, err
}

func TestFailedSubmissionMarksTheJobFailed(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 20), "\n") + "\n"
		p := e.producer(Options{BatchSize: 4})
		sub, err := p.Submit(context.Background(), input.NewReader(&failingReader{strings.NewReader(text)}))
		if !errors.Is(err, ErrSubmit) || !strings.Contains(err.Error(), "disk on fire") {
			t.Fatalf("Submit = %v, want ErrSubmit with the cause", err)
		}
		ctx := context.Background()
		_, err = Follow(ctx, e.q.Queue, sub.ID, func(result.Result) error { return nil }, FollowOptions{})
		if !errors.Is(err, ErrJobFailed) || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("Follow = %v, want ErrJobFailed with the cause", err)
		}
		st, err := JobStatus(ctx, e.q.Queue, sub.ID)
		if err != nil || st.State != job.Failed {
			t.Errorf("status %+v, %v", st, err)
		}
	})
}

func TestUnknownJob(t *testing.T) {
	e := newEnv(t, "embedded")
	ctx := context.Background()
	for _, id := range []string{job.NewID(job.DefaultOwner), job.NewID("someone-else"), "not.an.id", "06h436ut63lo4bmi9rl1oeo4t8", ""} {
		if _, err := Follow(ctx, e.q.Queue, id, nil, FollowOptions{}); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("Follow(%q) = %v, want job.ErrNotFound", id, err)
		}
		if _, err := JobStatus(ctx, e.q.Queue, id); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("JobStatus(%q) = %v, want job.ErrNotFound", id, err)
		}
	}
}

func TestRemove(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 30), "\n")
		sub := e.submit(text, Options{BatchSize: 5}) // no worker: all work pending
		rec, _, err := job.NewStore(e.q.JS, e.q.Jobs).Get(ctx, sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		lane := queue.LaneOf(&rec)
		if n, err := e.q.WorkLeft(ctx, sub.ID, lane); err != nil || n != 6 {
			t.Fatalf("work left before rm: %d, %v; want 6 batches", n, err)
		}
		if err := Remove(ctx, e.q.Queue, sub.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := JobStatus(ctx, e.q.Queue, sub.ID); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("status after rm: %v", err)
		}
		if n, err := e.q.WorkLeft(ctx, sub.ID, lane); err != nil || n != 0 {
			t.Errorf("work left after rm: %d, %v", n, err)
		}
		if err := Remove(ctx, e.q.Queue, sub.ID); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("second rm = %v", err)
		}
		// Another job is untouched.
		e.worker(worker.Options{})
		other := e.submit(text, Options{})
		got, _ := e.follow(other.ID, FollowOptions{})
		same(t, got, local(t, text, false))
	})
}

func TestJobsNewestFirst(t *testing.T) {
	e := newEnv(t, "embedded")
	var ids []string
	for range 3 {
		ids = append(ids, e.submit("not a puzzle", Options{}).ID) // an empty input is refused
		time.Sleep(2 * time.Millisecond)
	}
	recs, err := Jobs(context.Background(), e.q.Queue, "", 2, quiet)
	if err != nil || len(recs) != 2 || recs[0].ID != ids[2] || recs[1].ID != ids[1] {
		t.Errorf("Jobs = %+v, %v; want %s, %s", recs, err, ids[2], ids[1])
	}
	// A job with nothing for the workers is published at once and
	// finishes on its first read.
	_, rec := e.follow(ids[0], FollowOptions{})
	if rec.State != job.Finished || rec.Lines != 1 || rec.Invalid != 1 {
		t.Errorf("job of one invalid line: %+v", rec)
	}
}

func TestForgedResultsAreRefusedAndReplaced(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 20)
		text := strings.Join(puzzles, "\n")
		sub := e.submit(text, Options{BatchSize: 10})
		// Before any worker: results for batch 0 that answer other
		// puzzles, and a batch the job never had.
		other := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 40)[20:], "\n")
		forged := answer(t, sub.ID, 0, other)
		beyond := answer(t, sub.ID, 7, other)
		for _, b := range []*job.Batch{forged, beyond} {
			if _, err := e.q.JS.PublishMsg(ctx, e.q.Opts.ResultsMsg(b), queue.ExpectResults()); err != nil {
				t.Fatal(err)
			}
		}
		e.worker(worker.Options{})
		got, rec := e.follow(sub.ID, FollowOptions{})
		same(t, got, local(t, text, false))
		if rec.Counts[result.StatusUnique] != 20 {
			t.Errorf("counts %v", rec.Counts)
		}
	})
}

// TestForgedAnswersWithTheRightDigest publishes, before any worker,
// results with the right digest and wrong answers: batch 0 says none for
// solvable puzzles (issue 22, finding 5: printed), batch 1 a unique
// solution that breaks the rules (finding 7: refused by the reader but
// kept, so the job never ended). The worker replaces both; the job ends
// with the right results.
func TestForgedAnswersWithTheRightDigest(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 20)
		text := strings.Join(puzzles, "\n")
		sub := e.submit(text, Options{BatchSize: 10})
		none := answer(t, sub.ID, 0, strings.Join(puzzles[:10], "\n"))
		for i := range none.Items {
			o := &none.Items[i].Outcome
			o.Status, o.Solution = result.StatusNone, solver.Grid{}
		}
		broken := answer(t, sub.ID, 1, strings.Join(puzzles[10:], "\n"))
		broken.First, broken.Digest = 10, job.Digest{}
		for i := range broken.Items {
			broken.Items[i].Line += 10
		}
		broken.Digest = broken.ComputeDigest()
		s := &broken.Items[3].Outcome.Solution
		s[0], s[1] = s[1], s[0] // a row still holds 1-9; two columns do not
		for _, b := range []*job.Batch{none, broken} {
			if _, err := e.q.JS.PublishMsg(ctx, e.q.Opts.ResultsMsg(b), queue.ExpectResults()); err != nil {
				t.Fatal(err)
			}
		}
		e.worker(worker.Options{})
		got, rec := e.follow(sub.ID, FollowOptions{})
		same(t, got, local(t, text, false))
		if rec.Counts[result.StatusUnique] != 20 {
			t.Errorf("counts %v", rec.Counts)
		}
	})
}

// answer builds the results batch a worker would publish for the puzzles
// of text as batch index of job id (with their own digest).
func answer(t *testing.T, id string, index uint64, text string) *job.Batch {
	t.Helper()
	b := &job.Batch{Job: id, Index: index}
	for i, line := range strings.Split(text, "\n") {
		g, err := solver.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		r, err := solver.Solve(context.Background(), &g, solver.Options{})
		b.Items = append(b.Items, job.Item{Line: i + 1, Kind: job.Known, Outcome: job.FromSolve(&g, r, err)})
	}
	b.Digest = b.ComputeDigest()
	return b
}

// testGrid returns a grid for n, a different one for every n (its first
// cells hold n in base 9).
func testGrid(n uint64) *solver.Grid {
	var g solver.Grid
	for i := 0; n > 0; i, n = i+1, n/9 {
		g[i] = byte(n%9) + 1
	}
	return &g
}

// windowFind and windowAdd look a puzzle up in w and add it, with its
// hash.
func windowFind(w *repeatWindow, g *solver.Grid, item uint64) (uint64, bool) {
	return w.find(g, w.hash(g), item)
}
func windowAdd(w *repeatWindow, g *solver.Grid, item uint64) { w.add(g, w.hash(g), item) }

func TestRepeatWindow(t *testing.T) {
	var w repeatWindow
	if _, ok := windowFind(&w, testGrid(1), 0); ok {
		t.Error("found a puzzle in an empty window")
	}
	windowAdd(&w, testGrid(1), 0)
	if back, ok := windowFind(&w, testGrid(1), 5); !ok || back != 5 {
		t.Errorf("find = %d, %v, want 5, true", back, ok)
	}
	if _, ok := windowFind(&w, testGrid(2), 5); ok {
		t.Error("found a puzzle never added")
	}
	if _, ok := windowFind(&w, testGrid(1), job.RepeatWindow+1); ok {
		t.Error("found a puzzle past the window")
	}
	// Items that skip pages of the ring (a run of repeats or invalid
	// lines between two puzzles).
	var skip repeatWindow
	windowAdd(&skip, testGrid(7), 0)
	windowAdd(&skip, testGrid(8), 5*ringPage+3)
	if back, ok := windowFind(&skip, testGrid(8), 5*ringPage+4); !ok || back != 1 {
		t.Errorf("after a skip of pages: find = %d, %v, want 1, true", back, ok)
	}
	if back, ok := windowFind(&skip, testGrid(7), 5*ringPage+4); !ok || back != 5*ringPage+4 {
		t.Errorf("after a skip of pages, the first puzzle: find = %d, %v", back, ok)
	}
	// The next item repeating the last is always found, however full.
	for i := uint64(1); i < 2*job.RepeatWindow; i++ {
		windowAdd(&w, testGrid(i+1), i)
		if back, ok := windowFind(&w, testGrid(i+1), i+1); !ok || back != 1 {
			t.Fatalf("item %d repeating item %d: find = %d, %v", i+1, i, back, ok)
		}
	}
	if n := len(w.ring) * ringPage; n != job.RepeatWindow {
		t.Errorf("the ring holds %d puzzles, want at most the window's %d", n, job.RepeatWindow)
	}
}

// TestRepeatWindowAgainstAMap checks the window against a plain map over
// a long run of puzzles from a small set, so that puzzles repeat, expire
// and share slots: every repeat it finds is one, at the right distance,
// and it finds nearly all within the window (a slot taken over by
// another puzzle loses one now and then).
func TestRepeatWindowAgainstAMap(t *testing.T) {
	var w repeatWindow
	last := map[uint64]uint64{} // the last item a puzzle was added at
	rng := uint64(1)
	repeats, found := 0, 0
	for item := uint64(0); item < 3*job.RepeatWindow; item++ {
		rng = rng*6364136223846793005 + 1442695040888963407
		n := (rng >> 40) % 2000
		if item > 2*job.RepeatWindow {
			n += 1 << 20 // new puzzles: the old ones expire
		}
		back, ok := windowFind(&w, testGrid(n), item)
		at, seen := last[n]
		inWindow := seen && item-at <= job.RepeatWindow
		if ok && (!inWindow || back != item-at) {
			t.Fatalf("item %d: find = %d, true; the puzzle was last added at %d (seen %v)", item, back, at, seen)
		}
		if inWindow {
			repeats++
		}
		if ok {
			found++
			continue
		}
		windowAdd(&w, testGrid(n), item)
		last[n] = item
	}
	if found < repeats*9/10 {
		t.Errorf("found %d of %d repeats within the window, want at least 90%%", found, repeats)
	}
}

func TestSolve(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		e.worker(worker.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p := testenv.Puzzles(t, "testdata/17_clue_100.txt", 1)[0]
		r, err := Solve(ctx, e.q.NC, e.q.Opts, p, SolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != result.StatusUnique || r.Cached {
			t.Errorf("Solve = %+v", r)
		}
		testenv.CheckSolution(t, p, r.Solution)
		g, _ := solver.Parse(p)
		if r.Key != g.Key() || r.Puzzle != g.String() {
			t.Errorf("Solve key %s puzzle %s", r.Key, r.Puzzle)
		}
		again, err := Solve(ctx, e.q.NC, e.q.Opts, p, SolveOptions{})
		if err != nil || !again.Cached || again.Solution != r.Solution {
			t.Errorf("second Solve = %+v, %v; want the cached answer", again, err)
		}
		// A caller that looked the cache up itself: the worker solves.
		solved, err := Solve(ctx, e.q.NC, e.q.Opts, p, SolveOptions{NoLookup: true, Logger: quiet})
		if err != nil || solved.Cached || solved.Status != result.StatusUnique || solved.Solution != r.Solution {
			t.Errorf("Solve with NoLookup = %+v, %v; want it solved again", solved, err)
		}
		_, err = Solve(ctx, e.q.NC, e.q.Opts, "11"+p[2:], SolveOptions{})
		var se *queue.ServiceError
		if !errors.As(err, &se) || se.Code != queue.CodeInvalidPuzzle || !strings.Contains(se.Description, "r1c1") {
			t.Errorf("Solve of a bad puzzle = %v, want code %s naming the cells", err, queue.CodeInvalidPuzzle)
		}
	})
}

// TestSolveRepliesAreChecked answers the solve subject with a responder
// of its own besides the workers, saying none, or unique with a solution
// against the rules (issue 22, finding 9: any subscriber's reply was
// taken): Solve takes the worker's right answer every time.
func TestSolveRepliesAreChecked(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		e.worker(worker.Options{})
		puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 6)
		for i, p := range puzzles {
			g, _ := solver.Parse(p)
			forged := result.Result{Status: result.StatusNone, Puzzle: g.String(), Key: g.Key(), Error: result.MsgNone}
			if i%2 == 1 {
				r, _ := solver.Solve(context.Background(), &g, solver.Options{})
				s := []byte(r.Solution.Digits())
				s[0], s[1] = s[1], s[0]
				forged = result.Result{Status: result.StatusUnique, Puzzle: g.String(), Key: g.Key(), Solution: string(s)}
			}
			data, _ := json.Marshal(&forged)
			// Faster than any worker: it answers at once, from the same
			// connection.
			sub, err := e.q.NC.Subscribe(e.q.Opts.SolveSubject(), func(m *nats.Msg) { _ = m.Respond(data) })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := Solve(ctx, e.q.NC, e.q.Opts, p, SolveOptions{NoLookup: true, Logger: quiet})
			cancel()
			_ = sub.Unsubscribe()
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != result.StatusUnique {
				t.Fatalf("puzzle %d: Solve took the forged reply: %+v", i, r)
			}
			testenv.CheckSolution(t, p, r.Solution)
		}
	})
}

func TestSolveWithoutWorkers(t *testing.T) {
	e := newEnv(t, "embedded")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := Solve(ctx, e.q.NC, e.q.Opts, strings.Repeat(".", 81), SolveOptions{})
	if !errors.Is(err, ErrNoAnswer) {
		t.Errorf("Solve with no worker = %v, want ErrNoAnswer", err)
	}
}

func TestStatusBeforeTheWorkers(t *testing.T) {
	e := newEnv(t, "shared")
	text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 12), "\n")
	sub := e.submit(text, Options{BatchSize: 4})
	ctx := context.Background()
	st, err := JobStatus(ctx, e.q.Queue, sub.ID)
	if err != nil || st.State != job.Published || st.BatchesDone != 0 || st.Done != 0 || st.Batches != 3 {
		t.Fatalf("status before any worker: %+v, %v", st, err)
	}
	e.worker(worker.Options{})
	deadline := time.Now().Add(20 * time.Second)
	for st.BatchesDone < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("status never reached 3 batches: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
		if st, err = JobStatus(ctx, e.q.Queue, sub.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody read the results: the job is finished all the same, by the
	// worker that stored the last ones.
	if st.Done != 12 || st.Counts[result.StatusUnique] != 12 || st.State != job.Finished || st.Finished == nil {
		t.Errorf("status when every batch is done, without a reader: %+v", st)
	}
}

func TestStaleProducerFailsTheJob(t *testing.T) {
	// A producer that dies while publishing leaves its job publishing; a
	// reader that finds no heartbeat for job.StaleAfter takes it for
	// failed instead of waiting for ever, and a worker marks it failed.
	e := newEnv(t, "embedded")
	ctx := context.Background()
	store := job.NewStore(e.q.JS, e.q.Jobs)
	old := time.Now().Add(-job.StaleAfter - time.Second).UTC()
	rec := job.Record{ID: job.NewID("alice"), State: job.Publishing, Created: old, Heartbeat: old, Tally: job.Tally{Lines: 7}}
	if _, err := store.Create(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	_, err := Follow(ctx, e.q.Queue, rec.ID, func(result.Result) error { return nil }, FollowOptions{Logger: quiet})
	if !errors.Is(err, ErrJobFailed) || !strings.Contains(err.Error(), "stopped publishing after 7 lines") {
		t.Fatalf("Follow = %v, want ErrJobFailed saying the producer stopped", err)
	}
	if got, _, err := store.Get(ctx, rec.ID); err != nil || got.State != job.Publishing {
		t.Errorf("record after the reader: %+v, %v; want it as it was: a reader does not write", got, err)
	}
	e.worker(worker.Options{})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, _, err := store.Get(ctx, rec.ID)
		if err == nil && got.State == job.Failed && strings.Contains(got.Error, "stopped publishing after 7 lines") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record with a worker running: %+v, %v; want it marked failed", got, err)
		}
	}
	// A fresh heartbeat is a live producer, however old the job.
	fresh := job.Record{ID: job.NewID("alice"), State: job.Publishing, Created: old, Heartbeat: time.Now().UTC()}
	if fresh.Stale(time.Now()) || !rec.Stale(time.Now()) {
		t.Error("Stale got a fresh or an old heartbeat wrong")
	}
}

func TestRecentBatches(t *testing.T) {
	p := testenv.Puzzles(t, "testdata/17_clue_100.txt", 1)[0]
	g, _ := solver.Parse(p)
	var sv solver.Solver
	r, err := sv.Solve(context.Background(), &g, solver.Options{})
	unique := job.FromSolve(&g, r, err)
	r, err = sv.Solve(context.Background(), &g, solver.Options{MaxNodes: 1})
	gaveUp := job.FromSolve(&g, r, err)
	outcome := func(item uint64) job.Outcome {
		if item%3 == 0 {
			return gaveUp
		}
		o := unique
		o.Guesses = int64(item)
		return o
	}
	const size = 1000
	var rb recentBatches
	for first := uint64(0); first < 3*job.RepeatWindow; first += size {
		b := &job.Batch{Job: "a.j", Index: first / size, First: first}
		for i := range uint64(size) {
			b.Items = append(b.Items, job.Item{Line: int(first + i + 1), Kind: job.Known, Outcome: outcome(first + i)})
		}
		rb.push(&pendingBatch{b, b.AppendResults(nil)})
		end := first + size
		if end < job.RepeatWindow {
			continue
		}
		for _, item := range []uint64{end - 1, end - job.RepeatWindow, end - job.RepeatWindow/2} {
			got, ok := rb.outcome(item)
			if !ok || got != outcome(item) {
				t.Fatalf("after batch %d: outcome(%d) = %+v, %v; want %+v", b.Index, item, got, ok, outcome(item))
			}
		}
		if len(rb.bs) > job.RepeatWindow/size+2 {
			t.Fatalf("%d batches kept for a window of %d items of batches of %d", len(rb.bs), job.RepeatWindow, size)
		}
	}
	if _, ok := rb.outcome(0); ok {
		t.Error("an item long out of the window was found")
	}
}

func TestBatchesCutBySize(t *testing.T) {
	// Batches cut short by the message size, more than one manifest's
	// worth of them, long invalid lines among them.
	puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 300)
	var b strings.Builder
	for i, p := range puzzles {
		fmt.Fprintln(&b, p)
		if i%25 == 0 {
			fmt.Fprintln(&b, strings.Repeat("x", 3000))
		}
	}
	text := b.String()
	e := newEnv(t, "embedded")
	e.worker(worker.Options{})
	sub := e.submit(text, Options{BatchSize: 7, MaxMessageBytes: 4 << 10})
	// 300 puzzles in batches of 7, and each long line cuts one short.
	if sub.Batches <= 300/7+1 || sub.Batches <= 2*job.ManifestSpan {
		t.Fatalf("%d batches: want some cut short, and more than %d", sub.Batches, 2*job.ManifestSpan)
	}
	got, rec := e.follow(sub.ID, FollowOptions{})
	same(t, got, local(t, text, false))
	if rec.Batches != sub.Batches || rec.Invalid != 12 {
		t.Errorf("record %+v", rec)
	}
}

// TestInvalidUTF8Finishes submits lines that are not valid UTF-8, and one
// of 2,000 euro signs whose kept text a cut would split mid-character
// (issue 22, finding 2: in a job with JSON results, which turns such
// bytes into U+FFFD, the digest no longer matched and the job never
// finished): each is an invalid line with valid UTF-8 text, the job
// finishes, and the results read back are what submit reported.
func TestInvalidUTF8Finishes(t *testing.T) {
	puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 1)
	text := "bad \xff\xfe line\n" + puzzles[0] + "\n" + strings.Repeat("€", 2000) + "\n1\xe2\x82\n"
	for _, jsonResults := range []bool{true, false} {
		eachServer(t, func(t *testing.T, e *env) {
			e.worker(worker.Options{})
			sub := e.submit(text, Options{JSONResults: jsonResults})
			got, rec := e.follow(sub.ID, FollowOptions{Full: true})
			if len(got) != 4 || rec.Counts[result.StatusInvalid] != 3 || rec.Counts[result.StatusUnique] != 1 {
				t.Fatalf("results %+v, counts %v", got, rec.Counts)
			}
			var read, reported []string
			for _, r := range got {
				if !utf8.ValidString(r.Puzzle) || !utf8.ValidString(r.Error) {
					t.Errorf("line %d: text %q, error %q: not valid UTF-8", r.Line, r.Puzzle, r.Error)
				}
				if r.Status == result.StatusInvalid {
					read = append(read, r.Puzzle)
				}
			}
			for _, r := range sub.InvalidLines {
				reported = append(reported, r.Puzzle)
			}
			if !slices.Equal(read, reported) {
				t.Errorf("invalid lines read back as %q, submit reported %q", read, reported)
			}
			if !strings.Contains(got[0].Error, "UTF-8") {
				t.Errorf("line 1's error does not say why: %q", got[0].Error)
			}
		})
	}
}

// TestGrowthIsBounded submits a request of a megabyte of lines too short
// to be puzzles (issue 22, finding 4: such a request of "1" lines grew
// the results stream by 24.5 MB): with MaxGrowth the submission fails
// before it stores more than MaxGrowth times its size (plus the slack),
// while a request of puzzles, in the costlier JSON form, is accepted.
func TestGrowthIsBounded(t *testing.T) {
	e := newEnv(t, "embedded")
	ctx := context.Background()
	size := func() uint64 {
		t.Helper()
		var n uint64
		for _, name := range []string{e.q.Opts.Stream, e.q.Opts.ResultsStream()} {
			s, err := e.q.JS.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			n += s.CachedInfo().State.Bytes
		}
		return n
	}
	text := strings.Repeat("1\n", 1<<19) // 1 MiB
	before := size()
	_, err := e.producer(Options{JSONResults: true, MaxGrowth: DefaultMaxGrowth}).Submit(ctx, input.NewReader(strings.NewReader(text)))
	if !errors.Is(err, ErrTooMuchGrowth) {
		t.Errorf("a request of short lines: %v, want ErrTooMuchGrowth", err)
	}
	if grown, bound := size()-before, uint64(DefaultMaxGrowth*len(text)+GrowthSlack); grown > bound {
		t.Errorf("the request of %d bytes grew the streams by %d bytes, more than %d", len(text), grown, bound)
	}
	// Each puzzle 30 times: well beyond the slack.
	puzzles := strings.Repeat(strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 100), "\n")+"\n", 30)
	for _, json := range []bool{false, true} {
		if _, err := e.producer(Options{JSONResults: json, MaxGrowth: DefaultMaxGrowth}).Submit(ctx, input.NewReader(strings.NewReader(puzzles))); err != nil {
			t.Errorf("a request of puzzles (JSON %v): %v", json, err)
		}
	}
}

func TestJSONResultsJob(t *testing.T) {
	puzzles := testenv.Puzzles(t, "testdata/17_clue_100.txt", 30)
	text := strings.Join(puzzles, "\n") + "\n" + puzzles[0] + "\nnot a puzzle\n"
	eachServer(t, func(t *testing.T, e *env) {
		e.worker(worker.Options{})
		sub := e.submit(text, Options{JSONResults: true, BatchSize: 8})
		if sub.Repeated != 0 {
			t.Errorf("a JSON job found %d repeats; it has none", sub.Repeated)
		}
		got, rec := e.follow(sub.ID, FollowOptions{Full: true})
		same(t, got, local(t, text, false))
		if !rec.Options.JSONResults {
			t.Error("the record lost the option")
		}
		// What another client reads: JSON, every result whole.
		m, err := e.q.Results.GetLastMsgForSubject(context.Background(), e.q.Opts.ResultSubject(sub.ID, 3))
		if err != nil {
			t.Fatal(err)
		}
		var jr job.JSONResults
		if err := json.Unmarshal(m.Data, &jr); err != nil || jr.Job != sub.ID || jr.Batch != 3 || len(jr.Results) == 0 {
			t.Fatalf("batch 3 is not JSON results: %v: %.200s", err, m.Data)
		}
		for _, r := range jr.Results {
			if r.Repeat != 0 || r.Line == 0 || r.Status == "" {
				t.Fatalf("result %+v", r)
			}
		}
	})
}

// TestFollowWithAProducerClockAhead checks that a reader gets every result
// of a job whose producer's clock runs far ahead of the server's: it
// starts reading the results stream at the job's creation time less a
// margin, so it sees none of them there, and reads each by its subject.
func TestFollowWithAProducerClockAhead(t *testing.T) {
	e := newEnv(t, "embedded")
	e.worker(worker.Options{})
	text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 40), "\n")
	sub := e.submit(text, Options{BatchSize: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store := job.NewStore(e.q.JS, e.q.Jobs)
	// A record of an older producer, without ResultsFrom: readers start
	// by the clock of the producer, here an hour ahead. (The workers
	// count its batches meanwhile.)
	if _, err := store.Apply(ctx, sub.ID, func(r *job.Record) error {
		r.Created, r.ResultsFrom = time.Now().Add(time.Hour), 0
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rs, got := e.follow(sub.ID, FollowOptions{Poll: 20 * time.Millisecond})
	same(t, rs, local(t, text, false))
	if got.State != job.Finished || got.Counts[result.StatusUnique] != 40 {
		t.Errorf("record %s, counts %v", got.State, got.Counts)
	}
}

// TestMissingResultsAreReportedMissing checks that a finished job one of
// whose results messages is gone (expired, purged by an operator) is
// reported as such, naming the batch and the stream, after the results
// before it: never as solved, gave_up or a hang.
func TestMissingResultsAreReportedMissing(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 30), "\n")
		e.worker(worker.Options{})
		sub := e.submit(text, Options{BatchSize: 10})
		want := local(t, text, false)
		got, _ := e.follow(sub.ID, FollowOptions{})
		same(t, got, want)
		if err := e.q.Results.Purge(ctx, jetstream.WithPurgeSubject(e.q.Opts.ResultSubject(sub.ID, 1))); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		var rs []result.Result
		_, err := Follow(ctx, e.q.Queue, sub.ID, func(r result.Result) error { rs = append(rs, r); return nil },
			FollowOptions{Logger: quiet, Poll: 20 * time.Millisecond})
		if !errors.Is(err, ErrResultsGone) || !strings.Contains(err.Error(), "batch 1 of 3 is not in "+e.q.Opts.ResultsStream()) {
			t.Fatalf("Follow = %v, want ErrResultsGone naming batch 1 of 3", err)
		}
		same(t, rs, want[:10]) // batch 0, then the gap
	})
}

// TestReadersStartAtResultsFrom checks that a job's record says where in
// the results stream its results begin (after every older job's), and
// that its readers (Follow, JobStatus) ask the server to start there, on
// both servers.
func TestReadersStartAtResultsFrom(t *testing.T) {
	eachServer(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		text := strings.Join(testenv.Puzzles(t, "testdata/17_clue_100.txt", 12), "\n")
		stop := e.startWorker(worker.Options{})
		e.follow(e.submit(text, Options{BatchSize: 4}).ID, FollowOptions{}) // an older job's results
		stop()
		info, err := e.q.Results.Info(ctx)
		if err != nil || info.State.Msgs != 3 {
			t.Fatalf("results stream: %+v, %v", info.State, err)
		}
		// The stream's sequence, as the queue asked for it at most 500 ms
		// ago (queue.Queue.ResultsFrom): asked again now.
		time.Sleep(600 * time.Millisecond)
		sub := e.submit(text, Options{BatchSize: 4, Force: true})
		rec, _, err := job.NewStore(e.q.JS, e.q.Jobs).Get(ctx, sub.ID)
		if err != nil || rec.ResultsFrom != info.State.LastSeq+1 {
			t.Fatalf("record's ResultsFrom %d (%v), want %d", rec.ResultsFrom, err, info.State.LastSeq+1)
		}
		// While no worker runs, Follow waits with its consumer open: the
		// server has it starting at ResultsFrom, on the job's subjects.
		done := make(chan []result.Result, 1)
		go func() { rs, _ := e.follow(sub.ID, FollowOptions{}); done <- rs }()
		var found *jetstream.ConsumerInfo
		for found == nil && ctx.Err() == nil {
			for ci := range e.q.Results.ListConsumers(ctx).Info() {
				if ci.Config.FilterSubject == e.q.Opts.ResultsFilter(sub.ID) ||
					len(ci.Config.FilterSubjects) == 1 && ci.Config.FilterSubjects[0] == e.q.Opts.ResultsFilter(sub.ID) {
					found = ci
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		if found == nil || found.Config.DeliverPolicy != jetstream.DeliverByStartSequencePolicy ||
			found.Config.OptStartSeq != rec.ResultsFrom {
			t.Fatalf("the reader's consumer: %+v, want one from sequence %d", found, rec.ResultsFrom)
		}
		e.worker(worker.Options{})
		same(t, <-done, local(t, text, false))
		// JobStatus of the job (finished now): the counts are right.
		st, err := JobStatus(ctx, e.q.Queue, sub.ID)
		if err != nil || st.Done != 12 || st.Counts[result.StatusUnique] != 12 || st.State != job.Finished {
			t.Fatalf("status %+v, %v", st, err)
		}
	})
}

func TestResultsReader(t *testing.T) {
	q := &queue.Queue{Opts: queue.Options{Prefix: "p"}}
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		rec    job.Record
		policy jetstream.DeliverPolicy
	}{
		{"from a sequence", job.Record{ID: "j", Created: created, ResultsFrom: 42}, jetstream.DeliverByStartSequencePolicy},
		{"by time", job.Record{ID: "j", Created: created}, jetstream.DeliverByStartTimePolicy},
		{"from the start", job.Record{ID: "j"}, jetstream.DeliverAllPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := resultsReader(q, &tc.rec)
			if cfg.DeliverPolicy != tc.policy || len(cfg.FilterSubjects) != 1 || cfg.FilterSubjects[0] != "p.results.j.>" {
				t.Fatalf("config %+v", cfg)
			}
			switch tc.policy {
			case jetstream.DeliverByStartSequencePolicy:
				if cfg.OptStartSeq != 42 {
					t.Errorf("start sequence %d, want 42", cfg.OptStartSeq)
				}
			case jetstream.DeliverByStartTimePolicy:
				if cfg.OptStartTime == nil || !cfg.OptStartTime.Equal(created.Add(-startSlack)) {
					t.Errorf("start time %v, want %v", cfg.OptStartTime, created.Add(-startSlack))
				}
			}
		})
	}
}

// TestBatchesGrow checks the batches' sizes: FirstBatch (256 by default,
// at most BatchSize) for the first, each next one twice the last, up to
// BatchSize; and that the job's results are all there, in order.
func TestBatchesGrow(t *testing.T) {
	base := testenv.Puzzles(t, "testdata/17_clue_100.txt", 100)
	for _, tc := range []struct {
		name              string
		lines             int
		batch, firstBatch int
		want              []int
	}{
		{"default first batch", 2000, 1024, 0, []int{256, 512, 1024, 208}},
		{"first batch of BatchSize", 2000, 1024, 1024, []int{1024, 976}},
		{"first batch above BatchSize", 250, 100, 0, []int{100, 100, 50}},
		{"small batches", 200, 50, 10, []int{10, 20, 40, 50, 50, 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The base puzzles relabelled (their digits shifted, nine ways),
			// so that most lines are new puzzles; repeats are items of
			// their batches all the same.
			lines := make([]string, tc.lines)
			for i := range lines {
				shift := byte(i / len(base))
				lines[i] = strings.Map(func(r rune) rune {
					if r >= '1' && r <= '9' {
						return rune('1' + (byte(r-'1')+shift)%9)
					}
					return r
				}, base[i%len(base)])
			}
			text := strings.Join(lines, "\n")
			e := newEnv(t, "embedded")
			e.worker(worker.Options{})
			sub := e.submit(text, Options{BatchSize: tc.batch, FirstBatch: tc.firstBatch, Force: true})
			got, rec := e.follow(sub.ID, FollowOptions{})
			same(t, got, local(t, text, false))
			if rec.Batches != int64(len(tc.want)) {
				t.Fatalf("%d batches, want %d", rec.Batches, len(tc.want))
			}
			ctx := context.Background()
			for i, n := range tc.want {
				m, err := e.q.Results.GetLastMsgForSubject(ctx, e.q.Opts.ResultSubject(sub.ID, uint64(i)))
				if err != nil {
					t.Fatal(err)
				}
				b, err := job.DecodeAnyResults(m.Data)
				if err != nil || len(b.Items) != n {
					t.Errorf("batch %d: %d items (%v), want %d", i, len(b.Items), err, n)
				}
			}
		})
	}
}
