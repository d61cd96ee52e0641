package client

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// dial returns a client for the test on server: "embedded" (an
// in-process NATS server, the memory cache) or "shared" (the shared NATS
// and Redis, with names of the test's own), acting for owner, with
// workers solving goroutines in the process (below 0: none), and more
// settings. Everything it made goes when the test ends.
func dial(t *testing.T, server, owner string, workers int, more ...string) *Client {
	t.Helper()
	name := testenv.Name("client")
	set := map[string]string{"job.owner": owner, "log.level": "warn"}
	switch server {
	case "embedded":
		set["redis.addrs"] = "127.0.0.1:1" // nothing listens: the memory cache
	case "shared":
		set["nats.url"] = testenv.NATSURL()
		set["redis.addrs"] = testenv.RedisAddr()
		set["queue.stream"], set["queue.dlq_stream"] = name, name+"_DLQ"
		set["queue.subject_prefix"], set["queue.consumer"] = name, name
		set["redis.key_prefix"] = name + ":"
		testenv.CleanupPrefix(t, testenv.Redis(t), name+":")
	}
	for i := 0; i+1 < len(more); i += 2 {
		set[more[i]] = more[i+1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, Options{Embedded: server == "embedded", LocalWorkers: workers, NoEnv: true, Settings: set})
	if err != nil {
		testenv.Unavailable(t, server+" servers", err)
	}
	t.Cleanup(func() {
		if server == "shared" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.conn.Queue.Delete(ctx)
		}
		c.Close()
	})
	return c
}

// fixture returns the lines of testdata/puzzles.txt that are not
// comments: 12 puzzles with a unique solution, one with none, one with
// several, and a line that is no puzzle.
func fixture(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/puzzles.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.Lines(string(data)) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestJob runs a job through the client on both servers: submitted from
// a slice, followed in input order with every answer right, waited for,
// listed, and its status's counts.
func TestJob(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			c := dial(t, server, "alice", 2)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			puzzles := fixture(t)
			sub, err := c.SubmitPuzzles(ctx, puzzles, SubmitOptions{Priority: High})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(sub.ID, "alice.") || sub.Lines != int64(len(puzzles)) || sub.Invalid != 1 {
				t.Fatalf("submitted %+v", sub)
			}
			want := map[int]ResultStatus{13: None, 14: Multiple, 15: Invalid}
			line := 0
			for r, err := range c.Results(ctx, sub.ID) {
				if err != nil {
					t.Fatal(err)
				}
				line++
				if r.Line != line {
					t.Fatalf("result %d has line %d", line, r.Line)
				}
				if w := want[line]; w != "" {
					if r.Status != w {
						t.Errorf("line %d: %s, want %s", line, r.Status, w)
					}
					continue
				}
				if r.Status != Unique {
					t.Errorf("line %d: %s %s", line, r.Status, r.Error)
					continue
				}
				testenv.CheckSolution(t, r.Puzzle, r.Solution)
			}
			if line != len(puzzles) {
				t.Fatalf("%d results of %d lines", line, len(puzzles))
			}
			st, err := c.Wait(ctx, sub.ID)
			if err != nil || st.State != Finished || st.Done != int64(len(puzzles)) || st.Priority != High ||
				st.Counts["unique"] != 12 || st.Counts["invalid"] != 1 {
				t.Fatalf("wait: %+v, %v", st, err)
			}
			jobs, err := c.List(ctx, ListOptions{})
			if err != nil || len(jobs) != 1 || jobs[0].ID != sub.ID {
				t.Fatalf("list: %+v, %v", jobs, err)
			}
			// A second job of the same puzzles is answered from the cache.
			again, err := c.SubmitPuzzles(ctx, puzzles[:12], SubmitOptions{})
			if err != nil || again.Cached != 12 {
				t.Fatalf("the same puzzles again: %+v, %v", again, err)
			}
			// Stopping early stops reading.
			n := 0
			for range c.Results(ctx, sub.ID) {
				if n++; n == 3 {
					break
				}
			}
			if n != 3 {
				t.Fatalf("read %d results before breaking at 3", n)
			}
		})
	}
}

// TestSolveAndGet solves one puzzle through a worker, then reads it from
// the cache.
func TestSolveAndGet(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			c := dial(t, server, "alice", 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p := fixture(t)[0]
			if _, err := c.Get(ctx, p); !errors.Is(err, ErrNotCached) {
				t.Fatalf("get before solving: %v, want %v", err, ErrNotCached)
			}
			r, err := c.Solve(ctx, p, SolveOptions{})
			if err != nil || r.Status != Unique || r.Cached {
				t.Fatalf("solve: %+v, %v", r, err)
			}
			testenv.CheckSolution(t, r.Puzzle, r.Solution)
			var got Result
			for range 50 { // the worker caches what it solved after it answers
				if got, err = c.Get(ctx, p); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil || !got.Cached || got.Solution != r.Solution {
				t.Fatalf("get after solving: %+v, %v", got, err)
			}
			g, _ := solver.Parse(p)
			if byKey, err := c.Get(ctx, g.Key()); err != nil || byKey.Solution != r.Solution {
				t.Fatalf("get by key after solving: %+v, %v", byKey, err)
			}
			bad, err := c.Solve(ctx, "12345", SolveOptions{})
			if err != nil || bad.Status != Invalid || bad.Error == "" {
				t.Fatalf("solve of a line that is no puzzle: %+v, %v", bad, err)
			}
		})
	}
}

