package solver

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestValidateFastPath checks Validate's mask passes (over the filled
// cells, or over every cell when more than denseGivens are filled), and
// the check Solve makes in state.init, against conflict, the exact cell-by-cell check it falls back on, on
// grids made from solutions by blanking cells and writing a few random
// values (0-11, sometimes any byte) over others.
func TestValidateFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	var sols []Grid
	for _, g := range fixture(t, "17_clue_300.txt")[:20] {
		sols = append(sols, solve(t, &g, Options{}).Solution)
	}
	counts := map[ErrorKind]int{}
	dense := 0
	for i := 0; i < 20000; i++ {
		blank := 30 + rng.IntN(50)
		if i%4 == 0 {
			blank = rng.IntN(81 - denseGivens) // the pass over every cell
		}
		g := removeGivens(&sols[i%len(sols)], blank, rng)
		for k := rng.IntN(4); k > 0; k-- {
			v := uint8(rng.IntN(12))
			if rng.IntN(8) == 0 {
				v = uint8(rng.IntN(256)) // bytes far from cells: no carry between them
			}
			g[rng.IntN(81)] = v
		}
		if g.Givens() > denseGivens {
			dense++
		}
		err := g.Validate()
		want := g.conflict()
		var pe, pw *ParseError
		errors.As(err, &pe)
		errors.As(want, &pw)
		if (err == nil) != (want == nil) || pe != nil && pw != nil && *pe != *pw {
			t.Fatalf("grid %v: Validate returns %v, the exact check %v", g, err, want)
		}
		// Solve's own check, made in the search's set-up, must agree.
		var s state
		if ok := s.init(&g, g.filled()); ok != (want == nil) {
			t.Fatalf("grid %v: state.init says valid %v, the exact check %v", g, ok, want)
		}
		if pe != nil {
			counts[pe.Kind]++
		} else {
			counts[0]++
		}
	}
	t.Logf("valid %d, conflict %d, bad digit %d; %d dense", counts[0], counts[Conflict], counts[BadDigit], dense)
	if dense < 1000 {
		t.Errorf("only %d grids with more than %d givens: the test needs more", dense, denseGivens)
	}
	for _, k := range []ErrorKind{0, Conflict, BadDigit} {
		if counts[k] < 1000 {
			t.Errorf("only %d grids of kind %d: the test needs more", counts[k], k)
		}
	}
}

// TestStringDigitsAndGivensEveryByte checks String, Digits and Givens,
// which work eight cells at a time, against one cell at a time, for every
// byte value in every cell.
func TestStringDigitsAndGivensEveryByte(t *testing.T) {
	var base Grid
	for i := range base {
		base[i] = uint8(i % 10)
	}
	for p := range 81 {
		for b := range 256 {
			g := base
			g[p] = uint8(b)
			want, canon, n := make([]byte, 81), make([]byte, 81), 0
			for i, v := range g {
				want[i], canon[i] = '0'+v, '0'+v
				if v != 0 {
					n++
				} else {
					canon[i] = '.'
				}
			}
			if got := g.String(); got != string(canon) {
				t.Fatalf("byte %#x at cell %d: String %q, want %q", b, p+1, got, canon)
			}
			if got := g.Digits(); got != string(want) {
				t.Fatalf("byte %#x at cell %d: Digits %q, want %q", b, p+1, got, want)
			}
			if got := g.Givens(); got != n {
				t.Fatalf("byte %#x at cell %d: Givens %d, want %d", b, p+1, got, n)
			}
		}
	}
}
