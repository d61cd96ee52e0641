package solver

import (
	"bufio"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fixtureLines returns the lines of testdata/name.
func fixtureLines(tb testing.TB, name string) []string {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}

// fixture returns the puzzles of testdata/name.
func fixture(tb testing.TB, name string) []Grid {
	tb.Helper()
	var gs []Grid
	for i, l := range fixtureLines(tb, name) {
		g, err := Parse(l)
		if err != nil {
			tb.Fatalf("%s:%d: %v", name, i+1, err)
		}
		gs = append(gs, g)
	}
	return gs
}

// The fixtures and the status of each of their puzzles.
var fixtures = []struct {
	file string
	want Status
}{
	{"17_clue_300.txt", Unique},
	{"top1465_100.txt", Unique},
	{"hardest_100.txt", Unique},
	{"serg_200.txt", Multiple},
}

// checkSolution fails t unless sol is a complete valid grid that keeps
// every given of g.
func checkSolution(tb testing.TB, g, sol *Grid) {
	tb.Helper()
	if sol.Givens() != 81 {
		tb.Fatalf("puzzle %s: solution %s is not complete", g, sol)
	}
	if err := sol.Validate(); err != nil {
		tb.Fatalf("puzzle %s: solution %s is not valid: %v", g, sol, err)
	}
	for i, v := range g {
		if v != 0 && sol[i] != v {
			tb.Fatalf("puzzle %s: solution %s has %d at %s where the puzzle has %d", g, sol, sol[i], CellName(i), v)
		}
	}
}

// solve is Solve with no error expected.
func solve(tb testing.TB, g *Grid, opts Options) Result {
	tb.Helper()
	r, err := Solve(context.Background(), g, opts)
	if err != nil {
		tb.Fatalf("puzzle %s: %v", g, err)
	}
	return r
}

// naive is the reference solver of the differential test: the plainest
// backtracker there is, easy to trust. It fills the first empty cell in
// row order with each digit 1-9 that its row, column and box do not hold,
// counting solutions up to two. It expects a grid whose givens do not
// repeat.
type naive struct {
	g     Grid
	found int
	first Grid
	nodes int // calls of search, stopping past max
	max   int
}

// naiveMaxNodes keeps a puzzle too hard for the naive solver from hanging
// the test: the puzzles of the differential test need 300,000 nodes at
// most (most need a few hundred).
const naiveMaxNodes = 2_000_000

// naiveSolve returns the status of g (Unique, Multiple or None) and, unless
// it is None, the first solution found. It reports false if the search
// needed more than naiveMaxNodes nodes.
func naiveSolve(g *Grid) (Status, Grid, bool) { return naiveSolveWithin(g, naiveMaxNodes) }

// naiveSolveWithin is naiveSolve with a budget of max nodes.
func naiveSolveWithin(g *Grid, max int) (Status, Grid, bool) {
	n := naive{g: *g, max: max}
	n.search()
	if n.nodes > max {
		return 0, Grid{}, false
	}
	switch n.found {
	case 0:
		return None, Grid{}, true
	case 1:
		return Unique, n.first, true
	}
	return Multiple, n.first, true
}

func (n *naive) search() {
	if n.nodes++; n.nodes > n.max {
		return
	}
	i := 0
	for i < 81 && n.g[i] != 0 {
		i++
	}
	if i == 81 {
		n.found++
		if n.found == 1 {
			n.first = n.g
		}
		return
	}
	for d := uint8(1); d <= 9 && n.found < 2 && n.nodes <= n.max; d++ {
		if n.fits(i, d) {
			n.g[i] = d
			n.search()
		}
	}
	n.g[i] = 0
}

// fits reports whether digit d may go at cell i.
func (n *naive) fits(i int, d uint8) bool {
	r, c := i/9, i%9
	for k := 0; k < 9; k++ {
		if n.g[r*9+k] == d || n.g[k*9+c] == d {
			return false
		}
	}
	br, bc := r/3*3, c/3*3
	for y := br; y < br+3; y++ {
		for x := bc; x < bc+3; x++ {
			if n.g[y*9+x] == d {
				return false
			}
		}
	}
	return true
}

// addGivens returns g with k more of its empty cells, chosen by rng,
// filled from sol.
func addGivens(g, sol *Grid, k int, rng *rand.Rand) Grid {
	h := *g
	for _, i := range rng.Perm(81) {
		if k == 0 {
			break
		}
		if h[i] == 0 {
			h[i] = sol[i]
			k--
		}
	}
	return h
}

// removeGivens returns g with k of its givens, chosen by rng, blanked.
func removeGivens(g *Grid, k int, rng *rand.Rand) Grid {
	h := *g
	for _, i := range rng.Perm(81) {
		if k == 0 {
			break
		}
		if h[i] != 0 {
			h[i] = 0
			k--
		}
	}
	return h
}

// wrongGiven returns g with one more given that differs from the unique
// solution sol but repeats no given, trying the empty cells from the
// start'th on. It reports false if there is no such given.
func wrongGiven(g, sol *Grid, start int) (Grid, bool) {
	for k := 0; k < 81; k++ {
		i := (start + k) % 81
		if g[i] != 0 {
			continue
		}
		for j := 0; j < 9; j++ {
			d := uint8((start+j)%9 + 1)
			if d == sol[i] {
				continue
			}
			h := *g
			h[i] = d
			if h.Validate() == nil {
				return h, true
			}
		}
	}
	return Grid{}, false
}

// TestSolveDifferential compares Solve with the naive reference solver on
// puzzles easy enough for the naive one: serg_200.txt (several solutions
// each) and puzzles made from the unique fixtures by adding givens from
// their solution (unique), by also taking some of the original givens
// away (unique or multiple), or by also adding one wrong given (none).
func TestSolveDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 17))
	var puzzles []Grid
	puzzles = append(puzzles, fixture(t, "serg_200.txt")...)
	clue17 := fixture(t, "17_clue_300.txt")
	derive := func(gs []Grid, minAdd int, kind string) {
		for i := range gs {
			g := &gs[i]
			// The puzzles are made from Solve's own solution: check it
			// first, for a wrong one could make a puzzle too hard for the
			// naive solver.
			r := solve(t, g, Options{})
			if r.Status != Unique {
				t.Fatalf("puzzle %s: status %v, want %v", g.String(), r.Status, Unique)
			}
			sol := r.Solution
			checkSolution(t, g, &sol)
			h := addGivens(g, &sol, minAdd+rng.IntN(10), rng)
			switch kind {
			case "fewer":
				h = removeGivens(&h, 3, rng)
			case "wrong":
				var ok bool
				if h, ok = wrongGiven(&h, &sol, rng.IntN(81)); !ok {
					continue
				}
			}
			puzzles = append(puzzles, h)
		}
	}
	derive(clue17[:60], 12, "unique")
	derive(clue17[60:120], 12, "fewer")
	derive(clue17[120:180], 12, "wrong")
	derive(fixture(t, "top1465_100.txt")[:40], 10, "unique")
	derive(fixture(t, "hardest_100.txt")[:40], 10, "unique")

	counts := map[Status]int{}
	for _, g := range puzzles {
		want, wantSol, ok := naiveSolve(&g)
		if !ok {
			t.Errorf("puzzle %s: too hard for the naive solver", g.String())
			continue
		}
		counts[want]++
		r := solve(t, &g, Options{})
		if r.Status != want {
			t.Errorf("puzzle %s: status %v, the naive solver says %v", g.String(), r.Status, want)
			continue
		}
		if want == None {
			continue
		}
		checkSolution(t, &g, &r.Solution)
		if want == Unique && r.Solution != wantSol {
			t.Errorf("puzzle %s: solution %s, the naive solver says %s", g.String(), r.Solution.String(), wantSol.String())
		}
	}
	t.Logf("%d puzzles: %d unique, %d multiple, %d none", len(puzzles), counts[Unique], counts[Multiple], counts[None])
	for _, s := range []Status{Unique, Multiple, None} {
		if counts[s] < 20 {
			t.Errorf("only %d puzzles with status %v: the differential test needs more", counts[s], s)
		}
	}
}

