package httpapi

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// bearer returns the header of a token.
func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// The tokens of the principals of TestPrincipals.
var testPrincipals = []Principal{
	{Name: "alice", Token: "tok-alice"},
	{Name: "alice", Token: "tok-alice-2"}, // a second token of hers
	{Name: "bob", Token: "tok-bob"},
	{Name: "reader-dash", Token: "tok-reader"},
	{Name: "gateway-web", Token: "tok-gateway"},
	{Token: "tok-own"}, // the server's own owner's
}

// submitAs submits puzzles as the principal of header and returns the job.
func (e *env) submitAs(puzzles []string, header ...string) Submitted {
	e.t.Helper()
	res, data := e.post("/v1/jobs", strings.Join(puzzles, "\n")+"\n", header...)
	if res.StatusCode != http.StatusAccepted {
		e.t.Fatalf("POST /v1/jobs as %v: %d %s", header, res.StatusCode, data)
	}
	var s Submitted
	decode(e.t, data, &s)
	return s
}

// jobState returns job id's state as the caller of header reads it.
func (e *env) jobState(id string, header ...string) job.State {
	e.t.Helper()
	res, data := e.get("/v1/jobs/"+id, header...)
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /v1/jobs/%s: %d %s", id, res.StatusCode, data)
	}
	var j Job
	decode(e.t, data, &j)
	return j.State
}

// listed returns the ids GET /v1/jobs lists for the caller of header.
func (e *env) listed(header ...string) []string {
	e.t.Helper()
	res, data := e.get("/v1/jobs?limit=1000", header...)
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /v1/jobs: %d %s", res.StatusCode, data)
	}
	var l JobList
	decode(e.t, data, &l)
	var ids []string
	for _, j := range l.Jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

