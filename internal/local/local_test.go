package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// Puzzles of every outcome. The 17-given puzzles are unique; removing a
// given from one leaves several solutions (they are minimal); adding a
// given that differs from its solution, without repeating a digit, leaves
// none.
var cases = []struct {
	text string
	want result.Status
}{
	{puzzle17, result.StatusUnique},
	{".................1.....2.3......3.2...4....5...6.1.....3......6.7..8...952.7.....", result.StatusUnique},
	{".................1.....2.3......425...6.......17....8.....7...64...6....9..8...1.", result.StatusUnique},
	{"................. .....2.3......3.2...1.4......5....6..3......4.7..8...962...7...", result.StatusInvalid}, // 80 cells
	{"..................\t....2.3......3.2...1.4......5....6..3......4.7..8...962...7...", result.StatusInvalid},
	{"11...............1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7...", result.StatusInvalid}, // repeated 1
	{strings.Repeat("1", input.MaxLineLen+1), result.StatusInvalid},
	{".........................2.3......3.2...1.4......5....6..3......4.7..8...962...7...", result.StatusInvalid}, // 83 cells
	{withCell(puzzle17, 17, '.'), result.StatusMultiple},
	{withCell(puzzle17, 0, '1'), result.StatusNone}, // the solution has 9 in r1c1
}

// puzzle17 is cases[0].
const puzzle17 = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."

// withCell returns puzzle with cell i set to c.
func withCell(puzzle string, i int, c byte) string {
	b := []byte(puzzle)
	b[i] = c
	return string(b)
}

// makeInput returns an input of n puzzle lines cycling through cases, with
// comments and blank lines between them, and the case index of each input
// line (-1 for a skipped line).
func makeInput(n int) (string, []int) {
	var b strings.Builder
	kinds := []int{-1} // line numbers start at 1
	for i := range n {
		switch i % 7 {
		case 3:
			b.WriteString("# a comment\n")
			kinds = append(kinds, -1)
		case 5:
			b.WriteString("  \r\n")
			kinds = append(kinds, -1)
		}
		k := i * 7 % len(cases)
		b.WriteString(cases[k].text)
		b.WriteString("\r\n")
		kinds = append(kinds, k)
	}
	return b.String(), kinds
}

func TestRun(t *testing.T) {
	text, kinds := makeInput(2000)
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprintf("workers=%d keeps input order", workers), func(t *testing.T) {
			var got []result.Result
			var progress []int
			err := Run(context.Background(), input.NewReader(strings.NewReader(text)),
				func(r result.Result) error { got = append(got, r); return nil },
				Options{Workers: workers, Progress: func(n int) { progress = append(progress, n) }})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2000 {
				t.Fatalf("got %d results, want 2000", len(got))
			}
			if len(progress) == 0 || progress[len(progress)-1] != 2000 {
				t.Errorf("progress ends at %v, want 2000", progress[max(0, len(progress)-1):])
			}
			line := 0
			for _, r := range got {
				if r.Line <= line {
					t.Fatalf("result for line %d after line %d", r.Line, line)
				}
				for line++; kinds[line] < 0; line++ { // skipped lines give nothing
				}
				if r.Line != line {
					t.Fatalf("result for line %d, want line %d", r.Line, line)
				}
				c := cases[kinds[line]]
				if r.Status != c.want {
					t.Fatalf("line %d: status %s (%s), want %s", line, r.Status, r.Error, c.want)
				}
				if r.Status == result.StatusUnique || r.Status == result.StatusMultiple {
					testenv.CheckSolution(t, c.text, r.Solution)
				}
			}
		})
	}
}

