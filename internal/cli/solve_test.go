package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sudoku-queue/sudoku-queue/internal/config"
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
		{"empty input", []string{"solve", "--local"}, "# nothing\n\n", ExitUsage, 0, "standard input: no puzzle in the input"},
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

// siteGrid returns a puzzle (81 characters) as a 9-line grid as Sudoku
// sites print it, with box separators, in 11 lines; with boxed, with a
// border around each box too, in 13 lines.
func siteGrid(p string, boxed bool) string {
	var b strings.Builder
	rule := "------+-------+------\n"
	if boxed {
		rule = "+-------+-------+-------+\n"
		b.WriteString(rule)
	}
	for r := range 9 {
		if r == 3 || r == 6 {
			b.WriteString(rule)
		}
		if boxed {
			b.WriteString("| ")
		}
		for c := range 9 {
			if c == 3 || c == 6 {
				b.WriteString("| ")
			}
			b.WriteByte(p[9*r+c])
			if c < 8 {
				b.WriteByte(' ')
			}
		}
		if boxed {
			b.WriteString(" |")
		}
		b.WriteByte('\n')
	}
	if boxed {
		b.WriteString(rule)
	}
	return b.String()
}

// tempFile writes content to a new file in a temporary folder and
// returns its name.
func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// noServices points NATS and Redis at a port where nothing listens, so
// that solve without --local runs on its embedded server and an
// in-process cache, and shares nothing with other tests.
func noServices(t *testing.T) {
	port := testenv.FreePort(t)
	t.Setenv("SUDOKU_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", port))
	t.Setenv("SUDOKU_REDIS_ADDRS", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("SUDOKU_REDIS_DIAL_TIMEOUT", "200ms")
	t.Setenv("SUDOKU_LOG_LEVEL", "warn")
}

// TestSolveGrids solves a file of 9-line grids, in several layouts, mixed
// with a one-line puzzle: one result per puzzle, naming the line where it
// starts, and one error for a broken grid.
func TestSolveGrids(t *testing.T) {
	ps := readLines(t, clue17)[:5]
	var plain strings.Builder // ps[3] as 9 lines of 9 digits, 0 for a blank
	for r := range 9 {
		plain.WriteString(strings.ReplaceAll(ps[3][9*r:9*r+9], ".", "0") + "\n")
	}
	broken := strings.Join(strings.SplitAfter(plain.String(), "\n")[:8], "") // 8 rows
	in := "# grids\n" +                                                      // 1
		siteGrid(ps[0], false) + // 2-12
		"\n" + // 13
		siteGrid(ps[1], true) + // 14-26, first row on 15
		"  " + ps[2] + "\r\n" + // 27
		plain.String() + // 28-36
		"\n" + // 37
		broken + // 38-45
		"\n" + // 46
		siteGrid(ps[4], false) // 47-57
	file := tempFile(t, "grids.txt", in)
	sol := `^[1-9]{81}$`
	wantText := []string{sol, sol, sol, sol, `^error: line 38: solver: 72 cells, want 81$`, sol}
	wantLines := []int{2, 15, 27, 28, 38, 47}
	wantPuzzles := []int{0, 1, 2, 3, -1, 4}

	check := func(t *testing.T, args ...string) string {
		t.Helper()
		code, stdout, stderr := run(t, context.Background(), "", append(args, file)...)
		if code != ExitFailure || !strings.Contains(stderr, "5 unique, 1 invalid") {
			t.Errorf("exit status %d, stderr %q; want 1 and 5 unique, 1 invalid", code, stderr)
		}
		got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if len(got) != len(wantText) {
			t.Fatalf("got %d lines, want %d:\n%s", len(got), len(wantText), stdout)
		}
		for i, w := range wantText {
			if !regexp.MustCompile(w).MatchString(got[i]) {
				t.Errorf("result %d: %q does not match %s", i+1, got[i], w)
			} else if p := wantPuzzles[i]; p >= 0 {
				testenv.CheckSolution(t, ps[p], got[i])
			}
		}
		return stdout
	}
	local := check(t, "solve", "--local")

	code, stdout, _ := run(t, context.Background(), "", "solve", "--local", "--format", "jsonl", file)
	if code != ExitFailure {
		t.Errorf("jsonl: exit status %d, want 1", code)
	}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for i := 0; sc.Scan(); i++ {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if i >= len(wantLines) || r.Line != wantLines[i] {
			t.Fatalf("jsonl result %d: line %d, want %v", i+1, r.Line, wantLines)
		}
		if p := wantPuzzles[i]; p >= 0 && r.Puzzle != ps[p] {
			t.Errorf("line %d: puzzle %q, want %q", r.Line, r.Puzzle, ps[p])
		}
		if p := wantPuzzles[i]; p < 0 && r.Puzzle != strings.TrimSuffix(broken, "\n") {
			t.Errorf("line %d: the broken grid's puzzle is %q, want its text", r.Line, r.Puzzle)
		}
	}

	// Through the queue, the same.
	t.Run("queued", func(t *testing.T) {
		noServices(t)
		if out := check(t, "solve"); out != local {
			t.Errorf("solve output differs from solve --local:\n%s\n%s", out, local)
		}
	})
}

