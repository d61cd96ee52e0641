package gen

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// bases reads the 200 17-clue puzzles of testdata.
func bases(t testing.TB) []solver.Grid {
	t.Helper()
	f, err := os.Open("testdata/17_clue_200.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bs, err := ReadBases(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 200 {
		t.Fatalf("%d bases, want 200", len(bs))
	}
	return bs
}

// solve solves g, counting solutions up to two.
func solve(t testing.TB, g *solver.Grid) solver.Result {
	t.Helper()
	r, err := solver.Solve(context.Background(), g, solver.Options{})
	if err != nil {
		t.Fatalf("solve %s: %v", g.String(), err)
	}
	return r
}

func TestTransformIsSymmetry(t *testing.T) {
	bs := bases(t)
	src := rand.NewPCG(1, 2)
	for i := range 50 {
		base := &bs[i]
		sol := solve(t, base).Solution
		tr := Random(src)
		p, s := tr.Apply(base), tr.Apply(&sol)
		if err := p.Validate(); err != nil {
			t.Fatalf("%s under %+v is invalid: %v", base.String(), tr, err)
		}
		if err := s.Validate(); err != nil || s.Givens() != 81 {
			t.Fatalf("the solution under %+v is not a solution: %v", tr, err)
		}
		if p.Givens() != base.Givens() {
			t.Fatalf("%d givens, want %d", p.Givens(), base.Givens())
		}
		// The transformed solution solves the transformed puzzle, and is
		// its only solution.
		got := solve(t, &p)
		if got.Status != solver.Unique || got.Solution != s {
			t.Fatalf("%s: status %v solution %s, want unique %s", p.String(), got.Status, got.Solution.Digits(), s.Digits())
		}
	}
}

func TestIdentity(t *testing.T) {
	bs := bases(t)
	id := Identity()
	if got := id.Apply(&bs[0]); got != bs[0] {
		t.Fatalf("identity changed %s into %s", bs[0].String(), got.String())
	}
	// Transposing twice is the identity too.
	tr := Identity()
	tr.Transpose = true
	once := tr.Apply(&bs[0])
	if once == bs[0] {
		t.Fatal("transposing changed nothing")
	}
	if twice := tr.Apply(&once); twice != bs[0] {
		t.Fatal("transposing twice is not the identity")
	}
}

func TestRandomCoversEveryKind(t *testing.T) {
	// Over many draws, every kind of move happens: bands and stacks move,
	// rows and columns move within them, digits change, grids transpose.
	src := rand.NewPCG(7, 7)
	var bandMoved, rowMoved, stackMoved, colMoved, transposed, relabelled bool
	for range 200 {
		tr := Random(src)
		for i := range 9 {
			bandMoved = bandMoved || int(tr.Rows[i])/3 != i/3
			rowMoved = rowMoved || (int(tr.Rows[i])/3 == i/3 && int(tr.Rows[i]) != i)
			stackMoved = stackMoved || int(tr.Cols[i])/3 != i/3
			colMoved = colMoved || (int(tr.Cols[i])/3 == i/3 && int(tr.Cols[i]) != i)
		}
		for d := 1; d <= 9; d++ {
			relabelled = relabelled || int(tr.Digits[d]) != d
		}
		transposed = transposed || tr.Transpose
		// Every Transform keeps bands and stacks whole and relabels with a
		// permutation.
		if tr.Digits[0] != 0 {
			t.Fatalf("a blank becomes %d", tr.Digits[0])
		}
		var digits, rows, cols uint16
		for d := 1; d <= 9; d++ {
			digits |= 1 << tr.Digits[d]
		}
		for b := range 3 {
			band, stack := tr.Rows[3*b]/3, tr.Cols[3*b]/3
			for j := range 3 {
				if tr.Rows[3*b+j]/3 != band || tr.Cols[3*b+j]/3 != stack {
					t.Fatalf("%+v splits a band or a stack", tr)
				}
				rows |= 1 << tr.Rows[3*b+j]
				cols |= 1 << tr.Cols[3*b+j]
			}
		}
		if digits != 0x3fe || rows != 0x1ff || cols != 0x1ff {
			t.Fatalf("%+v is not made of permutations", tr)
		}
	}
	if !(bandMoved && rowMoved && stackMoved && colMoved && transposed && relabelled) {
		t.Errorf("some move never happened: band %v row %v stack %v col %v transpose %v relabel %v",
			bandMoved, rowMoved, stackMoved, colMoved, transposed, relabelled)
	}
}

