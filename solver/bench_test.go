package solver

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// sharedData is where the benchmark sets live, beside the checkout.
const sharedData = "../../shared/data"

// loadSet reads a benchmark set, or skips the benchmark when it is absent.
func loadSet(b *testing.B, name string) []Grid {
	b.Helper()
	f, err := os.Open(filepath.Join(sharedData, name+".txt"))
	if err != nil {
		b.Skipf("benchmark set %s not found (needs ../shared/data): %v", name, err)
	}
	defer f.Close()
	var gs []Grid
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		g, err := Parse(sc.Text())
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		gs = append(gs, g)
	}
	return gs
}

// BenchmarkSolve solves every puzzle of each set, counting to two and
// stopping at the first solution, one puzzle per iteration.
func BenchmarkSolve(b *testing.B) {
	for _, set := range []string{"17_clue", "top1465", "forum_hardest_1905_11plus", "serg_benchmark"} {
		for _, mode := range []struct {
			name string
			opts Options
		}{{"count2", Options{}}, {"first", Options{FirstSolution: true}}} {
			b.Run(set+"/"+mode.name, func(b *testing.B) {
				gs := loadSet(b, set)
				ctx := context.Background()
				var guesses int64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					r, err := Solve(ctx, &gs[i%len(gs)], mode.opts)
					if err != nil {
						b.Fatal(err)
					}
					guesses += r.Guesses
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/puzzle")
				b.ReportMetric(float64(guesses)/float64(b.N), "guesses/puzzle")
			})
		}
	}
}

// BenchmarkBaseline sets the starting point of the project, the classic
// backtracker (first empty cell in row order, digits 1-9, row, column and
// box checked by scanning), beside this solver on the same puzzles in the
// same run, both stopping at the first solution. The naive solver takes
// about 0.15 s a puzzle of top1465 (and minutes for some 17-clue ones), so
// only the first ten puzzles of top1465 are used.
func BenchmarkBaseline(b *testing.B) {
	for _, set := range []struct {
		name string
		n    int
	}{{"top1465", 10}} {
		b.Run(set.name+"/naive", func(b *testing.B) {
			gs := loadSet(b, set.name)[:set.n]
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				g := gs[i%len(gs)]
				if !naiveFirst(&g, 0) {
					b.Fatal("naive solver found no solution")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/puzzle")
		})
		b.Run(set.name+"/ours", func(b *testing.B) {
			gs := loadSet(b, set.name)[:set.n]
			var sv Solver
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := sv.Solve(context.Background(), &gs[i%len(gs)], Options{FirstSolution: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/puzzle")
		})
	}
}

// naiveFirst is the classic backtracker from cell i on; it fills g and
// reports whether it found a solution.
func naiveFirst(g *Grid, i int) bool {
	for i < 81 && g[i] != 0 {
		i++
	}
	if i == 81 {
		return true
	}
	r, c := i/9, i%9
	for d := uint8(1); d <= 9; d++ {
		ok := true
		for k := 0; k < 9 && ok; k++ {
			ok = g[r*9+k] != d && g[k*9+c] != d && g[(r/3*3+k/3)*9+c/3*3+k%3] != d
		}
		if ok {
			g[i] = d
			if naiveFirst(g, i+1) {
				return true
			}
		}
	}
	g[i] = 0
	return false
}

// BenchmarkValidate validates the puzzles of testdata/17_clue_300.txt in
// turn, and their solutions, so that no branch learns one grid.
func BenchmarkValidate(b *testing.B) {
	puzzles := fixture(b, "17_clue_300.txt")
	solutions := make([]Grid, len(puzzles))
	for i := range puzzles {
		solutions[i] = solve(b, &puzzles[i], Options{}).Solution
	}
	// Solutions with 40 cells kept at random: the filled cells in no
	// pattern a branch predictor could learn.
	rng := rand.New(rand.NewPCG(1, 2))
	forty := make([]Grid, len(solutions))
	for i, s := range solutions {
		for _, c := range rng.Perm(81)[:40] {
			forty[i][c] = s[c]
		}
	}
	for _, set := range []struct {
		name  string
		grids []Grid
	}{{"17_clue", puzzles}, {"40_givens", forty}, {"solutions", solutions}} {
		b.Run(set.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := set.grids[i].Validate(); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(set.grids) {
					i = 0
				}
			}
		})
	}
}
