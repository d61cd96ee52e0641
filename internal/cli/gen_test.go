package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestGen(t *testing.T) {
	ctx := context.Background()
	code, out, stderr := run(t, ctx, "", "gen", "--from", clue17, "-n", "1000", "--seed", "3")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "gen: 1000 puzzles from 200 in ") {
		t.Errorf("stderr %q", stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d lines, want 1000", len(lines))
	}
	seen := map[string]bool{}
	for i, l := range lines {
		if len(l) != 81 || seen[l] {
			t.Fatalf("line %d %q: not 81 cells, or repeated", i+1, l)
		}
		seen[l] = true
	}
	// Every one has a unique solution, as its base.
	code, _, stderr = run(t, ctx, out, "solve", "--local", "-")
	if code != ExitOK || !strings.Contains(stderr, ": 1000 unique\n") {
		t.Fatalf("solve --local of the generated puzzles: exit %d, %s", code, stderr)
	}
	// The same seed gives the same puzzles, to a file too.
	file := filepath.Join(t.TempDir(), "gen.txt")
	if code, _, stderr := run(t, ctx, "", "gen", "--from", clue17, "-n", "1000", "--seed", "3", "--out", file); code != ExitOK {
		t.Fatalf("--out: exit %d: %s", code, stderr)
	}
	if got := strings.Join(readLines(t, file), "\n") + "\n"; got != out {
		t.Fatal("a second run with the same seed differs")
	}
	_, other, _ := run(t, ctx, "", "gen", "--from", clue17, "-n", "1000", "--seed", "4")
	if other == out {
		t.Fatal("seeds 3 and 4 give the same puzzles")
	}
}

func TestGenErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no count", []string{"gen", "--from", clue17}, ExitUsage, `"count" not set`},
		{"no from", []string{"gen", "-n", "5"}, ExitUsage, "--from is required"},
		{"negative count", []string{"gen", "--from", clue17, "-n", "-5"}, ExitUsage, "-n -5"},
		{"missing file", []string{"gen", "--from", "testdata/nope.txt", "-n", "5"}, ExitUsage, "nope.txt"},
		{"bad base", []string{"gen", "--from", mixed, "-n", "5"}, ExitFailure, "gen: line 6: solver: digit 1 repeats"},
		{"bad seed", []string{"gen", "--from", clue17, "-n", "5", "--seed", "x"}, ExitUsage, "--seed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, context.Background(), "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}
