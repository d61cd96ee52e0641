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

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
	"github.com/sudoku-queue/sudoku-queue/producer"
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

// JobOptions are a submit request's settings of its job.
type JobOptions struct {
	// First, Force and Priority are as client.SubmitOptions's;
	// JSONResults stores the results in the JSON form, not the binary.
	First, Force, JSONResults bool
	Priority                  job.Priority
}

// Caller is what the endpoints ask of a client acting for one caller
// (client.Client.As; client.Client.ServiceEndpoints makes the endpoints
// over it): it holds the policy (who may touch which job, quotas, the
// growth limit), the endpoints only translate.
type Caller struct {
	// Submit submits in as a job of the caller's.
	Submit func(ctx context.Context, in *input.Reader, o JobOptions) (producer.Submitted, error)
	// Status and Cancel read or cancel job id for the caller.
	Status, Cancel func(ctx context.Context, id string) (producer.Status, error)
}

// Endpoints returns the submit, status and cancel endpoints of the micro
// service for the queue of qo, each request made through as(caller), the
// caller being the subject's last token. log receives a line per job
// submitted (nil: slog.Default()).
func Endpoints(qo queue.Options, as func(caller string) Caller, log *slog.Logger) []worker.Endpoint {
	if log == nil {
		log = slog.Default()
	}
	h := &handler{as: as, log: log}
	meta := func(desc string) map[string]string {
		m := queue.ServiceMetadata(qo)
		m["description"] = desc
		return m
	}
	return []worker.Endpoint{
		{
			Name:    SubmitEndpoint,
			Subject: qo.SubmitSubject("*"),
			Handler: telemetry.MicroHandler(SubmitEndpoint, qo.SubmitSubject("{caller}"), micro.HandlerFunc(h.submit)),
			Metadata: meta(`submit a bulk job owned by the caller (the subject's last token): the body is puzzles as text (one a line, or 9-line grids), or JSON ` +
				`{"puzzles": ["..."], "first": false, "force": false, "json_results": true, "priority": "normal"} (results in JSON unless json_results is false; priority low, normal or high); ` +
				`the reply is JSON: the job id, its counts and where its results appear`),
		},
		{
			Name:     StatusEndpoint,
			Subject:  qo.StatusSubject("*"),
			Handler:  telemetry.MicroHandler(StatusEndpoint, qo.StatusSubject("{caller}"), micro.HandlerFunc(h.status)),
			Metadata: meta(`a job's state and counts, for its owner (the subject's last token) or a role that reads others': the body is the job id, or JSON {"job": "..."}; the reply is JSON`),
		},
		{
			Name:    CancelEndpoint,
			Subject: qo.CancelSubject("*"),
			Handler: telemetry.MicroHandler(CancelEndpoint, qo.CancelSubject("{caller}"), micro.HandlerFunc(h.cancel)),
			Metadata: meta(`cancel a job of the caller's (the subject's last token; admin and gateway: anyone's): its work not yet done leaves the queue, its results so far stay readable; ` +
				`the body is the job id, or JSON {"job": "..."}; the reply is the job's status, as the status endpoint's`),
		},
	}
}

// handler serves the endpoints.
type handler struct {
	as  func(caller string) Caller
	log *slog.Logger
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
	owner := queue.Caller(req.Subject())
	if err := job.CheckOwner(owner); err != nil {
		refuse(req, queue.CodeBadRequest, "the subject's last token names the job's owner: "+err.Error(), nil)
		return
	}
	o := JobOptions{First: sr.First, Force: sr.Force, JSONResults: sr.JSON()}
	if o.Priority, err = job.ParsePriority(sr.Priority); err != nil {
		refuse(req, queue.CodeBadRequest, err.Error(), nil)
		return
	}
	ctx, cancel := context.WithTimeout(telemetry.RequestContext(req), submitTimeout)
	defer cancel()
	sub, err := h.as(owner).Submit(ctx, in, o)
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
	h.log.InfoContext(ctx, "job submitted over NATS", "job", sub.ID, "owner", owner, "lines", sub.Lines, "batches", sub.Batches, "form", sub.Results.Form)
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
		b.WriteString(input.OneLine(p))
		b.WriteByte('\n')
	}
	lines := b.String()
	if n, _ := input.CountLines(strings.NewReader(lines)); n == 0 {
		return nil, errors.New("the request holds no puzzle: \"puzzles\" is missing, empty, or holds only blank and comment lines")
	}
	return input.NewLineReader(strings.NewReader(lines)), nil
}

// status answers a request of the status endpoint.
func (h *handler) status(req micro.Request) { h.answerJob(req, false) }

// cancel answers a request of the cancel endpoint: the job's status once
// cancelled (or as it is, if it had ended).
func (h *handler) cancel(req micro.Request) { h.answerJob(req, true) }

// answerJob answers a request that names a job (its id, or JSON {"job":
// ...}) with its status, once cancelled if cancel. The caller (the
// subject's last token) must own the job, or act for others
// (producer.MayTouch, asked by the client).
func (h *handler) answerJob(req micro.Request, cancel bool) {
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
	do := h.as(caller).Status
	if cancel {
		do = h.as(caller).Cancel
	}
	ctx, stop := context.WithTimeout(telemetry.RequestContext(req), statusTimeout)
	defer stop()
	st, err := do(ctx, id)
	switch {
	case errors.As(err, new(*producer.ForbiddenError)):
		refuse(req, queue.CodeForbidden, err.Error(), nil)
	case producer.KindOf(err) == producer.KindNotFound:
		refuse(req, queue.CodeNotFound, fmt.Sprintf("no job %s (never submitted, removed, or expired)", id), nil)
	case err != nil:
		refuse(req, codeOf(err), fmt.Sprintf("job %s: %v", id, err), nil)
	default:
		respond(req, &st)
	}
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
