package solver

import (
	"bufio"
	"context"
	"os"
	"testing"
)

func TestQuickAll(t *testing.T) {
	for _, name := range []string{"17_clue", "top1465", "forum_hardest_1905_11plus", "serg_benchmark"} {
		f, err := os.Open("../../shared/data/" + name + ".txt")
		if err != nil {
			t.Skip(err)
		}
		sc := bufio.NewScanner(f)
		counts := map[Status]int{}
		var guesses int64
		for sc.Scan() {
			g, err := Parse(sc.Text())
			if err != nil {
				t.Fatal(err)
			}
			r, err := Solve(context.Background(), &g, Options{})
			if err != nil {
				t.Fatal(err)
			}
			guesses += r.Guesses
			counts[r.Status]++
			if r.Status != None {
				if err := r.Solution.Validate(); err != nil || r.Solution.Givens() != 81 {
					t.Fatalf("%s: bad solution %v %s", sc.Text(), err, r.Solution.Digits())
				}
				for i := range g {
					if g[i] != 0 && g[i] != r.Solution[i] {
						t.Fatalf("given lost")
					}
				}
			}
		}
		f.Close()
		t.Logf("%s: %v guesses=%d", name, counts, guesses)
	}
}