// TestSolveFixtures solves every fixture in both modes.
func TestSolveFixtures(t *testing.T) {
	var sv Solver // reused across puzzles, as a worker does
	for _, fx := range fixtures {
		t.Run(strings.TrimSuffix(fx.file, ".txt"), func(t *testing.T) {
			var guesses int64
			for _, g := range fixture(t, fx.file) {
				r := solve(t, &g, Options{})
				if r.Status != fx.want {
					t.Fatalf("puzzle %s: status %v, want %v", g.String(), r.Status, fx.want)
				}
				checkSolution(t, &g, &r.Solution)
				if r.Nodes < 1 || r.Guesses >= r.Nodes {
					t.Errorf("puzzle %s: %d nodes and %d guesses, want at least 1 node and fewer guesses than nodes", g.String(), r.Nodes, r.Guesses)
				}
				guesses += r.Guesses

				f, err := sv.Solve(context.Background(), &g, Options{FirstSolution: true})
				if err != nil {
					t.Fatalf("puzzle %s: first solution: %v", g.String(), err)
				}
				if f.Status != Solved {
					t.Fatalf("puzzle %s: status %v with FirstSolution, want %v", g.String(), f.Status, Solved)
				}
				checkSolution(t, &g, &f.Solution)
				if fx.want == Unique && f.Solution != r.Solution {
					t.Errorf("puzzle %s: first solution %s differs from the unique one %s", g.String(), f.Solution.String(), r.Solution.String())
				}
			}
			t.Logf("%s: %d guesses", fx.file, guesses)
		})
	}
}

