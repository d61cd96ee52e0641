package solver

import (
	"bufio"
	"context"
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
