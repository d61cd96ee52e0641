package producer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"log/slog"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// ErrNoAnswer is matched by the error of Solve when no worker answered
// before its context ended, or none is running.
var ErrNoAnswer = errors.New("no worker answered (is one running?)")

// SolveOptions are the options of a Solve request.
type SolveOptions struct {
	// First stops at the first solution instead of proving it unique.
	First bool
	// NoLookup says the caller looked the puzzle up in the cache and
	// missed: the worker goes straight to solving (queue.HdrNoLookup).
	NoLookup bool
	// Logger receives a warning for each wrong reply (default
	// slog.Default()).
	Logger *slog.Logger
	// Trust is the worker keys whose proofs vouch for a reply (config
	// proof.trusted): a unique or gave_up reply with a proof by one of
	// them is taken at its word; any other is confirmed by solving (nil:
	// every one).
	Trust *proof.Trust
}

// Solve asks the workers' solve endpoint (the micro service's, on
// q.SolveSubject) for one puzzle's result, ahead of any bulk job. The
// puzzle is text in any format solver.Parse takes. A worker answers from
// the cache (unless opts.NoLookup) or solves it, and caches what it
// solved.
//
// Every reply is checked as a results message is (job.Outcome.Verify:
// the solution against the rules and the givens, none and multiple
// confirmed by solving), for any subscriber of the subject can answer: a
// reply that fails is logged and skipped, and Solve waits for another
// until ctx ends.
//
// Its errors: ErrNoAnswer (wrapping the cause) when no worker answers
// (rightly) before ctx ends; a *queue.ServiceError when the worker
// refused the request (queue.CodeInvalidPuzzle for a puzzle that does not
// parse: its Description says what and where); a wrapped NATS error
// otherwise. It is safe for concurrent use.
func Solve(ctx context.Context, nc *nats.Conn, q queue.Options, puzzle string, opts SolveOptions) (result.Result, error) {
	ctx, span := telemetry.Tracer().Start(ctx, "send "+q.SolveSubject(), trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(telemetry.NATS, telemetry.MessagingOperationType.String("send"),
			telemetry.MessagingOperationName.String("solve"), telemetry.MessagingDestTemplate.String(q.SolveSubject()))
	}
	data, err := json.Marshal(queue.SolveRequest{Puzzle: puzzle, First: opts.First})
	if err != nil {
		return result.Result{}, err
	}
	// The puzzle as the workers will read it: a reply is checked against
	// it, not against the puzzle the reply names. One that does not parse
	// is the workers' to refuse, with their message.
	g, perr := solver.Parse(puzzle)
	if perr == nil {
		perr = g.Validate()
	}
	req := nats.NewMsg(q.SolveSubject())
	req.Data = data
	if opts.NoLookup {
		req.Header.Set(queue.HdrNoLookup, "1")
	}
	telemetry.Inject(ctx, req.Header)
	mux, err := muxOf(nc)
	if err != nil {
		return result.Result{}, fmt.Errorf("solve request: %w", err)
	}
	replies := mux.open()
	defer replies.Close()
	req.Reply = replies.Subject
	if err := nc.PublishMsg(req); err != nil {
		return result.Result{}, fmt.Errorf("solve request: %w", err)
	}
	var wrong error
	for {
		m, err := replies.Next(ctx)
		if err != nil {
			if wrong != nil {
				err = fmt.Errorf("%w (and a reply was wrong: %w)", err, wrong)
			}
			if ctx.Err() != nil || errors.Is(err, nats.ErrNoResponders) {
				return result.Result{}, fmt.Errorf("%w: %w", ErrNoAnswer, err)
			}
			return result.Result{}, fmt.Errorf("solve request: %w", err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			return result.Result{}, fmt.Errorf("%w: %w", ErrNoAnswer, nats.ErrNoResponders)
		}
		if se := queue.ServiceErrorOf(m); se != nil {
			if perr == nil && se.Code == queue.CodeInvalidPuzzle {
				wrong = fmt.Errorf("a reply called the puzzle invalid: %w", se)
				continue
			}
			return result.Result{}, se
		}
		var r result.Result
		if err := json.Unmarshal(m.Data, &r); err != nil || !r.Status.Valid() {
			wrong = fmt.Errorf("a reply is not a result: %q", clipReply(m.Data))
			continue
		}
		if perr == nil {
			if err := verifyReply(ctx, &g, &r, opts.First, opts.Trust, m); err != nil {
				wrong = err
				cmp.Or(opts.Logger, slog.Default()).Warn("producer: a solve reply is wrong; waiting for another", "subject", q.SolveSubject(), "err", err)
				continue
			}
		}
		return r, nil
	}
}

// verifyReply checks a solve reply r (decoded from m) for puzzle g in
// the request's mode: its puzzle is g, and its answer Verifies (unique
// and gave_up taken at their word only with a proof by a key of trust).
// An unproven gave_up that the reader's own solve settles is replaced in
// r by that answer.
func verifyReply(ctx context.Context, g *solver.Grid, r *result.Result, first bool, trust *proof.Trust, m *nats.Msg) error {
	if r.Status == result.StatusInvalid {
		return fmt.Errorf("a reply called a valid puzzle invalid: %s", r.Error)
	}
	o, err := job.FromResult(r)
	if err != nil {
		return fmt.Errorf("a reply does not decode: %w", err)
	}
	if o.Puzzle != *g {
		return errors.New("a reply answers another puzzle")
	}
	if r.Status != result.StatusGaveUp && !o.Answers(first) {
		return fmt.Errorf("a reply says %s, which does not answer the request", r.Status)
	}
	prov := job.Unproven
	if trust.Enabled() && m.Header.Get(proof.Header) != "" {
		var settled bool
		if prov, settled = confirmCheaply(ctx, g, &o, first); !settled &&
			trust.VerifyReply(m.Header.Get(proof.Header), m.Data) == nil {
			prov = job.Proven
		}
	}
	err = o.Verify(ctx, first, prov)
	if se, ok := errors.AsType[*job.SettledError](err); ok {
		// An unproven gave_up this reader solved: its own answer.
		*r = se.Outcome.Result(0, g.Key())
		return nil
	}
	if err != nil {
		return fmt.Errorf("a reply is wrong: %w", err)
	}
	return nil
}

// cheapNodes is the node budget of the solve that confirms a signed
// unique reply before its proof is checked (proof.CheapNodes).
const cheapNodes = proof.CheapNodes

// confirmCheaply solves g within cheapNodes to confirm a unique reply o
// without checking its proof. Settled, it says job.Proven when the solve
// agrees (the reader proved o itself) and job.Unproven when it disagrees
// (a proof does not outweigh the reader's own solve: Verify refuses o).
// Not settled (the budget ran out, or o is not a unique of a request
// that proves uniqueness), o's proof decides.
func confirmCheaply(ctx context.Context, g *solver.Grid, o *job.Outcome, first bool) (prov job.Provenance, settled bool) {
	if o.Status != result.StatusUnique || first {
		return job.Unproven, false
	}
	r, err := solver.Solve(ctx, g, solver.Options{MaxNodes: cheapNodes})
	if err != nil {
		return job.Unproven, false
	}
	got := job.FromSolve(g, r, nil)
	return job.Provenance(got.SameAnswer(o)), true
}

// clipReply cuts a reply for an error message.
func clipReply(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
