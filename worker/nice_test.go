package worker

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/nice"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestNiceHandlers checks that with Options.Nice the handlers solve on
// threads of that priority, and nothing else does: the first-batch lane
// and the rest of the process keep theirs.
func TestNiceHandlers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a thread's own priority is Linux's")
	}
	base, err := nice.Of(0)
	if err != nil {
		t.Fatal(err)
	}
	const want = 5
	if base >= want {
		t.Skipf("the test runs at nice %d already", base)
	}
	e := newEnv(t, "embedded")
	puzzles := testenv.Puzzles(t, "testdata/17_clue_300.txt", 300)
	var mu sync.Mutex
	seen := map[int]int{} // nice value -> puzzles solved at it
	w := e.worker(Options{Concurrency: 1, Nice: want, NoService: true})
	w.solve = func(sv *solver.Solver, ctx context.Context, g *solver.Grid, opts solver.Options) (solver.Result, error) {
		n, err := nice.Of(0)
		if err != nil {
			n = -1
		}
		mu.Lock()
		seen[n]++
		mu.Unlock()
		return sv.Solve(ctx, g, opts)
	}
	e.run(w)
	id := e.submit(puzzles[:100], 5) // 20 batches
	rs, _ := e.follow(id, 30*time.Second)
	check(t, puzzles[:100], rs)
	mu.Lock()
	defer mu.Unlock()
	for n, count := range seen {
		if n != want && n != base {
			t.Errorf("%d puzzles solved at nice %d, want %d (handlers) or %d (first-batch lane)", count, n, want, base)
		}
	}
	if seen[want] == 0 {
		t.Errorf("no puzzle solved at nice %d: %v", want, seen)
	}
	if n, _ := nice.Of(0); n != base {
		t.Errorf("the test's own thread went from nice %d to %d", base, n)
	}
}
