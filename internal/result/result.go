// Package result defines the record of one solved (or rejected) puzzle:
// what every command prints, what the cache stores and what workers send
// back. It also writes results as text or JSON lines and summarises them
// by status.
package result

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Status is the outcome for one puzzle, as it appears in JSON output and in
// summaries.
type Status string

// The statuses a Result can have.
const (
	// StatusUnique: the puzzle has exactly one solution (Result.Solution).
	StatusUnique Status = "unique"
	// StatusMultiple: the puzzle has two or more solutions;
	// Result.Solution is one of them.
	StatusMultiple Status = "multiple"
	// StatusNone: the puzzle was proved to have no solution.
	StatusNone Status = "none"
	// StatusInvalid: the input is not a puzzle (bad characters, wrong
	// number of cells, a repeated given, a line too long); Result.Error
	// says why.
	StatusInvalid Status = "invalid"
	// StatusGaveUp: the search ran out of its node budget (or time) before
	// it could decide; Result.Error says how far it got.
	StatusGaveUp Status = "gave_up"
	// StatusSolved: first-solution mode found a solution (Result.Solution)
	// and did not look for a second one.
	StatusSolved Status = "solved"
)

// Statuses lists every status in the order summaries print them.
var Statuses = []Status{StatusUnique, StatusSolved, StatusMultiple, StatusNone, StatusInvalid, StatusGaveUp}

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// The Error texts of the statuses that are not failures of the input but
// answers about it.
const (
	MsgMultiple = "multiple solutions"
	MsgNone     = "no solution"
)

// Result is the record of one puzzle. The zero value is not meaningful;
// build one with FromSolve or Invalid.
type Result struct {
	// Line is the 1-based line of the input the puzzle came from; 0 when
	// the puzzle did not come from a file (a cached record, a lookup).
	Line int `json:"line,omitempty"`
	// Puzzle is the puzzle in canonical form (solver.Grid.String: 81
	// characters, '.' for a blank); for a StatusInvalid result, the input text
	// as given (possibly cut short).
	Puzzle string `json:"puzzle"`
	// Key is the cache key of the puzzle (solver.Grid.Key); empty for a
	// StatusInvalid result.
	Key string `json:"key,omitempty"`
	// Status is the outcome.
	Status Status `json:"status"`
	// Solution is the 81-digit solution for StatusUnique, StatusSolved and
	// StatusMultiple.
	Solution string `json:"solution,omitempty"`
	// Error says why the puzzle has no unique solution: "multiple
	// solutions", "no solution", or the error of a StatusInvalid or
	// StatusGaveUp result. Empty for StatusUnique and StatusSolved.
	Error string `json:"error,omitempty"`
	// Guesses counts the search's branch points (solver.Result.Guesses).
	Guesses int64 `json:"guesses"`
	// Cached is set when the result came from the cache rather than a
	// search made for this request.
	Cached bool `json:"cached,omitempty"`
}

// OK reports whether r is an answer a user asked for: a unique solution,
// or a solution in first-solution mode.
func (r Result) OK() bool { return r.Status == StatusUnique || r.Status == StatusSolved }

// FromSolve builds the result of solver.Solve(ctx, g, opts) returning r and
// err. Line is left 0; the caller sets it. A *solver.ParseError (a grid
// that does not validate) gives StatusInvalid; solver.ErrGaveUp, and a context
// that ended the search, give StatusGaveUp. A caller that treats cancellation as
// "stop everything" must check its context before keeping the result.
func FromSolve(g *solver.Grid, r solver.Result, err error) Result {
	return FromSolveKey(g, "", r, err)
}

// FromSolveKey is FromSolve for a caller that has computed g.Key() already
// (key; "" computes it).
func FromSolveKey(g *solver.Grid, key string, r solver.Result, err error) Result {
	if key == "" {
		key = g.Key()
	}
	res := Result{Puzzle: g.String(), Guesses: r.Guesses}
	if err != nil {
		var pe *solver.ParseError
		if errors.As(err, &pe) {
			res.Status = StatusInvalid
		} else {
			// ErrGaveUp, context.Canceled, context.DeadlineExceeded: the
			// search did not decide. Any other error is unexpected, and
			// "gave up" with its text is still the honest report.
			res.Status = StatusGaveUp
			res.Key = key
		}
		res.Error = err.Error()
		return res
	}
	res.Key = key
	switch r.Status {
	case solver.Unique:
		res.Status = StatusUnique
		res.Solution = r.Solution.Digits()
	case solver.Solved:
		res.Status = StatusSolved
		res.Solution = r.Solution.Digits()
	case solver.Multiple:
		res.Status = StatusMultiple
		res.Solution = r.Solution.Digits()
		res.Error = MsgMultiple
	case solver.None:
		res.Status = StatusNone
		res.Error = MsgNone
	default:
		res.Status = StatusGaveUp
		res.Error = "solver: unknown status " + r.Status.String()
	}
	return res
}

// Invalid builds the result of input line line whose text raw could not be
// parsed (or read) because of err. Raw is kept as given, cut to
// solver.MaxInputLen bytes, when it is valid UTF-8; otherwise each run of
// bytes that is not is replaced by U+FFFD, and the error says so. A
// character that an earlier cut (a preview of a line too long) split is
// dropped. The text and the error are valid UTF-8, then: they travel
// exactly through JSON, which would replace such bytes itself, after the
// producer computed the batch's digest from them.
func Invalid(line int, raw string, err error) Result {
	msg := ValidText(err.Error(), len(err.Error()))
	text := ValidText(raw, solver.MaxInputLen)
	if !utf8.ValidString(trimCut(raw)) {
		msg += " (the input is not valid UTF-8: its invalid bytes are shown as U+FFFD)"
	}
	return Result{Line: line, Puzzle: text, Status: StatusInvalid, Error: msg}
}

// ValidText returns s as valid UTF-8 of at most n bytes: an incomplete
// character at its end (s was cut) dropped, each other run of invalid
// bytes replaced by U+FFFD, cut at a character's boundary.
func ValidText(s string, n int) string {
	if utf8.ValidString(s) && len(s) <= n {
		return s
	}
	s = strings.ToValidUTF8(trimCut(s), "\uFFFD")
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// trimCut drops the start of a character that s ends with: s was cut
// inside it.
func trimCut(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			break
		}
	}
	return s
}