// TestErrors checks that each refusal matches its sentinel.
func TestErrors(t *testing.T) {
	t.Parallel()
	alice := dial(t, "embedded", "alice", -1, "quota.jobs_open", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	puzzles := fixture(t)
	first, err := alice.SubmitPuzzles(ctx, puzzles[:1], SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// bob on the same queue: another owner.
	bob := alice.As("bob")
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"status of no job", func() error { _, err := alice.Status(ctx, "alice.0000000000001"); return err }, ErrNotFound},
		{"status of a malformed id", func() error { _, err := alice.Status(ctx, "no-such-job"); return err }, ErrNotFound},
		{"bob cancels alice's job", func() error { _, err := bob.Cancel(ctx, first.ID); return err }, ErrForbidden},
		{"bob removes alice's job", func() error { return bob.Remove(ctx, first.ID) }, ErrForbidden},
		{"bob reads alice's job", func() error { _, err := bob.Status(ctx, first.ID); return err }, ErrForbidden},
		{"bob follows alice's job", func() error { _, err := bob.Follow(ctx, first.ID, nil); return err }, ErrForbidden},
		{"no puzzle", func() error { _, err := alice.SubmitPuzzles(ctx, []string{"# nothing"}, SubmitOptions{}); return err }, ErrBadInput},
		{"a line break", func() error { _, err := alice.SubmitPuzzles(ctx, []string{"1\n2"}, SubmitOptions{}); return err }, ErrBadInput},
		{"over jobs_open", func() error { _, err := alice.SubmitPuzzles(ctx, puzzles[1:2], SubmitOptions{}); return err }, ErrQuota},
		{"get of a bad puzzle", func() error { _, err := alice.Get(ctx, "123"); return err }, ErrBadInput},
		{"get of a miss", func() error { _, err := alice.Get(ctx, puzzles[0]); return err }, ErrNotCached},
		{"solve with no worker", func() error { _, err := alice.Solve(short, puzzles[0], SolveOptions{}); return err }, ErrNoWorker},
	} {
		err := tc.call()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// alice may cancel her own; the cancelled job's status says so.
	st, err := alice.Cancel(ctx, first.ID)
	if err != nil || st.State != Cancelled {
		t.Fatalf("alice cancels her job: %+v, %v", st, err)
	}
	if _, err := alice.Follow(ctx, first.ID, func(Result) error { return nil }); !errors.Is(err, ErrCancelled) {
		t.Fatalf("follow of the cancelled job: %v, want %v", err, ErrCancelled)
	}
	if err := alice.Remove(ctx, first.ID); err != nil {
		t.Fatalf("alice removes her job: %v", err)
	}
	if _, err := alice.Status(ctx, first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("status of the removed job: %v, want %v", err, ErrNotFound)
	}
}

// TestAs checks the views of a door's client acting for its callers:
// jobs submitted are the caller's, reads and changes of others' jobs go
// by the caller's role, lists are scoped to the caller unless its role
// reads others', and over a user that may not act for others the
// connection's own owner bounds the views too.
func TestAs(t *testing.T) {
	t.Parallel()
	door := dial(t, "embedded", "door", -1) // roles off: acts for anyone
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	puzzles := fixture(t)
	alice, bob := door.As("alice"), door.As("bob")
	aj, err := alice.SubmitPuzzles(ctx, puzzles[:1], SubmitOptions{})
	if err != nil || !strings.HasPrefix(aj.ID, "alice.") {
		t.Fatalf("alice's submission: %+v, %v", aj, err)
	}
	bj, err := bob.SubmitPuzzles(ctx, puzzles[1:2], SubmitOptions{})
	if err != nil || !strings.HasPrefix(bj.ID, "bob.") {
		t.Fatalf("bob's submission: %+v, %v", bj, err)
	}
	// A door over a producer's user: its views may touch no job its own
	// owner (door) may not.
	narrow := door.As("door")
	narrow.user, narrow.acting = "producer-door", false
	for _, tc := range []struct {
		name string
		c    *Client
		call func(c *Client) error
		want error // nil: allowed
	}{
		{"alice reads hers", alice, func(c *Client) error { _, err := c.Status(ctx, aj.ID); return err }, nil},
		{"bob reads alice's", bob, func(c *Client) error { _, err := c.Status(ctx, aj.ID); return err }, ErrForbidden},
		{"bob follows alice's", bob, func(c *Client) error { _, err := c.Follow(ctx, aj.ID, nil); return err }, ErrForbidden},
		{"bob cancels alice's", bob, func(c *Client) error { _, err := c.Cancel(ctx, aj.ID); return err }, ErrForbidden},
		{"a reader reads alice's", door.As("reader"), func(c *Client) error { _, err := c.Status(ctx, aj.ID); return err }, nil},
		{"a reader cancels alice's", door.As("reader"), func(c *Client) error { _, err := c.Cancel(ctx, aj.ID); return err }, ErrForbidden},
		{"a gateway reads bob's", door.As("gateway"), func(c *Client) error { _, err := c.Status(ctx, bj.ID); return err }, nil},
		{"over a producer, bob reads his", narrow.As("bob"), func(c *Client) error { _, err := c.Status(ctx, bj.ID); return err }, ErrForbidden},
	} {
		if err := tc.call(tc.c); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		c    *Client
		want []string // the jobs listed, newest first
	}{
		{"alice", alice, []string{aj.ID}},
		{"bob", bob, []string{bj.ID}},
		{"admin", door.As("admin"), []string{bj.ID, aj.ID}},
		{"the door itself (roles off)", door, []string{bj.ID, aj.ID}},
	} {
		sts, err := tc.c.List(ctx, ListOptions{})
		var got []string
		for _, st := range sts {
			got = append(got, st.ID)
		}
		if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s lists %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	// bob's cancel refused: alice's job is as it was; hers is allowed.
	if st, err := alice.Cancel(ctx, aj.ID); err != nil || st.State != Cancelled {
		t.Fatalf("alice cancels hers: %+v, %v", st, err)
	}
}
