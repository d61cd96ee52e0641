package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// run runs the sudoku command line in-process and returns its exit status,
// standard output and standard error.
func run(t *testing.T, ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// readLines returns the lines of a test file.
func readLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

const (
	clue17 = "testdata/17_clue_200.txt"
	mixed  = "testdata/mixed.txt"
	// hardest holds 200 of the forum's hardest puzzles.
	hardest = "testdata/hardest_200.txt"

	// unique is the first line of clue17; multipleSolutions is it without
	// one given (17-given puzzles are minimal, so it has several).
	unique            = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	multipleSolutions = ".......................2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
)

func TestSolveExitStatus(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		args       []string
		stdin      string
		code       int
		stdoutRows int // -1: do not check
		stderr     string
	}{
		{"every puzzle unique", []string{"solve", "--local", clue17}, "", ExitOK, 200, "solved 200 puzzles in "},
		{"standard input", []string{"solve", "--local", "-"}, unique + "\n", ExitOK, 1, ": 1 unique\n"},
		{"empty input", []string{"solve", "--local"}, "# nothing\n\n", ExitOK, 0, "solved 0 puzzles in "},
		{"some not unique", []string{"solve", "--local", mixed}, "", ExitFailure, 6, "2 unique, 1 multiple, 1 none, 2 invalid\n"},
		{"first solution: multiple is fine", []string{"solve", "--local", "--first", "-"},
			multipleSolutions + "\n", ExitOK, 1, ": 1 solved\n"},
		{"unknown flag", []string{"solve", "--local", "--bogus", clue17}, "", ExitUsage, 0, "unknown flag: --bogus"},
		{"bad format", []string{"solve", "--local", "--format", "xml", clue17}, "", ExitUsage, 0, `--format "xml"`},
		{"bad workers", []string{"solve", "--local", "--workers", "-2", clue17}, "", ExitUsage, 0, "--workers -2"},
		{"missing file", []string{"solve", "--local", "testdata/no-such-file.txt"}, "", ExitUsage, 0, "no-such-file.txt"},
		{"directory", []string{"solve", "--local", "testdata"}, "", ExitUsage, 0, "is a directory"},
		{"two files", []string{"solve", "--local", clue17, mixed}, "", ExitUsage, 0, "at most 1 arg"},
		{"unknown command", []string{"bogus"}, "", ExitUsage, 0, `unknown command "bogus"`},
		{"help", []string{"solve", "--help"}, "", ExitOK, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, ctx, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if rows := strings.Count(stdout, "\n"); tt.stdoutRows >= 0 && rows != tt.stdoutRows {
				t.Errorf("%d lines on stdout, want %d", rows, tt.stdoutRows)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
			if tt.code == ExitUsage && !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("usage error without a hint: %q", stderr)
			}
		})
	}
}

func TestSolveText(t *testing.T) {
	in := readLines(t, mixed)
	code, stdout, _ := run(t, context.Background(), "", "solve", "--local", "--workers", "4", mixed)
	if code != ExitFailure {
		t.Errorf("exit status %d, want %d", code, ExitFailure)
	}
	got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	// Skipped lines give nothing; the others give one line each, in input
	// order, naming their line. The reasons of invalid lines are the
	// parser's to word.
	sol := `[1-9]{81}`
	want := []string{
		`^` + sol + `$`,
		`^error: line 4: multiple solutions: ` + sol + `$`,
		`^error: line 5: no solution$`,
		`^error: line 6: solver: .*\b1\b.*`,
		`^error: line 8: solver: .*\b3\b.*`,
		`^` + sol + `$`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), stdout)
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(got[i]) {
			t.Errorf("line %d: %q does not match %s", i+1, got[i], w)
		}
	}
	testenv.CheckSolution(t, strings.TrimSpace(in[1]), got[0])
	testenv.CheckSolution(t, strings.TrimSpace(in[8]), got[5])
	testenv.CheckSolution(t, in[3], strings.TrimPrefix(got[1], "error: line 4: multiple solutions: "))
}

