package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// Submitted is the answer to POST /v1/jobs: the one submit reply
// (producer.Submitted) and the job's URLs.
type Submitted struct {
	producer.Submitted
	Links Links `json:"links"`
}

// Links are the URLs of a job.
type Links struct {
	Self    string `json:"self"`
	Results string `json:"results"`
}

func jobLinks(id string) Links {
	return Links{Self: "/v1/jobs/" + id, Results: "/v1/jobs/" + id + "/results"}
}

// postJobs answers POST /v1/jobs: the body is read as it arrives (text,
// one puzzle per line; or, with Content-Type application/json, an array
// of strings, one puzzle each) and streamed through producer.Submit, so
// memory does not grow with the body. The job is the caller's (its id
// starts with "<caller>."), within the caller's quotas: a submission over
// one gets a 429 over_quota naming it. ?force=true solves cached puzzles
// again; ?first=true stops at each puzzle's first solution;
// ?priority=low|normal|high sets the job's share of the workers.
//
// A body over MaxBodyBytes gets a 413, malformed JSON a 400, an upload
// broken off a 400. Bodies are read up to spoolBytes (1 MiB) before the
// job is created, so such a mistake in a small body leaves nothing behind;
// in a larger body it may be found after the first batches were
// published: producer.Submit marks that job failed (its view says so, and
// its results answer 409 job_failed at once), the error's details name it
// (job, job_state), and a new one must be submitted.
func (s *Server) postJobs(w http.ResponseWriter, r *http.Request) error {
	var opts client.SubmitOptions
	var err error
	if opts.Force, err = boolParam(r, "force"); err != nil {
		return err
	}
	if opts.First, err = boolParam(r, "first"); err != nil {
		return err
	}
	if opts.Priority, err = job.ParsePriority(r.URL.Query().Get("priority")); err != nil {
		return errorf(http.StatusBadRequest, CodeBadRequest, "?priority=: %v", err)
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		return tooLarge(s.opts.MaxBodyBytes, maxBodySetting)
	}
	if !s.nc.IsConnected() {
		// Publishing would wait for a reconnection until the time is up.
		return queueUnavailable(fmt.Errorf("NATS: %s", s.nc.Status()))
	}
	raw := &bodyReader{r: http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)}
	var body io.Reader = raw
	ctx := r.Context()
	if isJSON(r) {
		pr, pw := io.Pipe()
		done := make(chan struct{})
		go func(src io.Reader) {
			defer close(done)
			pw.CloseWithError(input.JSONLines(src, pw))
		}(body)
		defer func() {
			// Unblock the decoder if Submit stopped reading, and wait for it.
			_ = pr.Close()
			<-done
		}()
		body = pr
	}
	// bodyError returns the answer to a failure that is the body's (too
	// large, bad JSON, the upload broken off), or nil.
	bodyError := func(err error) *Error {
		var mbe *http.MaxBytesError
		var je *input.JSONError
		rerr := raw.failure()
		switch {
		case errors.As(err, &mbe), errors.As(rerr, &mbe):
			return tooLarge(s.opts.MaxBodyBytes, maxBodySetting)
		case errors.As(err, &je):
			return errorf(http.StatusBadRequest, CodeBadJSON, "%s", je.Msg)
		case rerr != nil:
			return errorf(http.StatusBadRequest, CodeBadRequest, "reading the body: %v", rerr)
		}
		return nil
	}
	// Read the first spoolBytes before creating the job: a body that fails
	// within them (bad JSON, over the limit, the client gone) leaves no job
	// behind; only a larger body is submitted as it arrives.
	spool := spoolBytes
	if r.ContentLength >= 0 && r.ContentLength < spoolBytes {
		// The lines are never longer than the body (JSON only shrinks).
		spool = max(16, int(r.ContentLength)+1)
	}
	br := bufio.NewReaderSize(body, spool)
	if _, err := br.Peek(spool); err != nil && !errors.Is(err, io.EOF) {
		if e := bodyError(err); e != nil {
			return e
		}
		return errorf(http.StatusBadRequest, CodeBadRequest, "reading the body: %v", err)
	}
	sub, err := s.client.As(callerOf(r)).Submit(ctx, br, opts)
	if err != nil {
		e := bodyError(err)
		switch {
		case e != nil:
		case producer.KindOf(err) == producer.KindBadRequest:
			e = errorf(http.StatusBadRequest, CodeBadRequest, "%v", err)
		case producer.KindOf(err) == producer.KindQuota:
			e = overQuota(err)
		case producer.KindOf(err) == producer.KindForbidden:
			// NATS refused the server's user: it may not act for this
			// owner (serve runs as a producer, not a gateway).
			e = forbidden(err)
		default:
			e = s.dependencyError(ctx, err)
		}
		if errors.Is(err, producer.ErrSubmit) {
			// The job exists, marked failed: say which, so the client
			// need not wonder about it.
			if e.Details == nil {
				e.Details = map[string]any{}
			}
			e.Details["job"], e.Details["job_state"] = sub.ID, string(job.Failed)
		}
		return e
	}
	if !opts.Force && s.cache.Enabled() {
		// The producer looked the distinct puzzles up (a lookup the cache
		// did not answer is a miss).
		s.metrics.CacheLookups(sub.Cached, sub.Queued)
	}
	out := Submitted{Submitted: sub, Links: jobLinks(sub.ID)}
	w.Header().Set("Location", out.Links.Self)
	writeJSON(w, http.StatusAccepted, &out)
	return nil
}

