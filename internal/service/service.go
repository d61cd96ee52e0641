// Package service lets a client in any language run a bulk job over NATS
// alone: it builds the submit, status and cancel endpoints that every
// worker adds to its NATS micro service "sudoku", beside solve (see
// worker.Options.Endpoints, and docs/protocol.md for the protocol).
//
// Each endpoint's subject ends with the caller's name (P.submit.<caller>,
// P.status.<caller>, P.cancel.<caller>), which NATS permissions
// (internal/roles) hold each user to: with roles on, a user may publish
// only on its own name's subjects. The job submitted belongs to the
// caller (its id is "<caller>.<serial>"), and status and cancel answer
// only a caller that owns the job, or one whose role acts for others
// (producer.MayTouch: admin and gateway may read and cancel any job,
// reader may read any). With roles off the caller is whatever name the
// client puts in the subject: a name, not a proof.
//
//   - submit (queue.Options.SubmitSubject, P.submit.<caller>): the
//     request is the puzzles as text, or a JSON queue.SubmitRequest; the
//     worker that gets it submits the job for the caller as
//     producer.Submit does, within the caller's quotas
//     (producer.Options.Quota), and replies with a queue.SubmitReply:
//     the job's id, its counts, and where its results appear (a message
//     per batch in the results stream, in the JSON form unless the
//     request asked for the binary one).
//   - status (P.status.<caller>): the request is a job id, as text or a
//     JSON queue.StatusRequest; the reply is a queue.StatusReply (from
//     producer.JobStatus).
//   - cancel (P.cancel.<caller>): the request is a job id, as for status;
//     the job is cancelled (producer.Cancel) and the reply is its status.
//
// A refused request gets a micro error: the Nats-Service-Error-Code
// header holds one of the queue.Code* codes and Nats-Service-Error says
// what is wrong: queue.CodeForbidden (403) names the caller, the job's
// owner and what was refused; queue.CodeQuota (429) names the quota and
// its value. Each worker handles one request of each endpoint at a time;
// the workers share the requests (the micro service's queue group).
package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// The endpoints' names, as 'nats micro info' lists them.
const (
	SubmitEndpoint = "submit"
	StatusEndpoint = "status"
	CancelEndpoint = "cancel"
)

// Bounds of one request's work.
const (
	// submitTimeout bounds a submission: a request holds at most NATS's
	// max_payload (1 MB by default) of puzzles.
	submitTimeout = time.Minute
	// statusTimeout bounds reading a job's record and its results'
	// headers.
	statusTimeout = 30 * time.Second
)

// Endpoints returns the submit, status and cancel endpoints of the micro
// service for q: jobs are submitted as producer.New(q, c, opts) would (c
// may be nil: no cache), for the caller (opts.Owner is the subject's last
// token), each request's options (first, force, json_results, priority)
// replacing opts' own; opts.Quota and opts.Usage bound what each owner
// may queue. log receives a line per job submitted (nil: slog.Default()).
func Endpoints(q *queue.Queue, c *cache.Guard, opts producer.Options, log *slog.Logger) []worker.Endpoint {
	if log == nil {
		log = slog.Default()
	}
	if opts.Logger == nil {
		opts.Logger = log
	}
	h := &handler{q: q, cache: c, opts: opts, log: log}
	meta := func(desc string) map[string]string {
		m := queue.ServiceMetadata(q.Opts)
		m["description"] = desc
		return m
	}
	return []worker.Endpoint{
		{
			Name:    SubmitEndpoint,
			Subject: q.Opts.SubmitSubject("*"),
			Handler: telemetry.MicroHandler(SubmitEndpoint, q.Opts.SubmitSubject("{caller}"), micro.HandlerFunc(h.submit)),
			Metadata: meta(`submit a bulk job owned by the caller (the subject's last token): the body is puzzles as text (one a line, or 9-line grids), or JSON ` +
				`{"puzzles": ["..."], "first": false, "force": false, "json_results": true, "priority": "normal"} (results in JSON unless json_results is false; priority low, normal or high); ` +
				`the reply is JSON: the job id, its counts and where its results appear`),
		},
		{
			Name:     StatusEndpoint,
			Subject:  q.Opts.StatusSubject("*"),
			Handler:  telemetry.MicroHandler(StatusEndpoint, q.Opts.StatusSubject("{caller}"), micro.HandlerFunc(h.status)),
			Metadata: meta(`a job's state and counts, for its owner (the subject's last token) or a role that reads others': the body is the job id, or JSON {"job": "..."}; the reply is JSON`),
		},
		{
			Name:    CancelEndpoint,
			Subject: q.Opts.CancelSubject("*"),
			Handler: telemetry.MicroHandler(CancelEndpoint, q.Opts.CancelSubject("{caller}"), micro.HandlerFunc(h.cancel)),
			Metadata: meta(`cancel a job of the caller's (the subject's last token; admin and gateway: anyone's): its work not yet done leaves the queue, its results so far stay readable; ` +
				`the body is the job id, or JSON {"job": "..."}; the reply is the job's status, as the status endpoint's`),
		},
	}
}

