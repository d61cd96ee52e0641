package result

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

const (
	puzzle   = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	solution = "953168742862734951417952836746893125281645397395271468138529674574386219629417583"
)

// grids returns the puzzle and its solution as Grids, built by hand so that
// these tests do not depend on the parser.
func grids() (p, s solver.Grid) {
	for i := range 81 {
		if c := puzzle[i]; c != '.' {
			p[i] = c - '0'
		}
		s[i] = solution[i] - '0'
	}
	return p, s
}

func TestFromSolve(t *testing.T) {
	p, s := grids()
	conflict := &solver.ParseError{Kind: solver.Conflict, Digit: 5, Unit: solver.Row, Cell: 1, Cell2: 6}
	gaveUp := &solver.GaveUpError{Nodes: 1024, Guesses: 300}
	stopped := fmt.Errorf("solver: stopped after 2048 nodes: %w", context.Canceled)
	tests := []struct {
		name    string
		r       solver.Result
		err     error
		status  Status
		sol     string
		errText string
		text    string
	}{
		{"unique", solver.Result{Status: solver.Unique, Solution: s, Guesses: 3}, nil,
			StatusUnique, solution, "", solution},
		{"solved", solver.Result{Status: solver.Solved, Solution: s}, nil,
			StatusSolved, solution, "", solution},
		{"multiple", solver.Result{Status: solver.Multiple, Solution: s}, nil,
			StatusMultiple, solution, "multiple solutions", "error: line 12: multiple solutions: " + solution},
		{"none", solver.Result{Status: solver.None}, nil,
			StatusNone, "", "no solution", "error: line 12: no solution"},
		{"invalid", solver.Result{}, conflict,
			StatusInvalid, "", conflict.Error(), "error: line 12: solver: digit 5 repeats in row 1: r1c2 and r1c7"},
		{"gave up", solver.Result{Guesses: 300}, gaveUp,
			StatusGaveUp, "", gaveUp.Error(), "error: line 12: " + gaveUp.Error()},
		{"stopped by the context", solver.Result{}, stopped,
			StatusGaveUp, "", stopped.Error(), "error: line 12: " + stopped.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := FromSolve(&p, tt.r, tt.err)
			r.Line = 12
			if r.Status != tt.status || r.Solution != tt.sol || r.Error != tt.errText {
				t.Errorf("got status %q solution %q error %q; want %q %q %q",
					r.Status, r.Solution, r.Error, tt.status, tt.sol, tt.errText)
			}
			if r.Puzzle != puzzle {
				t.Errorf("puzzle %q, want %q", r.Puzzle, puzzle)
			}
			if wantKey := tt.status != StatusInvalid; (r.Key == p.Key()) != wantKey {
				t.Errorf("key %q, want the puzzle's key: %v", r.Key, wantKey)
			}
			if r.Guesses != tt.r.Guesses {
				t.Errorf("guesses %d, want %d", r.Guesses, tt.r.Guesses)
			}
			if got := r.Text(); got != tt.text {
				t.Errorf("text %q, want %q", got, tt.text)
			}
			if r.OK() != (tt.status == StatusUnique || tt.status == StatusSolved) {
				t.Errorf("OK() = %v for %s", r.OK(), tt.status)
			}
		})
	}
}

func TestInvalid(t *testing.T) {
	err := errors.New("solver: 3 cells, want 81")
	r := Invalid(3, "123", err)
	if want := (Result{Line: 3, Puzzle: "123", Status: StatusInvalid, Error: err.Error()}); r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	if got, want := r.Text(), "error: line 3: solver: 3 cells, want 81"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	long := strings.Repeat("x", solver.MaxInputLen+10)
	if r := Invalid(1, long, err); len(r.Puzzle) != solver.MaxInputLen {
		t.Errorf("a long input is kept at %d bytes, want %d", len(r.Puzzle), solver.MaxInputLen)
	}
	// Without a line (a lookup), the text says no line.
	r.Line = 0
	if got, want := r.Text(), "error: solver: 3 cells, want 81"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
}

