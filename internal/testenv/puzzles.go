package testenv

import (
	"os"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/gen"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Puzzles returns n distinct valid puzzles in canonical form: the
// fixture file's own first, then more made from them with internal/gen's
// symmetries (seed 1, so every run gets the same ones).
func Puzzles(t testing.TB, fixture string, n int) []string {
	t.Helper()
	f, err := os.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bases, err := gen.ReadBases(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gen.New(bases, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, n)
	seen := map[string]bool{}
	add := func(p *solver.Grid) {
		if s := p.String(); len(out) < n && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for i := range bases {
		add(&bases[i])
	}
	for len(out) < n {
		p, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		add(&p)
	}
	return out
}

// CheckSolution fails the test unless sol is a complete valid grid that
// keeps every given of puzzle (both in 81-character form).
func CheckSolution(t testing.TB, puzzle, sol string) {
	t.Helper()
	s, err := solver.Parse(sol)
	if err != nil || s.Givens() != 81 {
		t.Fatalf("solution %q is not a complete valid grid: %v", sol, err)
	}
	p, err := solver.Parse(puzzle)
	if err != nil {
		t.Fatalf("puzzle %q: %v", puzzle, err)
	}
	for i, v := range p {
		if v != 0 && s[i] != v {
			t.Fatalf("solution %s does not keep the givens of %s", sol, puzzle)
		}
	}
}