// handler serves the endpoints.
type handler struct {
	q     *queue.Queue
	cache *cache.Guard
	opts  producer.Options
	log   *slog.Logger
}

// submit answers a request of the submit endpoint.
func (h *handler) submit(req micro.Request) {
	sr, text, err := queue.ParseSubmitRequest(req.Data())
	if err != nil {
		refuse(req, queue.CodeBadRequest, err.Error(), nil)
		return
	}
	in, err := reader(&sr, text)
	if err != nil {
		refuse(req, queue.CodeBadRequest, err.Error(), nil)
		return
	}
	opts := h.opts
	opts.Owner = queue.Caller(req.Subject())
	if err := job.CheckOwner(opts.Owner); err != nil {
		refuse(req, queue.CodeBadRequest, "the subject's last token names the job's owner: "+err.Error(), nil)
		return
	}
	opts.FirstSolution, opts.Force, opts.JSONResults = sr.First, sr.Force, sr.JSON()
	if opts.Priority, err = job.ParsePriority(sr.Priority); err != nil {
		refuse(req, queue.CodeBadRequest, err.Error(), nil)
		return
	}
	if opts.MaxGrowth == 0 {
		opts.MaxGrowth = producer.DefaultMaxGrowth
	}
	ctx, cancel := context.WithTimeout(telemetry.RequestContext(req), submitTimeout)
	defer cancel()
	sub, err := producer.New(h.q, h.cache, opts).Submit(ctx, in)
	if err != nil {
		var data []byte
		desc := "cannot submit the job: " + err.Error()
		if errors.Is(err, producer.ErrSubmit) {
			// The job exists, marked failed: say which.
			data, _ = json.Marshal(map[string]string{"job": sub.ID, "state": string(job.Failed)})
			desc = err.Error()
		}
		refuse(req, codeOf(err), desc, data)
		return
	}
	h.log.InfoContext(ctx, "job submitted over NATS", "job", sub.ID, "owner", opts.Owner, "lines", sub.Lines, "batches", sub.Batches, "form", sub.Results.Form)
	respond(req, &sub)
}