// TestSolveConfigErrors: solve (both ways) and gen load the configuration
// like every command, and a configuration that is wrong is a usage error
// that names the problem.
func TestSolveConfigErrors(t *testing.T) {
	unknown := tempFile(t, "unknown.yaml", "worker:\n  max_nodez: 1\n")
	badValue := tempFile(t, "bad.yaml", "worker:\n  max_nodes: lots\n")
	good := tempFile(t, "good.yaml", "worker:\n  max_nodes: 5000\n")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	gen := []string{"gen", "--from", clue17, "-n", "3"}
	tests := []struct {
		name   string
		env    []string // NAME=VALUE
		args   []string
		code   int
		stderr []string
	}{
		{"local: a file that does not exist", nil, []string{"solve", "--local", "--config", missing, "-"},
			ExitUsage, []string{"missing.yaml", "no such file"}},
		{"local: an unknown key", nil, []string{"solve", "--local", "--config", unknown, "-"},
			ExitUsage, []string{"worker.max_nodez", "unknown key", "did you mean worker.max_nodes?", "unknown.yaml"}},
		{"local: a bad value", nil, []string{"solve", "--local", "--config", badValue, "-"},
			ExitUsage, []string{"worker.max_nodes", `"lots"`}},
		{"local: $SUDOKU_CONFIG", []string{"SUDOKU_CONFIG=" + unknown}, []string{"solve", "--local", "-"},
			ExitUsage, []string{"worker.max_nodez"}},
		{"local: a bad environment variable", []string{"SUDOKU_WORKER_CONCURRENCY=many"}, []string{"solve", "--local", "-"},
			ExitUsage, []string{"worker.concurrency", "$SUDOKU_WORKER_CONCURRENCY"}},
		{"local: a good file", nil, []string{"solve", "--local", "--config", good, "-"}, ExitOK, []string{"1 unique"}},
		{"queued: a file that does not exist", nil, []string{"solve", "--config", missing, "-"},
			ExitUsage, []string{"missing.yaml"}},
		{"queued: an unknown key", nil, []string{"solve", "--config", unknown, "-"},
			ExitUsage, []string{"worker.max_nodez", "unknown key"}},
		{"gen: a file that does not exist", nil, append(gen, "--config", missing), ExitUsage, []string{"missing.yaml"}},
		{"gen: an unknown key", nil, append(gen, "--config", unknown), ExitUsage, []string{"worker.max_nodez", "unknown key"}},
		{"gen: a good file", nil, append(gen, "--config", good), ExitOK, []string{"gen: 3 puzzles"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noServices(t)
			for _, kv := range tt.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			code, _, stderr := run(t, context.Background(), unique+"\n", tt.args...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q does not contain %q", stderr, s)
				}
			}
			if tt.code == ExitUsage && !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("usage error without a hint: %q", stderr)
			}
		})
	}
}

