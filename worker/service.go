package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Endpoint is one more endpoint of the micro service.
type Endpoint struct {
	Name    string
	Subject string
	Handler micro.Handler
	// Metadata describes the endpoint in 'nats micro info'.
	Metadata map[string]string
}

// solveTimeout bounds the search of one request on the solve endpoint.
const solveTimeout = 10 * time.Second

// solveRequest is a request of the solve endpoint on its way to a solver.
type solveRequest struct {
	req      micro.Request
	grid     solver.Grid
	first    bool
	noLookup bool // queue.HdrNoLookup: the client missed in the cache
	start    time.Time
	span     trace.Span // from the request's arrival to its answer
	// bind, in the first message only (from startService), is the state
	// of the endpoint's handler for serveSolves to bind to its context.
	bind *inlineSolves
}

// inlineSolves lets the solve endpoint's handler answer a request on its
// own goroutine, with a solver of its own, instead of handing it to
// serveSolves: one goroutine hand-off less for each request. The micro
// service calls the handler of an endpoint one request at a time. The
// handler solves inline only while serveSolves is bound (ctx set): it
// gives the handler the worker's context, and when the worker stops, it
// unbinds and waits for the request being solved before returning, as it
// waits for the requests it solves itself. Unbound, the handler hands
// requests to serveSolves as before.
type inlineSolves struct {
	mu     sync.Mutex
	ctx    context.Context // nil: unbound
	active sync.WaitGroup  // a request being solved inline
	sv     solver.Solver   // only the handler's goroutine uses it
}

// acquire returns the context to solve a request inline with, and false
// when the handler is not bound (then it hands the request over). A true
// acquire is followed by a release.
func (s *inlineSolves) acquire() (context.Context, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return nil, false
	}
	s.active.Add(1)
	return s.ctx, true
}

func (s *inlineSolves) release() { s.active.Done() }

// bindTo lets the handler solve inline with ctx.
func (s *inlineSolves) bindTo(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
}

// unbind stops the handler from solving inline and waits for the request
// it is solving, if any.
func (s *inlineSolves) unbind() {
	s.mu.Lock()
	s.ctx = nil
	s.mu.Unlock()
	s.active.Wait()
}

// startService registers the micro service "sudoku" with its solve
// endpoint and Options.Endpoints.
func (w *Worker) startService() (micro.Service, error) {
	svc, err := micro.AddService(w.nc, micro.Config{
		Name:        queue.ServiceName,
		Version:     w.opts.Version,
		Description: "sudoku-queue: solve Sudoku puzzles one at a time or in bulk jobs",
		Metadata:    queue.ServiceMetadata(w.q.Opts),
	})
	if err != nil {
		return nil, fmt.Errorf("worker: start the micro service: %w", err)
	}
	inline := &inlineSolves{}
	w.solves <- &solveRequest{bind: inline} // serveSolves reads it first
	err = svc.AddEndpoint("solve", micro.HandlerFunc(func(req micro.Request) { w.handleSolve(req, inline) }),
		micro.WithEndpointSubject(w.q.Opts.SolveSubject()),
		micro.WithEndpointMetadata(map[string]string{
			"description": "solve one puzzle: the body is the puzzle as text, or JSON {\"puzzle\": \"...\", \"first\": false}; the reply is a JSON result",
		}))
	for _, e := range w.opts.Endpoints {
		if err != nil {
			break
		}
		err = svc.AddEndpoint(e.Name, e.Handler, micro.WithEndpointSubject(e.Subject), micro.WithEndpointMetadata(e.Metadata))
	}
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("worker: add a micro service endpoint: %w", err)
	}
	return svc, nil
}

// handleSolve parses a request and answers it, on this goroutine while
// inline is bound, else by handing it to the solving goroutine.
func (w *Worker) handleSolve(req micro.Request, inline *inlineSolves) {
	start := time.Now()
	span := w.solveSpan(req)
	sr, err := queue.ParseSolveRequest(req.Data())
	if err != nil {
		_ = req.Error(queue.CodeBadRequest, err.Error(), nil)
		endSpan(span, err)
		return
	}
	g, err := solver.Parse(sr.Puzzle)
	if err != nil {
		r := result.Invalid(0, sr.Puzzle, err)
		data, _ := json.Marshal(&r)
		_ = req.Error(queue.CodeInvalidPuzzle, err.Error(), data)
		endSpan(span, err)
		return
	}
	r := &solveRequest{req: req, grid: g, first: sr.First, start: start,
		noLookup: req.Headers().Get(queue.HdrNoLookup) != "", span: span}
	if ctx, ok := inline.acquire(); ok {
		defer inline.release()
		w.serveSolve(ctx, &inline.sv, r)
		return
	}
	defer func() {
		if recover() != nil { // w.solves is closed: the worker is stopping
			_ = req.Error(queue.CodeUnavailable, "the worker is stopping", nil)
			span.End()
		}
	}()
	w.solves <- r
}