// respond answers req with v as JSON, without escaping '<', '>' and '&'
// (the reply's subject filter ends in '>').
func respond(req micro.Request, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		refuse(req, queue.CodeInternal, "cannot encode the reply: "+err.Error(), nil)
		return
	}
	_ = req.Respond(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// reader returns the reader of a submit request's puzzles: text as a
// file, or the JSON puzzles one a line. A request without any puzzle is
// refused, before a job is created.
func reader(sr *queue.SubmitRequest, text []byte) (*input.Reader, error) {
	if text != nil {
		if n, _ := input.Count(bytes.NewReader(text)); n == 0 {
			return nil, errors.New("the request holds no puzzle: want puzzles as text (one a line, or 9-line grids) or JSON {\"puzzles\": [...]}")
		}
		return input.NewReader(bytes.NewReader(text)), nil
	}
	var b strings.Builder
	for _, p := range sr.Puzzles {
		b.WriteString(oneLine(p))
		b.WriteByte('\n')
	}
	lines := b.String()
	if n, _ := input.CountLines(strings.NewReader(lines)); n == 0 {
		return nil, errors.New("the request holds no puzzle: \"puzzles\" is missing, empty, or holds only blank and comment lines")
	}
	return input.NewLineReader(strings.NewReader(lines)), nil
}

// oneLine returns a puzzle of a JSON request as one line, so that element
// i stays line i+1: a 9-line grid in its one-line form; the line breaks
// of anything else turned into spaces (its error then describes it as one
// line).
func oneLine(p string) string {
	if !strings.ContainsAny(p, "\r\n") {
		return p
	}
	if g, err := solver.Parse(p); err == nil {
		return g.String()
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(p)
}

// status answers a request of the status endpoint.
func (h *handler) status(req micro.Request) {
	h.answerJob(req, false, func(ctx context.Context, id string) (producer.Status, error) {
		return producer.JobStatus(ctx, h.q, id)
	})
}

// cancel answers a request of the cancel endpoint: the job's status once
// cancelled (or as it is, if it had ended).
func (h *handler) cancel(req micro.Request) {
	h.answerJob(req, true, func(ctx context.Context, id string) (producer.Status, error) {
		return producer.Cancel(ctx, h.q, id)
	})
}

// answerJob answers a request that names a job (its id, or JSON {"job":
// ...}) with the status of the record do returns for it.
// The caller (the subject's last token) must own the job, or act for
// others (producer.MayTouch); write says the request changes it.
func (h *handler) answerJob(req micro.Request, write bool, do func(ctx context.Context, id string) (producer.Status, error)) {
	id, err := queue.ParseStatusRequest(req.Data())
	if err != nil {
		refuse(req, queue.CodeBadRequest, err.Error(), nil)
		return
	}
	caller := queue.Caller(req.Subject())
	if err := job.CheckOwner(caller); err != nil {
		refuse(req, queue.CodeBadRequest, "the subject's last token names the caller: "+err.Error(), nil)
		return
	}
	if err := producer.MayTouch(caller, id, write); err != nil {
		refuse(req, queue.CodeForbidden, err.Error(), nil)
		return
	}
	ctx, cancel := context.WithTimeout(telemetry.RequestContext(req), statusTimeout)
	defer cancel()
	st, err := do(ctx, id)
	switch {
	case producer.KindOf(err) == producer.KindNotFound:
		refuse(req, queue.CodeNotFound, fmt.Sprintf("no job %s (never submitted, removed, or expired)", id), nil)
		return
	case err != nil:
		refuse(req, codeOf(err), fmt.Sprintf("job %s: %v", id, err), nil)
		return
	}
	respond(req, &st)
}

// codes are the micro error codes of producer's kinds of failure.
var codes = map[producer.Kind]string{
	producer.KindBadRequest:  queue.CodeBadRequest,
	producer.KindNotFound:    queue.CodeNotFound,
	producer.KindUnavailable: queue.CodeUnavailable,
	producer.KindInternal:    queue.CodeInternal,
	producer.KindForbidden:   queue.CodeForbidden,
	producer.KindQuota:       queue.CodeQuota,
}

// codeOf returns the error code of a failure of a call on a job:
// CodeUnavailable when JetStream did not answer (try again later).
func codeOf(err error) string { return codes[producer.KindOf(err)] }

// refuse answers req with a micro error. A header holds one line: the
// description's line breaks become spaces.
func refuse(req micro.Request, code, desc string, data []byte) {
	desc = strings.Join(strings.Fields(desc), " ")
	_ = req.Error(code, desc, data)
}