// TestSolveMultipleWithoutAGiven takes one or two givens away from 17-clue
// puzzles: 17 is the fewest givens a unique puzzle can have.
func TestSolveMultipleWithoutAGiven(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 16))
	for i, g := range fixture(t, "17_clue_300.txt") {
		h := removeGivens(&g, 1+i%2, rng)
		r := solve(t, &h, Options{})
		if r.Status != Multiple {
			t.Fatalf("puzzle %s (%d givens): status %v, want %v", h.String(), h.Givens(), r.Status, Multiple)
		}
		checkSolution(t, &h, &r.Solution)
	}
}

// TestSolveNoneWithAWrongGiven adds to 17-clue puzzles a given that
// repeats no other but is not the solution's digit for its cell.
func TestSolveNoneWithAWrongGiven(t *testing.T) {
	for i, g := range fixture(t, "17_clue_300.txt") {
		sol := solve(t, &g, Options{}).Solution
		h, ok := wrongGiven(&g, &sol, i*31)
		if !ok {
			t.Fatalf("puzzle %s: no wrong given to add", g.String())
		}
		for _, opts := range []Options{{}, {FirstSolution: true}} {
			if r := solve(t, &h, opts); r.Status != None {
				t.Fatalf("puzzle %s with %+v: status %v, want %v", h.String(), opts, r.Status, None)
			}
		}
	}
}

// hardestFixture returns the fixture puzzle that needs the most search
// nodes, and its result.
func hardestFixture(t *testing.T) (Grid, Result) {
	t.Helper()
	var g Grid
	var r Result
	for _, name := range []string{"17_clue_300.txt", "hardest_100.txt"} {
		for _, h := range fixture(t, name) {
			if s := solve(t, &h, Options{}); s.Nodes > r.Nodes {
				g, r = h, s
			}
		}
	}
	return g, r
}

func TestSolveGivesUp(t *testing.T) {
	g, ref := hardestFixture(t)
	r, err := Solve(context.Background(), &g, Options{MaxNodes: 1})
	if !errors.Is(err, ErrGaveUp) {
		t.Fatalf("puzzle %s (%d nodes) with a budget of 1 node: %+v, %v; want an error matching ErrGaveUp", g.String(), ref.Nodes, r, err)
	}
	var ge *GaveUpError
	if !errors.As(err, &ge) {
		t.Fatalf("error %v (%T) is not a *GaveUpError", err, err)
	}
	if ge.Nodes < 1 || ge.Nodes >= ref.Nodes || r.Nodes < ge.Nodes || r.Guesses != ge.Guesses {
		t.Errorf("gave up at %+v, with result %+v; want 1 to %d nodes and the statistics so far in the result", *ge, r, ref.Nodes-1)
	}
	if want := "gave up after " + strconv.FormatInt(ge.Nodes, 10) + " nodes"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}

	// The exact budget the puzzle needs is enough; so is no budget.
	for _, max := range []int64{ref.Nodes, -1} {
		r, err := Solve(context.Background(), &g, Options{MaxNodes: max})
		if err != nil || r.Status != Unique {
			t.Errorf("puzzle %s with a budget of %d nodes: %v, %v; want %v", g.String(), max, r.Status, err, Unique)
		}
	}
}

