// Package gen makes many distinct puzzles from a few: each output is a base
// puzzle (such as one of the 17-clue set) under a random symmetry of
// Sudoku. A symmetry relabels the digits, permutes the rows within each
// band, the bands, the columns within each stack and the stacks, and may
// transpose the grid. It keeps everything that matters about a puzzle: a
// valid puzzle stays valid, with as many givens, as many solutions (the
// transformed solution solves the transformed puzzle) and the same
// difficulty up to the order a solver looks at cells in.
//
// There are 9! x 6^8 x 2 (about 1.2 x 10^12) symmetries, so a few base
// puzzles give millions of distinct outputs. The Generator still checks
// that every output is new: two symmetries can give the same grid when a
// puzzle is symmetric itself, and two bases may be the same puzzle in
// disguise.
//
// Output is deterministic for a seed: the same bases and seed give the same
// puzzles, in the same order, on every platform and Go release (the
// randomness comes from a PCG generator and is turned into choices here,
// not by math/rand's helpers, whose algorithms may change).
package gen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Transform is one symmetry of Sudoku. Apply takes the input grid,
// transposes it if Transpose is set, then builds the output so that output
// cell (r, c) holds Digits of the (transposed) input's cell (Rows[r],
// Cols[c]).
//
// A Transform made by Random is always a symmetry: Rows (and Cols) keep
// each band (stack) of three rows (columns) together, and Digits is a
// permutation of 1-9 with Digits[0] == 0.
type Transform struct {
	Digits    [10]uint8 // new digit of each digit; Digits[0] is 0 (a blank stays blank)
	Rows      [9]uint8  // output row r is input row Rows[r]
	Cols      [9]uint8  // output column c is input column Cols[c]
	Transpose bool
}

// Identity returns the Transform that changes nothing.
func Identity() Transform {
	var t Transform
	for i := range 10 {
		t.Digits[i] = uint8(i)
	}
	for i := range 9 {
		t.Rows[i], t.Cols[i] = uint8(i), uint8(i)
	}
	return t
}

// Random returns a symmetry drawn uniformly from src.
func Random(src rand.Source) Transform {
	t := Identity()
	shuffle(src, t.Digits[1:])
	t.Rows = lines(src)
	t.Cols = lines(src)
	t.Transpose = src.Uint64()&1 == 1
	return t
}

// lines returns a permutation of 0-8 that keeps each group of three
// (band or stack) together: the groups in a random order, and the lines
// within each group in a random order.
func lines(src rand.Source) [9]uint8 {
	groups := [3]uint8{0, 1, 2}
	shuffle(src, groups[:])
	var p [9]uint8
	for i, gr := range groups {
		within := [3]uint8{0, 1, 2}
		shuffle(src, within[:])
		for j, w := range within {
			p[3*i+j] = 3*gr + w
		}
	}
	return p
}

// shuffle is a Fisher-Yates shuffle of s driven by src.
func shuffle(src rand.Source, s []uint8) {
	for i := len(s) - 1; i > 0; i-- {
		j := uniform(src, uint64(i+1))
		s[i], s[j] = s[j], s[i]
	}
}

// uniform returns a number in [0, n) without modulo bias: values from the
// incomplete last block of 2^64 are drawn again.
func uniform(src rand.Source, n uint64) uint64 {
	limit := -n % n // 2^64 mod n: the size of the incomplete block
	for {
		v := src.Uint64()
		if v >= limit {
			return v % n
		}
	}
}

// Apply returns g under the symmetry t.
func (t *Transform) Apply(g *solver.Grid) solver.Grid {
	var out solver.Grid
	for r := range 9 {
		sr := int(t.Rows[r])
		for c := range 9 {
			sc := int(t.Cols[c])
			src := sr*9 + sc
			if t.Transpose {
				src = sc*9 + sr
			}
			out[r*9+c] = t.Digits[g[src]]
		}
	}
	return out
}

// ErrExhausted is matched by the error of Next when the bases cannot give
// another distinct puzzle (a base tried many times gave only puzzles made
// before).
var ErrExhausted = errors.New("gen: cannot make another distinct puzzle from these bases")

// maxTries bounds the symmetries tried for one output before giving up.
// For a base with nothing left to give, giving up is right; for any other,
// failing 64 times in a row is vanishingly unlikely.
const maxTries = 64