// solveSpan starts the span of a request of the solve endpoint (SERVER),
// joined to the caller's trace through the request's headers.
func (w *Worker) solveSpan(req micro.Request) trace.Span {
	ctx := telemetry.Extract(context.Background(), nats.Header(req.Headers()))
	_, span := telemetry.Tracer().Start(ctx, "process solve", trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		span.SetAttributes(telemetry.NATS, telemetry.MessagingOperationType.String("process"),
			telemetry.MessagingOperationName.String("solve"), telemetry.MessagingDestTemplate.String(w.q.Opts.SolveSubject()))
	}
	return span
}

// serveSolves answers the solve endpoint's requests handed to it, one at
// a time, until w.solves is closed: a goroutine of its own, so that a
// single puzzle never waits behind bulk batches. It binds the endpoint's
// handler (the first message, from startService) to ctx, so that the
// handler answers requests itself, and unbinds it before returning.
func (w *Worker) serveSolves(ctx context.Context) {
	var sv solver.Solver
	for r := range w.solves {
		if r.bind != nil {
			r.bind.bindTo(ctx)
			defer r.bind.unbind()
			continue
		}
		w.serveSolve(ctx, &sv, r)
	}
}

// serveSolve answers one request of the solve endpoint with solver sv:
// from the cache, unless the caller missed there already, else by
// solving; then it caches what it solved, after replying.
func (w *Worker) serveSolve(ctx context.Context, sv *solver.Solver, r *solveRequest) {
	st := BatchStats{Interactive: true, Puzzles: 1, Statuses: map[result.Status]int{}}
	key := job.KeyOf(&r.grid)
	var o job.Outcome
	nodes := int64(-1) // unknown: a cached answer
	var hits []*job.Outcome
	if !r.noLookup {
		hits = w.cache.Get(ctx, []job.Key{key})
	}
	if hits != nil && hits[0] != nil && hits[0].Answers(r.first) && hits[0].Puzzle == r.grid {
		o, o.Cached = *hits[0], true
		st.CacheHits = 1
	} else {
		sctx, cancel := context.WithTimeout(ctx, solveTimeout)
		t0 := time.Now()
		o, nodes = w.solveOne(sctx, sv, &r.grid, solverOptions(w.opts.MaxNodes, r.first))
		cancel()
		st.SolveTimes = []time.Duration{time.Since(t0)}
	}
	res := o.Result(0, key.String())
	st.Statuses[res.Status]++
	if err := w.respond(r.req, &res, needsProof(&o, r.first, nodes)); err != nil {
		st.Outcome, st.Err = OutcomeAbandoned, err
	} else {
		st.Outcome = OutcomeAcked
	}
	w.event("", 0, 1)
	if !o.Cached {
		w.cache.Put(ctx, []cache.Entry{{Key: key, Outcome: &o}})
	}
	st.Latency = time.Since(r.start)
	endSpan(r.span, st.Err)
	if w.opts.Observer != nil {
		w.opts.Observer.Batch(&st)
	}
}

func solverOptions(maxNodes int64, first bool) solver.Options {
	return solver.Options{MaxNodes: maxNodes, FirstSolution: first}
}

// needsProof reports whether a reader needs the worker's proof of o, an
// answer to a solve request found in nodes of search (-1: unknown, from
// the cache), to take it without a costly solve of its own: a gave_up,
// and a unique that proves uniqueness unless it took at most
// proof.CheapNodes (the reader's own solve of such a puzzle confirms it
// as fast as it would check a signature: about 4 us against 60-150).
// Other answers are checked by every reader whatever their proof.
// Signing costs the worker about 60 us, on the reply's path.
func needsProof(o *job.Outcome, first bool, nodes int64) bool {
	switch o.Status {
	case result.StatusGaveUp:
		return true
	case result.StatusUnique:
		return !first && (nodes < 0 || nodes > proof.CheapNodes)
	}
	return false
}

// respond sends res as the JSON reply to req, with the worker's proof of
// it (proof.Header) when it has a key and sign is set.
func (w *Worker) respond(req micro.Request, res *result.Result, sign bool) error {
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("worker: encode a solve reply: %w", err)
	}
	if w.opts.Signer == nil || !sign {
		return req.Respond(data)
	}
	return req.Respond(data, micro.WithHeaders(micro.Headers{proof.Header: {w.opts.Signer.SignReply(data)}}))
}