func TestSolveContextDone(t *testing.T) {
	g, ref := hardestFixture(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"deadline passed", expired, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Solve(tc.ctx, &g, Options{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("puzzle %s (%d nodes): %+v, %v; want an error wrapping %v", g.String(), ref.Nodes, r, err, tc.want)
			}
			if errors.Is(err, ErrGaveUp) {
				t.Errorf("error %v matches ErrGaveUp", err)
			}
		})
	}
}

func TestSolveEmptyGrid(t *testing.T) {
	var g Grid
	r := solve(t, &g, Options{})
	if r.Status != Multiple {
		t.Errorf("empty grid: status %v, want %v", r.Status, Multiple)
	}
	checkSolution(t, &g, &r.Solution)
	r = solve(t, &g, Options{FirstSolution: true})
	if r.Status != Solved {
		t.Errorf("empty grid with FirstSolution: status %v, want %v", r.Status, Solved)
	}
	checkSolution(t, &g, &r.Solution)
}

// TestSolveInvalidGrid gives Solve grids made by hand that Parse would not
// return.
func TestSolveInvalidGrid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cells map[int]uint8
		want  ParseError
	}{
		{"repeat in a row", map[int]uint8{0: 5, 8: 5}, ParseError{Kind: Conflict, Digit: 5, Unit: Row, Cell: 0, Cell2: 8}},
		{"repeat in a column", map[int]uint8{4: 3, 76: 3}, ParseError{Kind: Conflict, Digit: 3, Unit: Column, Cell: 4, Cell2: 76}},
		{"repeat in a box", map[int]uint8{30: 9, 50: 9}, ParseError{Kind: Conflict, Digit: 9, Unit: Box, Cell: 30, Cell2: 50}},
		{"value 10", map[int]uint8{40: 10}, ParseError{Kind: BadDigit, Cell: 40, Digit: 10}},
		{"value 255", map[int]uint8{0: 1, 80: 255}, ParseError{Kind: BadDigit, Cell: 80, Digit: 255}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Grid
			for i, v := range tc.cells {
				g[i] = v
			}
			r, err := Solve(context.Background(), &g, Options{})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Solve: %+v, %v; want a *ParseError", r, err)
			}
			if *pe != tc.want {
				t.Errorf("Solve: error\n got %+v\nwant %+v", *pe, tc.want)
			}
		})
	}
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestSolveAllocs checks that solving allocates nothing: with a Solver in
// both modes, and with the package-level Solve, which takes its Solver
// from a sync.Pool. The race detector makes a sync.Pool drop items at
// random, so the second part runs only without -race (CI runs the tests
// both ways).
func TestSolveAllocs(t *testing.T) {
	g, _ := hardestFixture(t)
	ctx := context.Background()
	modes := []Options{{}, {FirstSolution: true}}
	t.Run("Solver.Solve", func(t *testing.T) {
		var sv Solver
		for _, opts := range modes {
			if n := testing.AllocsPerRun(20, func() { _, _ = sv.Solve(ctx, &g, opts) }); n != 0 {
				t.Errorf("Solver.Solve with %+v allocates %v times per puzzle, want 0", opts, n)
			}
		}
	})
	t.Run("Solve", func(t *testing.T) {
		if raceEnabled() {
			t.Skip("Solve uses a sync.Pool, which allocates at random under the race detector")
		}
		for _, opts := range modes {
			if n := testing.AllocsPerRun(20, func() { _, _ = Solve(ctx, &g, opts) }); n != 0 {
				t.Errorf("Solve with %+v allocates %v times per puzzle, want 0", opts, n)
			}
		}
	})
}