// sorted returns ids sorted.
func sorted(ids ...string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

// wantForbidden checks a 403 forbidden naming caller, owner, job and
// operation, in the message and the details.
func wantForbidden(t *testing.T, res *http.Response, data []byte, caller, owner, id, operation string) {
	t.Helper()
	b := wantError(t, res, data, http.StatusForbidden, CodeForbidden, caller, owner+"'s", id, "may not "+operation)
	want := map[string]any{"caller": caller, "owner": owner, "job": id, "operation": operation}
	for k, v := range want {
		if b.Error.Details[k] != v {
			t.Errorf("403 details %v, want %s %q", b.Error.Details, k, v)
		}
	}
}

// TestPrincipals: each token names a principal, and each call acts for
// it. Alice's token submits alice's job (its id starts "alice."); bob's
// GET, cancel and results of it are refused (403 forbidden, naming him,
// her, the job and what) and change nothing, while she and the roles
// that act for others read it; each lists only their own jobs (in GET
// /v1/jobs, /v1/stats and /v1/events), the reader every owner's; the
// gateway cancels anyone's.
func TestPrincipals(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true, opts: Options{Principals: testPrincipals}})
	alice, alice2, bob := bearer("tok-alice"), bearer("tok-alice-2"), bearer("tok-bob")
	reader, gateway, own := bearer("tok-reader"), bearer("tok-gateway"), bearer("tok-own")
	ps := variants(t, 120, clue17)

	// No worker yet: the jobs stay open.
	a := e.submitAs(ps[:100], alice...)
	b := e.submitAs(ps[100:110], bob...)
	a2 := e.submitAs(ps[110:], alice2...)
	o := e.submitAs(ps[:1], own...)
	for _, tc := range []struct{ id, owner string }{{a.ID, "alice"}, {b.ID, "bob"}, {a2.ID, "alice"}, {o.ID, "anonymous"}} {
		if !strings.HasPrefix(tc.id, tc.owner+".") || job.OwnerOf(tc.id) != tc.owner {
			t.Errorf("job %s: want an id starting %s.: the token's principal owns the job", tc.id, tc.owner)
		}
	}

	// Bob may not touch Alice's job, nor she his.
	res, data := e.get("/v1/jobs/"+a.ID, bob...)
	wantForbidden(t, res, data, "bob", "alice", a.ID, "read")
	res, data = e.get("/v1/jobs/"+a.ID+"/results", bob...)
	wantForbidden(t, res, data, "bob", "alice", a.ID, "read")
	res, data = e.get("/v1/jobs/"+a.ID+"/results?format=text&wait=false", bob...)
	wantForbidden(t, res, data, "bob", "alice", a.ID, "read")
	res, data = e.post("/v1/jobs/"+a.ID+"/cancel", "", bob...)
	wantForbidden(t, res, data, "bob", "alice", a.ID, "change")
	res, data = e.post("/v1/jobs/"+b.ID+"/cancel", "", alice...)
	wantForbidden(t, res, data, "alice", "bob", b.ID, "change")
	res, data = e.post("/v1/jobs/"+a.ID+"/cancel", "", reader...)
	wantForbidden(t, res, data, "reader-dash", "alice", a.ID, "change")
	res, data = e.get("/v1/jobs/"+a.ID, own...)
	wantForbidden(t, res, data, "anonymous", "alice", a.ID, "read")
	// A job that does not exist is refused alike: a 403 tells nothing.
	res, data = e.get("/v1/jobs/alice.0123456789abcdefghijklmnop", bob...)
	wantForbidden(t, res, data, "bob", "alice", "alice.0123456789abcdefghijklmnop", "read")

	// The refused cancels changed nothing.
	for _, h := range [][]string{alice, alice2, reader, gateway} {
		if s := e.jobState(a.ID, h...); s != job.Published {
			t.Errorf("alice's job is %s, read with %v after the refused cancels; want %s", s, h, job.Published)
		}
	}

	// Each lists their own jobs; the reader and the gateway everyone's.
	for _, tc := range []struct {
		name   string
		header []string
		want   []string
	}{
		{"alice", alice, sorted(a.ID, a2.ID)},
		{"alice's second token", alice2, sorted(a.ID, a2.ID)},
		{"bob", bob, sorted(b.ID)},
		{"the server's own owner", own, sorted(o.ID)},
		{"reader-dash", reader, sorted(a.ID, a2.ID, b.ID, o.ID)},
		{"gateway-web", gateway, sorted(a.ID, a2.ID, b.ID, o.ID)},
	} {
		if got := e.listed(tc.header...); !slices.Equal(got, tc.want) {
			t.Errorf("GET /v1/jobs as %s: %v, want %v", tc.name, got, tc.want)
		}
		var st Stats
		res, data := e.get("/v1/stats", tc.header...)
		decode(t, data, &st)
		var ids []string
		for _, j := range st.Jobs {
			ids = append(ids, j.ID)
		}
		slices.Sort(ids)
		if res.StatusCode != http.StatusOK || !slices.Equal(ids, tc.want) {
			t.Errorf("GET /v1/stats as %s: %d, jobs %v, want %v", tc.name, res.StatusCode, ids, tc.want)
		}
	}
	// The events of bob and of the reader, side by side: each its jobs.
	for _, tc := range []struct {
		header []string
		want   []string
	}{{bob, sorted(b.ID)}, {reader, sorted(a.ID, a2.ID, b.ID, o.ID)}} {
		for i, ids := range e.eventJobs(2, tc.header...) {
			if !slices.Equal(ids, tc.want) {
				t.Errorf("/v1/events as %v, event %d: jobs %v, want %v", tc.header, i, ids, tc.want)
			}
		}
	}

	// The gateway cancels bob's job; alice's runs whole, and she reads
	// its results, which bob may not.
	res, data = e.post("/v1/jobs/"+b.ID+"/cancel", "", gateway...)
	if res.StatusCode != http.StatusOK || e.jobState(b.ID, bob...) != job.Cancelled {
		t.Errorf("the gateway's cancel of bob's job: %d %s", res.StatusCode, data)
	}
	e.startWorker()
	res, data = e.get("/v1/jobs/"+a.ID+"/results?format=text", alice2...)
	if want := localText(t, strings.Join(ps[:100], "\n")+"\n", result.Text); res.StatusCode != http.StatusOK || string(data) != want {
		t.Errorf("alice's results: %d, %d bytes, want %d bytes as solve --local's", res.StatusCode, len(data), len(want))
	}
	res, data = e.get("/v1/jobs/"+a.ID+"/results", bob...)
	wantForbidden(t, res, data, "bob", "alice", a.ID, "read")
	res, data = e.get("/v1/jobs/"+a.ID+"/results?format=text", reader...)
	if res.StatusCode != http.StatusOK || strings.Count(string(data), "\n") != 100 {
		t.Errorf("the reader's read of alice's results: %d %.200s", res.StatusCode, data)
	}

	// Tokens: a wrong one is a 401; an X-Sudoku-Owner header beside a
	// token is refused, never taken.
	res, data = e.get("/v1/jobs", bearer("tok-mallory")...)
	wantError(t, res, data, http.StatusUnauthorized, CodeUnauthorized)
	res, data = e.get("/v1/jobs/"+a.ID, append(bob, OwnerHeader, "alice")...)
	wantError(t, res, data, http.StatusBadRequest, CodeBadRequest, OwnerHeader, "bob")
}