// spoolBytes is how much of a job's body (as lines) is read before the
// job is created.
const spoolBytes = 1 << 20

// bodyReader reads a request's body and remembers the first error it gave
// (but io.EOF): a failed submission whose body failed is the client's
// doing. It is safe for concurrent use of Read and failure.
type bodyReader struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// failure returns the first error reading the body gave, or nil.
func (b *bodyReader) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// boolParam reads an optional boolean query parameter.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, CodeBadRequest, "?%s=%q: want true or false", name, clip(v))
	}
	return b, nil
}

// Job is a job's status as the API shows it: the one status type
// (producer.Status) and the job's URLs.
type Job struct {
	producer.Status
	Links Links `json:"links"`
}

// jobView adds its links to a job's status.
func jobView(st producer.Status) Job { return Job{Status: st, Links: jobLinks(st.ID)} }

// jobStatus reads the status of the job named in r's path for r's caller
// (getJob), or cancels it (cancelJob): a job of another owner gets a 403
// forbidden, before it is read, unless the caller's role acts for others
// (client.Client.As).
func (s *Server) jobStatus(r *http.Request, cancel bool) (producer.Status, error) {
	id := r.PathValue("id")
	if !job.ValidID(id) {
		return producer.Status{}, errorf(http.StatusBadRequest, CodeBadJobID,
			"job id %q: want the id POST /v1/jobs returned (%s)", clip(id), job.IDForm)
	}
	do := s.client.As(callerOf(r)).Status
	if cancel {
		do = s.client.As(callerOf(r)).Cancel
	}
	st, err := do(r.Context(), id)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return st, errorf(http.StatusNotFound, CodeJobNotFound, "no job %s (never submitted, removed, or expired)", id)
	case errors.Is(err, client.ErrForbidden):
		return st, forbidden(err)
	case err != nil:
		return st, queueUnavailable(err)
	}
	return st, nil
}

// getJob answers GET /v1/jobs/{id}: the job's progress and counts.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	return s.writeJob(w, r, false)
}

// cancelJob answers POST /v1/jobs/{id}/cancel: the job is cancelled (its
// work not yet done leaves the queue; its results so far stay) and its
// view returned. A job that has ended is left as it is: 200 with its
// view all the same. Only the job's owner, admin and gateway may cancel
// it: another caller's cancel gets a 403 forbidden and changes nothing.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) error {
	return s.writeJob(w, r, true)
}

// writeJob answers with the view of the job in r's path, cancelled first
// if cancel.
func (s *Server) writeJob(w http.ResponseWriter, r *http.Request, cancel bool) error {
	st, err := s.jobStatus(r, cancel)
	if err != nil {
		return err
	}
	v := jobView(st)
	writeJSON(w, http.StatusOK, &v)
	return nil
}