func TestWriter(t *testing.T) {
	p, s := grids()
	unique := FromSolve(&p, solver.Result{Status: solver.Unique, Solution: s, Guesses: 3}, nil)
	unique.Line = 1
	multiple := FromSolve(&p, solver.Result{Status: solver.Multiple, Solution: s}, nil)
	multiple.Line = 4
	invalid := Invalid(7, "1\x002", errors.New("solver: 3 cells, want 81"))
	results := []Result{unique, multiple, invalid}

	t.Run("text", func(t *testing.T) {
		var buf bytes.Buffer
		w := NewWriter(&buf, Text)
		for _, r := range results {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if buf.Len() != 0 {
			t.Errorf("wrote %d bytes before Flush, want buffering", buf.Len())
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		want := solution + "\n" +
			"error: line 4: multiple solutions: " + solution + "\n" +
			"error: line 7: solver: 3 cells, want 81\n"
		if buf.String() != want {
			t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
		}
	})

	t.Run("jsonl round trip", func(t *testing.T) {
		var buf bytes.Buffer
		w := NewWriter(&buf, JSONL)
		for _, r := range results {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		if len(lines) != len(results) {
			t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(results), buf.String())
		}
		for i, line := range lines {
			var got Result
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if got != results[i] {
				t.Errorf("line %d: got %+v, want %+v", i+1, got, results[i])
			}
		}
		want := `{"line":7,"puzzle":"1\u00002","status":"invalid","error":"solver: 3 cells, want 81","guesses":0}`
		if lines[2] != want {
			t.Errorf("got %s\nwant %s", lines[2], want)
		}
	})

	t.Run("write error", func(t *testing.T) {
		w := NewWriter(errWriter{}, Text)
		for i := 0; i < 2000; i++ { // past the buffer
			if err := w.Write(unique); err != nil {
				if !errors.Is(err, os.ErrClosed) {
					t.Fatalf("error %v, want os.ErrClosed wrapped", err)
				}
				return
			}
		}
		t.Fatal("no error")
	})
}

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestParseFormat(t *testing.T) {
	for _, f := range Formats {
		if got, err := ParseFormat(string(f)); got != f || err != nil {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) succeeded")
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name     string
		statuses []Status
		want     string
		ok       bool
	}{
		{"empty", nil, "0 puzzles: nothing", true},
		{"one unique", []Status{StatusUnique}, "1 puzzle: 1 unique", true},
		{"first-solution mode", []Status{StatusSolved, StatusSolved}, "2 puzzles: 2 solved", true},
		{"every status, in a fixed order",
			[]Status{StatusGaveUp, StatusInvalid, StatusNone, StatusMultiple, StatusUnique, StatusUnique, StatusInvalid},
			"7 puzzles: 2 unique, 1 multiple, 1 none, 2 invalid, 1 gave_up", false},
		{"statuses not defined last, sorted", []Status{"zeta", StatusUnique, "alpha", "zeta"},
			"4 puzzles: 1 unique, 1 alpha, 2 zeta", false},
	}
	for i, st := range Statuses {
		if got := st.index(); got != i {
			t.Errorf("%s.index() = %d, want %d (its place in Statuses)", st, got, i)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Summary
			for _, st := range tt.statuses {
				s.Add(Result{Status: st})
			}
			if got := s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if s.OK() != tt.ok {
				t.Errorf("OK() = %v, want %v", s.OK(), tt.ok)
			}
			if s.Total() != len(tt.statuses) {
				t.Errorf("Total() = %d, want %d", s.Total(), len(tt.statuses))
			}
			want := map[Status]int{}
			for _, st := range tt.statuses {
				want[st]++
			}
			for st, n := range want {
				if got := s.Count(st); got != n {
					t.Errorf("Count(%s) = %d, want %d", st, got, n)
				}
			}
		})
	}
}

func ExampleWriter() {
	var p solver.Grid // hand-made here; use solver.Parse
	for i, c := range puzzle {
		if c != '.' {
			p[i] = uint8(c - '0')
		}
	}
	r, err := solver.Solve(context.Background(), &p, solver.Options{})
	res := FromSolve(&p, r, err)
	res.Line = 1

	w := NewWriter(os.Stdout, Text)
	w.Write(res)
	w.Write(Invalid(2, "123", errors.New("solver: 3 cells, want 81")))
	w.Flush()

	var s Summary
	s.Add(res)
	s.Add(Invalid(2, "123", errors.New("bad")))
	fmt.Println(s.String(), s.OK())
	// Output:
	// 953168742862734951417952836746893125281645397395271468138529674574386219629417583
	// error: line 2: solver: 3 cells, want 81
	// 2 puzzles: 1 unique, 1 invalid false
}

// BenchmarkSummary counts a job's results: every result of a job is
// counted twice (the follower's record and the command's summary).
func BenchmarkSummary(b *testing.B) {
	rs := []Result{{Status: StatusUnique}, {Status: StatusUnique}, {Status: StatusUnique}, {Status: StatusInvalid},
		{Status: StatusUnique}, {Status: StatusMultiple}, {Status: StatusUnique}, {Status: StatusNone}}
	var s Summary
	i := 0
	for b.Loop() {
		s.Add(rs[i&7])
		i++
	}
	if s.Total() == 0 {
		b.Fatal("nothing counted")
	}
}

// TestInvalidTextIsValidUTF8 checks result.Invalid on text that is not
// valid UTF-8, or cut inside a character (issue 22, finding 2).
func TestInvalidTextIsValidUTF8(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string
		notice          bool
	}{
		{"valid", "not a puzzle", "not a puzzle", false},
		{"invalid bytes", "bad \xff\xfe line", "bad \uFFFD line", true},
		{"cut inside a character", strings.Repeat("€", 42) + "\xe2\x82", strings.Repeat("€", 42), false},
		{"too long, cut at a character", strings.Repeat("€", 2000), strings.Repeat("€", solver.MaxInputLen/3), false},
		{"a replacement character given", "x\uFFFD", "x\uFFFD", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Invalid(1, tc.raw, errors.New("bad \xff"))
			if r.Puzzle != tc.want || !utf8.ValidString(r.Error) {
				t.Errorf("Invalid(%q) = text %q, error %q; want text %q", tc.raw, r.Puzzle, r.Error, tc.want)
			}
			if got := strings.Contains(r.Error, "not valid UTF-8"); got != tc.notice {
				t.Errorf("error %q: says not valid UTF-8 %v, want %v", r.Error, got, tc.notice)
			}
		})
	}
}