func TestSolveJSONL(t *testing.T) {
	in := readLines(t, mixed)
	code, stdout, _ := run(t, context.Background(), "", "solve", "--local", "--format", "jsonl", mixed)
	if code != ExitFailure {
		t.Errorf("exit status %d, want %d", code, ExitFailure)
	}
	want := []struct {
		line   int
		status result.Status
	}{{2, result.StatusUnique}, {4, result.StatusMultiple}, {5, result.StatusNone},
		{6, result.StatusInvalid}, {8, result.StatusInvalid}, {9, result.StatusUnique}}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	i := 0
	for ; sc.Scan(); i++ {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, sc.Text())
		}
		if i >= len(want) {
			t.Fatalf("extra line %s", sc.Text())
		}
		if r.Line != want[i].line || r.Status != want[i].status {
			t.Errorf("got line %d status %s, want line %d status %s", r.Line, r.Status, want[i].line, want[i].status)
		}
		raw := strings.TrimSpace(in[r.Line-1])
		switch r.Status {
		case result.StatusInvalid:
			if r.Puzzle != raw || r.Error == "" || r.Key != "" || r.Solution != "" {
				t.Errorf("line %d: invalid result %+v", r.Line, r)
			}
		default:
			g, err := solver.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if r.Puzzle != g.String() || r.Key != g.Key() {
				t.Errorf("line %d: puzzle %q key %q, want %q %q", r.Line, r.Puzzle, r.Key, g.String(), g.Key())
			}
			if r.Status != result.StatusNone {
				testenv.CheckSolution(t, raw, r.Solution)
			}
		}
	}
	if i != len(want) {
		t.Errorf("got %d lines, want %d", i, len(want))
	}
}

func TestSolveOrder(t *testing.T) {
	in := readLines(t, clue17)
	var outs []string
	for _, workers := range []string{"1", "4"} {
		code, stdout, stderr := run(t, context.Background(), "", "solve", "--local", "--workers", workers, clue17)
		if code != ExitOK {
			t.Fatalf("workers=%s: exit status %d: %s", workers, code, stderr)
		}
		got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if len(got) != len(in) {
			t.Fatalf("workers=%s: %d lines, want %d", workers, len(got), len(in))
		}
		for i := range in {
			testenv.CheckSolution(t, in[i], got[i])
		}
		outs = append(outs, stdout)
	}
	if outs[0] != outs[1] {
		t.Error("the output with 4 workers differs from the output with 1")
	}
}

func TestSolveOut(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "out.jsonl")
	code, stdout, stderr := run(t, context.Background(), "", "solve", "--local", "--format=jsonl", "--out", name, clue17)
	if code != ExitOK || stdout != "" {
		t.Fatalf("exit status %d, stdout %q, stderr %q; want 0 and nothing on stdout", code, stdout, stderr)
	}
	if lines := readLines(t, name); len(lines) != 200 {
		t.Errorf("%d lines in %s, want 200", len(lines), name)
	}

	code, _, stderr = run(t, context.Background(), "", "solve", "--local", "--out", clue17, clue17)
	if code != ExitUsage || !strings.Contains(stderr, "is the input file") {
		t.Errorf("--out the input file: exit status %d, stderr %q; want a usage error", code, stderr)
	}
	code, _, stderr = run(t, context.Background(), "", "solve", "--local", "--out", filepath.Join(dir, "no/such/dir"), clue17)
	if code != ExitUsage || !strings.Contains(stderr, "--out") {
		t.Errorf("--out in a missing folder: exit status %d, stderr %q; want a usage error", code, stderr)
	}
}

func TestSolveGaveUp(t *testing.T) {
	// Among the hardest known puzzles: propagation alone cannot solve it,
	// so a budget of one node runs out.
	const hard = "98.7..6..5..9..7......8....6..4..5....3..2.......6..1.2....9..5.6.2....7..9.4.2.."
	code, stdout, stderr := run(t, context.Background(), hard+"\n", "solve", "--local", "--max-nodes", "1")
	if strings.Count(stdout, "\n") != 1 {
		t.Fatalf("stdout %q, want one line", stdout)
	}
	if code != ExitFailure || !strings.HasPrefix(stdout, "error: line 1: ") || !strings.Contains(stderr, "1 gave_up") {
		t.Errorf("exit status %d, stdout %q, stderr %q; want 1, an error line and 1 gave_up", code, stdout, stderr)
	}
}

func TestSolveInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, stderr := run(t, ctx, "", "solve", "--local", clue17)
	if code != ExitInterrupted || !strings.Contains(stderr, "interrupted") {
		t.Errorf("exit status %d, stderr %q; want %d and a message", code, stderr, ExitInterrupted)
	}
}
