package solver

import (
	"context"
	"errors"
	"testing"
)

// FuzzParseSolve parses any text and solves what parses, with a small node
// budget so that no input holds the fuzzer up. Parse must not panic, must
// agree with its general path, and must return either a valid grid or a
// *ParseError whose fields make sense; Solve must return a valid solution
// that keeps the givens, None, or give up.
//
// The seeds are the inputs of TestParse and a few fixtures. Run it with
//
//	go test -fuzz FuzzParseSolve -fuzztime 20s ./solver/
func FuzzParseSolve(f *testing.F) {
	for _, tc := range parseTests {
		f.Add(tc.in)
	}
	for _, name := range []string{"17_clue_300.txt", "hardest_100.txt", "serg_200.txt"} {
		f.Add(fixtureLines(f, name)[0])
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := Parse(s)
		if len(s) <= MaxInputLen {
			checkSameParse(t, s)
		}
		if err != nil {
			checkParseError(t, s, g, err)
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("Parse(%q) returned an invalid grid %s: %v", s, g.String(), err)
		}
		if h, err := Parse(g.String()); err != nil || h != g {
			t.Fatalf("Parse(%q) = %s, which parses again as %s, %v", s, g.String(), h.String(), err)
		}
		r, err := Solve(context.Background(), &g, Options{MaxNodes: 20000})
		if err != nil {
			if !errors.Is(err, ErrGaveUp) {
				t.Fatalf("Solve(%s): %v", g.String(), err)
			}
			return
		}
		switch r.Status {
		case Unique, Multiple:
			checkSolution(t, &g, &r.Solution)
		case None:
		default:
			t.Fatalf("Solve(%s): status %v", g.String(), r.Status)
		}
	})
}

// checkParseError fails t unless err, returned with g by Parse(s), is a
// *ParseError that Parse may return, with a zero g.
func checkParseError(t *testing.T, s string, g Grid, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("Parse(%q): %v (%T), want a *ParseError", s, err, err)
	}
	if g != (Grid{}) {
		t.Fatalf("Parse(%q) returned grid %s with error %v", s, g.String(), err)
	}
	var ok bool
	switch pe.Kind {
	case TooLong:
		ok = len(s) > MaxInputLen && pe.Len == len(s)
	case CellCount:
		// Every cell is counted; a whole input of 81 cells, or a grid
		// line of 9, is no error.
		ok = pe.Cells >= 0 && pe.Cells <= len(s) && pe.Line >= 0 &&
			(pe.Line == 0 && pe.Cells != 81 || pe.Line > 0 && pe.Cells != 9)
	case BadChar:
		ok = pe.Line >= 1 && pe.Col >= 1 && pe.Cell >= -1 && pe.Cell <= 80
	case Conflict:
		ok = pe.Digit >= 1 && pe.Digit <= 9 && pe.Cell >= 0 && pe.Cell < pe.Cell2 && pe.Cell2 <= 80
	}
	if !ok {
		t.Fatalf("Parse(%q): unexpected error %+v", s, *pe)
	}
	if pe.Error() == "" {
		t.Fatalf("Parse(%q): empty error message", s)
	}
}
