package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// serveEndpoints serves the service's endpoints of q in a micro service
// of their own, without a worker, until the test ends: the jobs submitted
// stay open (published), none of their work is done.
func serveEndpoints(t *testing.T, nc *nats.Conn, q *queue.Queue, opts producer.Options) {
	t.Helper()
	svc, err := micro.AddService(nc, micro.Config{Name: "sudoku-test", Version: "0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	for _, e := range endpoints(q, nil, opts) {
		if err := svc.AddEndpoint(e.Name, e.Handler, micro.WithEndpointSubject(e.Subject)); err != nil {
			t.Fatal(err)
		}
	}
}

// callers asks the endpoints of one queue as any caller.
type callers struct {
	t  *testing.T
	nc *nats.Conn
	o  queue.Options
}

// submit submits puzzles as caller and returns the reply, or the error.
func (c callers) submit(caller string, puzzles ...string) (producer.Submitted, *queue.ServiceError) {
	c.t.Helper()
	body, _ := json.Marshal(queue.SubmitRequest{Puzzles: puzzles})
	data, se := request(c.t, c.nc, c.o.SubmitSubject(caller), string(body))
	var rep producer.Submitted
	if se == nil {
		if err := json.Unmarshal(data, &rep); err != nil {
			c.t.Fatalf("submit reply %s: %v", data, err)
		}
	}
	return rep, se
}

// mustSubmit submits one puzzle as caller and returns the job's id, which
// must name the caller as its owner.
func (c callers) mustSubmit(caller string) string {
	c.t.Helper()
	rep, se := c.submit(caller, testPuzzle)
	if se != nil {
		c.t.Fatalf("submit as %s: %v", caller, se)
	}
	if !strings.HasPrefix(rep.ID, caller+".") || job.OwnerOf(rep.ID) != caller {
		c.t.Fatalf("submit as %s: job id %q, want %s.<serial>: the caller owns the job", caller, rep.ID, caller)
	}
	return rep.ID
}

// ask sends job id to the status (write false) or cancel endpoint as
// caller and returns the status, or the error.
func (c callers) ask(caller, id string, write bool) (producer.Status, *queue.ServiceError) {
	c.t.Helper()
	subject := c.o.StatusSubject(caller)
	if write {
		subject = c.o.CancelSubject(caller)
	}
	data, se := request(c.t, c.nc, subject, id)
	var st producer.Status
	if se == nil {
		if err := json.Unmarshal(data, &st); err != nil {
			c.t.Fatalf("reply of %s %s: %s: %v", subject, id, data, err)
		}
	}
	return st, se
}

// state returns job id's state as its owner reads it.
func (c callers) state(id string) job.State {
	c.t.Helper()
	st, se := c.ask(job.OwnerOf(id), id, false)
	if se != nil {
		c.t.Fatalf("status of %s as its owner: %v", id, se)
	}
	return st.State
}

// testPuzzle is a puzzle with one solution.
const testPuzzle = "4.....8.5.3..........7......2.....6.....8.4......1.......6.3.7.5..2.....1.4......"

// TestOwners: each endpoint acts for its caller, the subject's last
// token. A submit makes the caller the job's owner; status and cancel of
// another owner's job are refused (403, naming the caller, the owner and
// what), and a refused cancel leaves the job as it was; callers whose
// name is a role's act for others as that role may: reader reads any
// job, admin and gateway read and cancel any.
func TestOwners(t *testing.T) {
	tq := testenv.NewQueue(t, "embedded", queue.Options{})
	serveEndpoints(t, tq.NC, tq.Queue, producer.Options{Logger: quiet})
	c := callers{t: t, nc: tq.NC, o: tq.Opts}
	alice, bob := c.mustSubmit("alice"), c.mustSubmit("bob")
	c.mustSubmit("producer-carol")
	c.mustSubmit("admin")

	for _, tc := range []struct {
		caller, id string
		write      bool
		// refused: the words the 403's description must hold ("" when
		// allowed).
		refused []string
	}{
		{"alice", alice, false, nil},
		{"bob", alice, false, []string{"bob (no role) may not read job " + alice + ": it is alice's"}},
		{"bob", alice, true, []string{"bob (no role) may not change job " + alice + ": it is alice's"}},
		{"alice", bob, true, []string{"alice (no role) may not change job " + bob + ": it is bob's"}},
		{"producer-carol", alice, false, []string{"producer-carol (role producer) may not read job " + alice}},
		{"producer-carol", alice, true, []string{"producer-carol (role producer) may not change job " + alice}},
		{"reader", alice, false, nil},
		{"reader-dash", bob, false, nil},
		{"reader", alice, true, []string{"reader (role reader) may not change job " + alice + ": it is alice's"}},
		{"reader-dash", bob, true, []string{"reader-dash (role reader) may not change job " + bob}},
		{"gateway", alice, false, nil},
		{"gateway-web", bob, false, nil},
		{"admin", alice, false, nil},
		{"anonymous", alice, false, []string{"anonymous (no role) may not read job " + alice}},
	} {
		what := "status"
		if tc.write {
			what = "cancel"
		}
		before := c.state(tc.id)
		st, se := c.ask(tc.caller, tc.id, tc.write)
		switch {
		case tc.refused == nil && se != nil:
			t.Errorf("%s of %s as %s: %v, want it answered", what, tc.id, tc.caller, se)
		case tc.refused == nil && st.ID != tc.id:
			t.Errorf("%s of %s as %s: the status of %q", what, tc.id, tc.caller, st.ID)
		case tc.refused != nil && (se == nil || se.Code != queue.CodeForbidden):
			t.Errorf("%s of %s as %s: %+v, %v; want a %s refusal", what, tc.id, tc.caller, st, se, queue.CodeForbidden)
		case tc.refused != nil:
			for _, w := range tc.refused {
				if !strings.Contains(se.Description, w) {
					t.Errorf("%s of %s as %s: refused with %q, want it to say %q", what, tc.id, tc.caller, se.Description, w)
				}
			}
		}
		if after := c.state(tc.id); tc.refused != nil && after != before {
			t.Errorf("%s of %s as %s was refused, yet the job went from %s to %s", what, tc.id, tc.caller, before, after)
		}
	}
	// Bob's cancel refused: Alice's job still runs. The roles that change
	// any job cancel it.
	if s := c.state(alice); s != job.Published {
		t.Fatalf("alice's job is %s after the refused cancels, want %s", s, job.Published)
	}
	for _, tc := range []struct{ caller, id string }{{"gateway-web", alice}, {"admin", bob}} {
		st, se := c.ask(tc.caller, tc.id, true)
		if se != nil || st.State != job.Cancelled {
			t.Errorf("cancel of %s as %s: %+v, %v; want it cancelled", tc.id, tc.caller, st, se)
		}
	}
	// The JSON form of a request is refused alike.
	data, se := request(t, tq.NC, tq.Opts.StatusSubject("bob"), `{"job": "`+alice+`"}`)
	if se == nil || se.Code != queue.CodeForbidden {
		t.Errorf(`status {"job": ...} of alice's job as bob: %s, %v; want %s`, data, se, queue.CodeForbidden)
	}
}

// TestQuota: a submission over one of its owner's quotas is refused at
// once, 429, naming the quota and its value; nothing of it is stored,
// and other owners are not concerned.
func TestQuota(t *testing.T) {
	puzzles := testenv.Puzzles(t, "../cli/testdata/17_clue_200.txt", 20)

	t.Run("lines pending, with the worker's usage", func(t *testing.T) {
		tq := testenv.NewQueue(t, "embedded", queue.Options{})
		startWorker(t, tq.NC, tq.Queue, nil, producer.Options{Logger: quiet, Quota: job.Quota{LinesPending: 10}})
		c := callers{t: t, nc: tq.NC, o: tq.Opts}
		_, se := c.submit("alice", puzzles[:11]...)
		wantQuota(t, se, "alice", "quota.lines_pending = 10", "11")
		if rep, se := c.submit("alice", puzzles[:10]...); se != nil || !strings.HasPrefix(rep.ID, "alice.") {
			t.Errorf("10 lines as alice: %+v, %v; want the job", rep, se)
		}
		assertJobs(t, tq.Queue, "alice", 1)
	})

	t.Run("request bytes", func(t *testing.T) {
		tq := testenv.NewQueue(t, "embedded", queue.Options{})
		startWorker(t, tq.NC, tq.Queue, nil, producer.Options{Logger: quiet, Quota: job.Quota{RequestBytes: 200}})
		c := callers{t: t, nc: tq.NC, o: tq.Opts}
		_, se := c.submit("alice", puzzles...)
		wantQuota(t, se, "alice", "quota.request_bytes = 200", "")
		assertJobs(t, tq.Queue, "alice", 0)
	})

	t.Run("jobs open, read from the records", func(t *testing.T) {
		tq := testenv.NewQueue(t, "embedded", queue.Options{})
		serveEndpoints(t, tq.NC, tq.Queue, producer.Options{Logger: quiet, Quota: job.Quota{JobsOpen: 1}})
		c := callers{t: t, nc: tq.NC, o: tq.Opts}
		first := c.mustSubmit("alice")
		_, se := c.submit("alice", testPuzzle)
		wantQuota(t, se, "alice", "quota.jobs_open = 1", "2")
		c.mustSubmit("bob") // a quota is an owner's
		// A cancelled job is not open: the next one is taken.
		if _, se := c.ask("alice", first, true); se != nil {
			t.Fatal(se)
		}
		c.mustSubmit("alice")
	})

	t.Run("jobs open, from the usage function", func(t *testing.T) {
		tq := testenv.NewQueue(t, "embedded", queue.Options{})
		usage := func(_ context.Context, owner string) (int, int64, error) {
			if owner == "alice" {
				return 3, 300, nil
			}
			return 0, 0, nil
		}
		serveEndpoints(t, tq.NC, tq.Queue, producer.Options{Logger: quiet, Quota: job.Quota{JobsOpen: 3}, Usage: usage})
		c := callers{t: t, nc: tq.NC, o: tq.Opts}
		_, se := c.submit("alice", testPuzzle)
		wantQuota(t, se, "alice", "quota.jobs_open = 3", "4")
		c.mustSubmit("bob")
		assertJobs(t, tq.Queue, "alice", 0)
	})
}

// wantQuota fails unless se is a 429 naming owner and quota ("name =
// value") and, unless "", what the owner has or asks.
func wantQuota(t *testing.T, se *queue.ServiceError, owner, quota, has string) {
	t.Helper()
	if se == nil || se.Code != queue.CodeQuota {
		t.Fatalf("submit as %s: %v, want a %s refusal naming %s", owner, se, queue.CodeQuota, quota)
	}
	for _, w := range []string{"owner " + owner + " ", quota} {
		if !strings.Contains(se.Description, w) {
			t.Errorf("refused with %q, want it to say %q", se.Description, w)
		}
	}
	if has != "" && !strings.Contains(se.Description, "has or asks "+has+")") {
		t.Errorf("refused with %q, want it to say the owner has or asks %s", se.Description, has)
	}
}

// assertJobs fails unless owner has n jobs recorded.
func assertJobs(t *testing.T, q *queue.Queue, owner string, n int) {
	t.Helper()
	sts, err := producer.Jobs(context.Background(), q, owner, 100, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != n {
		t.Errorf("%s has %d jobs recorded, want %d: a refused submission stores nothing", owner, len(sts), n)
	}
}