// TestSolveMaxNodesPrecedence: worker.max_nodes comes from the flag, else
// the environment, else the file, else the default, in both modes. A
// budget of one node gives up on the hard puzzle; the default solves it.
func TestSolveMaxNodesPrecedence(t *testing.T) {
	const hard = "98.7..6..5..9..7......8....6..4..5....3..2.......6..1.2....9..5.6.2....7..9.4.2.."
	one := tempFile(t, "one.yaml", "worker:\n  max_nodes: 1\n")
	unbounded := tempFile(t, "unbounded.yaml", "worker:\n  max_nodes: -1\n")
	tests := []struct {
		name   string
		env    string // SUDOKU_WORKER_MAX_NODES
		args   []string
		gaveUp bool
		queued bool // also without --local (slower: an embedded server each time)
	}{
		{"default", "", nil, false, true},
		{"environment", "1", nil, true, true},
		{"file", "", []string{"--config", one}, true, true},
		{"$SUDOKU_CONFIG", "", []string{"SUDOKU_CONFIG"}, true, false},
		{"environment over file", "-1", []string{"--config", one}, false, false},
		{"environment over file, the other way", "1", []string{"--config", unbounded}, true, false},
		{"flag over environment", "1", []string{"--max-nodes", "-1"}, false, true},
		{"flag over file", "", []string{"--config", one, "--max-nodes", "0"}, false, false},
		{"flag over a default", "", []string{"--max-nodes", "1"}, true, false},
	}
	for _, mode := range []string{"local", "queued"} {
		for _, tt := range tests {
			if mode == "queued" && !tt.queued {
				continue
			}
			t.Run(mode+": "+tt.name, func(t *testing.T) {
				noServices(t)
				if tt.env != "" {
					t.Setenv("SUDOKU_WORKER_MAX_NODES", tt.env)
				}
				args := []string{"solve"}
				if mode == "local" {
					args = append(args, "--local")
				}
				if len(tt.args) == 1 && tt.args[0] == "SUDOKU_CONFIG" {
					t.Setenv("SUDOKU_CONFIG", one)
				} else {
					args = append(args, tt.args...)
				}
				code, stdout, stderr := run(t, context.Background(), hard+"\n", args...)
				gaveUp := strings.Contains(stderr, "1 gave_up")
				if gaveUp != tt.gaveUp || (code == ExitOK) == tt.gaveUp {
					t.Errorf("exit status %d, stdout %q, stderr %q; want gave up: %v", code, stdout, stderr, tt.gaveUp)
				}
			})
		}
	}
}

// TestSolveApplyConfig checks the settings of solve that mirror a
// configuration key: the flag when given, else the configuration's value,
// with 0 goroutines meaning GOMAXPROCS.
func TestSolveApplyConfig(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	tests := []struct {
		name         string
		args         []string
		concurrency  int
		maxNodes     int64
		wantWorkers  int
		wantMaxNodes int64
	}{
		{"configuration", nil, 3, 77, 3, 77},
		{"configuration 0", nil, 0, 0, procs, 0},
		{"flags", []string{"--workers", "5", "--max-nodes", "9"}, 3, 77, 5, 9},
		{"flags at their defaults", []string{"--workers", "0", "--max-nodes", "0"}, 3, 77, procs, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f solveFlags
			fs := pflag.NewFlagSet("solve", pflag.ContinueOnError)
			f.addFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			cfg := config.Default()
			cfg.Worker.Concurrency, cfg.Worker.MaxNodes = tt.concurrency, tt.maxNodes
			f.applyConfig(fs, cfg)
			if f.workers != tt.wantWorkers || f.maxNodes != tt.wantMaxNodes {
				t.Errorf("workers %d, max nodes %d; want %d, %d", f.workers, f.maxNodes, tt.wantWorkers, tt.wantMaxNodes)
			}
		})
	}
}