// JobList is the answer of GET /v1/jobs.
type JobList struct {
	Jobs []Job `json:"jobs"`
}

// maxJobList bounds ?limit of GET /v1/jobs.
const maxJobList = 1000

// listJobs answers GET /v1/jobs?limit=N: the caller's newest jobs, newest
// first (default 20, at most 1000); every owner's for a caller whose role
// reads others' jobs (admin, gateway, reader).
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxJobList {
			return errorf(http.StatusBadRequest, CodeBadRequest, "?limit=%q: want a number from 1 to %d", clip(v), maxJobList)
		}
		limit = n
	}
	jobs, err := s.jobViews(r.Context(), listOwner(callerOf(r)), limit)
	if err != nil {
		return queueUnavailable(err)
	}
	writeJSON(w, http.StatusOK, &JobList{Jobs: jobs})
	return nil
}

// jobViews returns the views of owner's newest jobs ("": every owner's),
// from their records alone.
func (s *Server) jobViews(ctx context.Context, owner string, limit int) ([]Job, error) {
	c := s.client
	if owner != "" {
		c = c.As(owner)
	}
	sts, err := c.List(ctx, client.ListOptions{All: owner == "", Limit: limit})
	out := make([]Job, 0, len(sts))
	for _, st := range sts {
		out = append(out, jobView(st))
	}
	return out, err
}

// writeTimeout bounds each write of a stream: a client that does not read
// for that long is dropped.
const writeTimeout = time.Minute

// getResults answers GET /v1/jobs/{id}/results: the result of every line
// in input order, as NDJSON (result records, as `--format jsonl`; the
// default, or ?format=jsonl) or text (?format=text, as `sudoku solve`
// prints). Results are sent as soon as every line before them has one, so
// a client reads a long job as it progresses; the answer ends when the
// job is finished. With ?wait=false, a job not finished yet gets a 409
// instead; so does a failed job. The results come from JetStream
// (client.FollowWith), as `sudoku job wait` reads them. If the stream breaks
// once the answer has begun, it is cut short (no final chunk), so the
// client cannot take it for complete. Only the job's owner, and the roles
// that read others' jobs, may read them (403 forbidden otherwise).
func (s *Server) getResults(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	format := result.JSONL
	contentType := "application/x-ndjson"
	switch f := q.Get("format"); f {
	case "", "jsonl", "ndjson", "json":
	case "text":
		format, contentType = result.Text, "text/plain; charset=utf-8"
	default:
		return errorf(http.StatusBadRequest, CodeBadRequest, "?format=%q: want jsonl (the default) or text", clip(f))
	}
	wait := true
	if q.Has("wait") {
		var err error
		if wait, err = boolParam(r, "wait"); err != nil {
			return err
		}
	}
	st, err := s.jobStatus(r, false)
	if err != nil {
		return err
	}
	id := st.ID
	if st.State == job.Failed {
		return errorf(http.StatusConflict, CodeJobFailed, "job %s failed and has no results: %s", id, st.Error)
	}
	if !wait && !st.Complete && st.State != job.Cancelled {
		return errorf(http.StatusConflict, CodeJobNotFinished, "job %s is not finished: %d of %d lines done",
			id, st.Done, st.Lines)
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streams, cancel)
	defer stop()

	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	out := result.NewWriter(w, format)
	flush := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := out.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	_ = flush()
	var werr error // the client's
	_, err = s.client.As(callerOf(r)).FollowWith(ctx, id, func(res result.Result) error {
		if err := out.Write(res); err != nil {
			werr = err
			return err
		}
		return nil
	}, client.FollowOptions{Brief: format != result.JSONL, Progress: func(client.Progress) {
		if werr == nil {
			werr = flush()
		}
	}})
	switch {
	case werr != nil || ctx.Err() != nil:
		return nil // the client went away, or the server is stopping
	case err != nil:
		s.log.Warn("httpapi: results stream cut short", "job", id, "err", err)
		panic(http.ErrAbortHandler) // no final chunk: the client sees the answer is incomplete
	}
	_ = flush()
	return nil
}