func TestGenerator(t *testing.T) {
	bs := bases(t)
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	g, err := New(bs, 42)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[solver.Grid]bool, n)
	for i := range n {
		p, err := g.Next()
		if err != nil {
			t.Fatalf("puzzle %d: %v", i, err)
		}
		// Valid, as the parser sees its canonical form.
		q, err := solver.Parse(p.String())
		if err != nil || q != p {
			t.Fatalf("puzzle %d %s does not parse back: %v", i, p.String(), err)
		}
		// As many givens as its base (the bases are taken in turn).
		if p.Givens() != bs[i%len(bs)].Givens() {
			t.Fatalf("puzzle %d has %d givens, its base %d", i, p.Givens(), bs[i%len(bs)].Givens())
		}
		if seen[p] {
			t.Fatalf("puzzle %d %s was made before", i, p.String())
		}
		seen[p] = true
		// A sample keeps its unique solution.
		if i%97 == 0 {
			if r := solve(t, &p); r.Status != solver.Unique {
				t.Fatalf("puzzle %d %s: %v, want unique", i, p.String(), r.Status)
			}
		}
	}
}

// gen returns what Write writes for n puzzles from bs with seed.
func gen(t *testing.T, bs []solver.Grid, seed uint64, n int) string {
	t.Helper()
	g, err := New(bs, seed)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(context.Background(), &b, g, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestDeterministic(t *testing.T) {
	bs := bases(t)
	a, b := gen(t, bs, 1, 1000), gen(t, bs, 1, 1000)
	if a != b {
		t.Fatal("two runs with seed 1 differ")
	}
	if c := gen(t, bs, 2, 1000); c == a {
		t.Fatal("seeds 1 and 2 give the same puzzles")
	}
	if lines := strings.Split(strings.TrimSuffix(a, "\n"), "\n"); len(lines) != 1000 || len(lines[0]) != 81 {
		t.Fatalf("%d lines, the first %q", len(lines), lines[0])
	}
	// A shorter run is a prefix of a longer one: -n does not change the
	// puzzles, only how many.
	if short := gen(t, bs, 1, 10); !strings.HasPrefix(a, short) {
		t.Fatal("10 puzzles are not the first 10 of 1000")
	}
}

func TestGolden(t *testing.T) {
	// Pinned so that a change of algorithm (or of Go's PCG) is noticed:
	// "deterministic for a seed" must hold across releases.
	got := strings.Split(gen(t, bases(t)[:2], 1, 3), "\n")[:3]
	want := goldenSeed1
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("puzzle %d for seed 1:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

func TestExhausted(t *testing.T) {
	// The empty grid is its own image under every symmetry: one puzzle,
	// then nothing new.
	g, err := New([]solver.Grid{{}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Next(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("second puzzle from the empty grid: %v, want ErrExhausted", err)
	}
	if _, err := New(nil, 1); err == nil {
		t.Fatal("New without bases: no error")
	}
}

func TestReadBases(t *testing.T) {
	ok := ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	bs, err := ReadBases(strings.NewReader("# comment\n\n" + ok + "\r\n" + ok + "\n"))
	if err != nil || len(bs) != 2 {
		t.Fatalf("%d bases, %v", len(bs), err)
	}
	for _, tc := range []struct{ in, want string }{
		{ok + "\nabc\n", "gen: line 2: solver: "},
		{"11" + ok[2:] + "\n", "gen: line 1: solver: digit 1 repeats"},
		{ok + "\n" + strings.Repeat(".", 5000) + "\n", "gen: line 2: solver: input of 5000 bytes is too long"},
	} {
		_, err := ReadBases(strings.NewReader(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ReadBases(%.30q...): %v, want %q...", tc.in, err, tc.want)
		}
	}
}

func TestWriteStopsOnCancel(t *testing.T) {
	g, err := New(bases(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Write(ctx, &bytes.Buffer{}, g, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write with a cancelled context: %v", err)
	}
}

func BenchmarkNext(b *testing.B) {
	g, err := New(bases(b), 1)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/puzzle")
}

// goldenSeed1 are the first three puzzles for seed 1 from the first two
// bases of testdata/17_clue_200.txt.
var goldenSeed1 = []string{
	"....8..........9.6...512..............63.7...2.....81....4....7.........1...5..2.",
	"....7.8.51.4..9.............83............912.......4.9....1....7......6.......2.",
	".....591.4...2..5.7......8..........6..........8..1.....9.....3..1..8.......7...6",
}