// eventJobs reads n "stats" events of /v1/events as the caller of header
// and returns the ids of the jobs of each, sorted.
func (e *env) eventJobs(n int, header ...string) [][]string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/events", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("/v1/events: %d", res.StatusCode)
	}
	br := bufio.NewReader(res.Body)
	var out [][]string
	for range n {
		_, data := readEvent(e.t, br)
		var st Stats
		decode(e.t, data, &st)
		ids := []string{}
		for _, j := range st.Jobs {
			ids = append(ids, j.ID)
		}
		slices.Sort(ids)
		out = append(out, ids)
	}
	return out
}

// TestOwnerHeader: without a token, a call acts for the server's own
// owner, or, when the server takes it (roles off), for the owner the
// X-Sudoku-Owner header names; a server that does not take the header
// refuses it.
func TestOwnerHeader(t *testing.T) {
	ps := variants(t, 3, clue17)
	t.Run("taken", func(t *testing.T) {
		e := newEnv(t, envOptions{noWorker: true, opts: Options{OwnerHeader: true}})
		carol := []string{OwnerHeader, "carol"}
		c := e.submitAs(ps[:1], carol...)
		anon := e.submitAs(ps[1:2])
		if job.OwnerOf(c.ID) != "carol" || job.OwnerOf(anon.ID) != job.DefaultOwner {
			t.Fatalf("jobs %s (as carol) and %s (no header)", c.ID, anon.ID)
		}
		res, data := e.get("/v1/jobs/" + c.ID)
		wantForbidden(t, res, data, "anonymous", "carol", c.ID, "read")
		if s := e.jobState(c.ID, carol...); s != job.Published {
			t.Errorf("carol's job as carol: %s", s)
		}
		if got := e.listed(carol...); !slices.Equal(got, []string{c.ID}) {
			t.Errorf("carol lists %v", got)
		}
		res, data = e.get("/v1/jobs", OwnerHeader, "car ol")
		wantError(t, res, data, http.StatusBadRequest, CodeBadRequest, OwnerHeader)
	})
	t.Run("not taken", func(t *testing.T) {
		e := newEnv(t, envOptions{noWorker: true, opts: Options{}})
		res, data := e.post("/v1/jobs", ps[0], OwnerHeader, "carol")
		wantError(t, res, data, http.StatusBadRequest, CodeBadRequest, OwnerHeader, "not taken")
		if got := e.listed(); len(got) != 0 {
			t.Errorf("a refused submission left jobs: %v", got)
		}
		if s := e.submitAs(ps[:1]); job.OwnerOf(s.ID) != job.DefaultOwner {
			t.Errorf("job %s without a token nor a header: want the server's own owner's", s.ID)
		}
	})
}

// TestQuotaRefused: a submission over one of its owner's quotas is a 429
// over_quota naming the quota and its value, and stores nothing; another
// owner is not concerned.
func TestQuotaRefused(t *testing.T) {
	opts := Options{Principals: testPrincipals}
	opts.Producer.Quota = job.Quota{JobsOpen: 1, LinesPending: 50}
	e := newEnv(t, envOptions{noWorker: true, opts: opts})
	alice, bob := bearer("tok-alice"), bearer("tok-bob")
	ps := variants(t, 60, clue17)

	res, data := e.post("/v1/jobs", strings.Join(ps[:51], "\n"), alice...)
	b := wantError(t, res, data, http.StatusTooManyRequests, CodeOverQuota, "alice", "quota.lines_pending = 50")
	if d := b.Error.Details; d["quota"] != "quota.lines_pending" || d["limit"] != float64(50) || d["owner"] != "alice" || d["has"] != float64(51) {
		t.Errorf("429 details %v", d)
	}
	first := e.submitAs(ps[:10], alice...)
	res, data = e.post("/v1/jobs", ps[20], alice...)
	b = wantError(t, res, data, http.StatusTooManyRequests, CodeOverQuota, "alice", "quota.jobs_open = 1")
	if d := b.Error.Details; d["quota"] != "quota.jobs_open" || d["limit"] != float64(1) || d["has"] != float64(2) {
		t.Errorf("429 details %v", d)
	}
	if got := e.listed(alice...); !slices.Equal(got, []string{first.ID}) {
		t.Errorf("alice's jobs %v after the refusals, want only %s", got, first.ID)
	}
	e.submitAs(ps[30:31], bob...) // bob's quota is his own
}