// grid returns puzzle (81 characters) as a 9-line grid with box
// separators, as Sudoku sites print it: 11 lines.
func grid(puzzle string) string {
	var b strings.Builder
	for r := range 9 {
		if r == 3 || r == 6 {
			b.WriteString("------+-------+------\n")
		}
		for c := range 9 {
			if c == 3 || c == 6 {
				b.WriteString("| ")
			}
			b.WriteByte(puzzle[9*r+c])
			if c < 8 {
				b.WriteByte(' ')
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestRunGrids(t *testing.T) {
	multiple := withCell(puzzle17, 17, '.')
	broken := strings.Replace(grid(puzzle17), "6 2 .", "6 .", 1) // a row of 8 cells, on the grid's line 11
	zeros := strings.ReplaceAll(puzzle17, ".", "0")
	var short strings.Builder // 8 rows of 9 digits, 0 for a blank
	for r := range 8 {
		short.WriteString(zeros[9*r:9*r+9] + "\n")
	}
	in := "# grids and lines\n" + // 1
		grid(puzzle17) + // 2-12
		puzzle17 + "\n" + // 13
		"\n" + // 14
		broken + // 15-25
		grid(multiple) + // 26-36, right after the broken one
		short.String() // 37-44
	want := []struct {
		line   int
		status result.Status
		err    string
	}{
		{2, result.StatusUnique, ""},
		{13, result.StatusUnique, ""},
		{15, result.StatusInvalid, "solver: line 11: 8 cells, want 9 in each of the 9 lines of a grid"},
		{26, result.StatusMultiple, "multiple solutions"},
		{37, result.StatusInvalid, "solver: 72 cells, want 81"},
	}
	var got []result.Result
	err := Run(context.Background(), input.NewReader(strings.NewReader(in)),
		func(r result.Result) error { got = append(got, r); return nil }, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		r := got[i]
		if r.Line != w.line || r.Status != w.status || r.Error != w.err {
			t.Errorf("result %d: line %d, %s, %q; want line %d, %s, %q", i, r.Line, r.Status, r.Error, w.line, w.status, w.err)
		}
	}
	testenv.CheckSolution(t, puzzle17, got[0].Solution)
	if got[0].Puzzle != puzzle17 {
		t.Errorf("a grid's puzzle is %q, want the canonical %q", got[0].Puzzle, puzzle17)
	}
	if got[2].Puzzle != strings.TrimSuffix(broken, "\n") {
		t.Errorf("a broken grid's puzzle is %q, want its text %q", got[2].Puzzle, broken)
	}
}

func TestRunFirstSolution(t *testing.T) {
	var got []result.Result
	in := cases[0].text + "\n" + cases[8].text + "\n"
	err := Run(context.Background(), input.NewReader(strings.NewReader(in)),
		func(r result.Result) error { got = append(got, r); return nil },
		Options{FirstSolution: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Status != result.StatusSolved || got[1].Status != result.StatusSolved {
		t.Fatalf("got %+v, want two solved results", got)
	}
	testenv.CheckSolution(t, cases[0].text, got[0].Solution)
	testenv.CheckSolution(t, cases[8].text, got[1].Solution)
}

func TestRunStops(t *testing.T) {
	text, _ := makeInput(5000)
	boom := errors.New("boom")

	t.Run("context canceled: a prefix in order, then the context error", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got []result.Result
		err := Run(ctx, input.NewReader(strings.NewReader(text)), func(r result.Result) error {
			got = append(got, r)
			if len(got) == 100 {
				cancel()
			}
			return nil
		}, Options{Workers: 4})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if len(got) < 100 || len(got) >= 5000 {
			t.Fatalf("got %d results, want a prefix of at least 100", len(got))
		}
		for i := 1; i < len(got); i++ {
			if got[i].Line <= got[i-1].Line {
				t.Fatalf("out of order: line %d after %d", got[i].Line, got[i-1].Line)
			}
			if got[i].Status == result.StatusGaveUp {
				t.Fatalf("line %d: a search cut short was passed on: %s", got[i].Line, got[i].Error)
			}
		}
	})

	t.Run("out fails: its error", func(t *testing.T) {
		n := 0
		err := Run(context.Background(), input.NewReader(strings.NewReader(text)), func(r result.Result) error {
			if n++; n == 50 {
				return boom
			}
			return nil
		}, Options{Workers: 4})
		if !errors.Is(err, boom) || n != 50 {
			t.Fatalf("Run = %v after %d results, want boom after 50", err, n)
		}
	})

	t.Run("read error: every result before it, then the error", func(t *testing.T) {
		in := io.MultiReader(strings.NewReader(strings.Repeat(cases[0].text+"\n", 300)), iotest.ErrReader(boom))
		n := 0
		err := Run(context.Background(), input.NewReader(in), func(r result.Result) error { n++; return nil }, Options{Workers: 2})
		if !errors.Is(err, boom) || n != 300 {
			t.Fatalf("Run = %v after %d results, want boom after 300", err, n)
		}
	})
}

// BenchmarkSolveLocal solves ../shared/data/17_clue.txt (skipped when
// absent) with Run on every core, one whole file per iteration, and
// reports the time per puzzle and the throughput.
func BenchmarkSolveLocal(b *testing.B) {
	data, err := os.ReadFile("../../../shared/data/17_clue.txt")
	if err != nil {
		b.Skipf("17_clue.txt not found (needs ../shared/data beside the checkout): %v", err)
	}
	n := 0
	for b.Loop() {
		n = 0
		err := Run(context.Background(), input.NewReader(bytes.NewReader(data)),
			func(result.Result) error { n++; return nil }, Options{})
		if err != nil {
			b.Fatal(err)
		}
	}
	total := float64(n) * float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/puzzle")
	b.ReportMetric(total/b.Elapsed().Seconds(), "puzzles/s")
}