// Generator makes distinct puzzles from a set of bases. It is not safe for
// concurrent use.
//
// Its memory is the bases (81 bytes each) and one 8-byte fingerprint per
// puzzle made, to keep outputs distinct, in a table at most half full: 16
// to 32 bytes per puzzle, 32 MB at most for a million.
type Generator struct {
	bases []solver.Grid
	src   rand.Source
	seen  fpSet
	next  int // index of the base of the next output
}

// New returns a Generator of puzzles made from bases (which it keeps, and
// does not change) with randomness from seed. It takes the bases in turn,
// so every base contributes about equally.
func New(bases []solver.Grid, seed uint64) (*Generator, error) {
	if len(bases) == 0 {
		return nil, errors.New("gen: no base puzzles")
	}
	return &Generator{
		bases: bases,
		// The second PCG word is a fixed odd constant: one seed, one stream.
		src: rand.NewPCG(seed, 0x9e3779b97f4a7c15),
	}, nil
}

// Next returns the next puzzle: a symmetry of the next base, different
// from every puzzle returned before. Its error matches ErrExhausted when
// none can be found.
func (g *Generator) Next() (solver.Grid, error) {
	i := g.next
	g.next = (g.next + 1) % len(g.bases)
	for range maxTries {
		t := Random(g.src)
		out := t.Apply(&g.bases[i])
		if !g.seen.add(fingerprint(&out)) {
			continue
		}
		return out, nil
	}
	return solver.Grid{}, fmt.Errorf("%w (base %d of %d, after %d puzzles)", ErrExhausted, i+1, len(g.bases), g.seen.n)
}

// fingerprint is the 64-bit FNV-1a hash of a grid. Two different grids
// with the same fingerprint (odds about 1 in 10^7 over a million puzzles)
// only make Next try another symmetry: outputs stay distinct and
// deterministic.
func fingerprint(g *solver.Grid) uint64 {
	h := uint64(14695981039346656037)
	for _, v := range g {
		h ^= uint64(v)
		h *= 1099511628211
	}
	return h
}

// fpSet is a set of fingerprints: open addressing with linear probing in a
// power-of-two table kept at most half full. A Go map of uint64 takes about
// 40 bytes per entry at this size; this takes 16 to 32.
type fpSet struct {
	slots []uint64 // 0 is an empty slot; fingerprint 0 is stored as 1
	n     int
}

// add adds fp and reports whether it was new.
func (s *fpSet) add(fp uint64) bool {
	if fp == 0 {
		fp = 1 // a false collision at worst: one more try in Next
	}
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case fp:
			return false
		case 0:
			s.slots[i] = fp
			s.n++
			return true
		}
	}
}

func (s *fpSet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(1024, 2*len(old)))
	mask := uint64(len(s.slots) - 1)
	for _, fp := range old {
		if fp == 0 {
			continue
		}
		i := fp & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = fp
	}
}

// ReadBases reads base puzzles, one per line in any format input.Reader and
// solver.Parse take (blank lines and '#' comments skipped). A line that is
// not a valid puzzle is an error that names it.
func ReadBases(r io.Reader) ([]solver.Grid, error) {
	in := input.NewReader(r)
	var bases []solver.Grid
	for {
		it, err := in.Next()
		if errors.Is(err, io.EOF) {
			return bases, nil
		}
		if err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		if it.Err != nil {
			return nil, fmt.Errorf("gen: line %d: %w", it.Line, it.Err)
		}
		g, err := solver.Parse(it.Text)
		if err != nil {
			return nil, fmt.Errorf("gen: line %d: %w", it.Line, err)
		}
		bases = append(bases, g)
	}
}

// Write writes n puzzles from g to w, one per line in the canonical
// 81-character form, streaming: memory does not grow with n beyond the
// Generator's fingerprints. It stops early with ctx's error when ctx is
// done.
func Write(ctx context.Context, w io.Writer, g *Generator, n int) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	line := make([]byte, 0, 82)
	for i := range n {
		if i%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		p, err := g.Next()
		if err != nil {
			return err
		}
		line = line[:0]
		for _, v := range p { // p.String(), without allocating
			if v == 0 {
				line = append(line, '.')
			} else {
				line = append(line, '0'+v)
			}
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("gen: write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gen: write: %w", err)
	}
	return nil
}
