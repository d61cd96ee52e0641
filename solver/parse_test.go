package solver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// puzzle is the puzzle of most of the parse tests, in canonical form.
const puzzle = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"

// The same puzzle in the formats Parse reads.
const (
	puzzleZeros = "530070000600195000098000060800060003400803001700020006060000280000419005000080079"

	// As most Sudoku sites print it.
	puzzleSite = `5 3 . | . 7 . | . . .
6 . . | 1 9 5 | . . .
. 9 8 | . . . | . 6 .
------+-------+------
8 . . | . 6 . | . . 3
4 . . | 8 . 3 | . . 1
7 . . | . 2 . | . . 6
------+-------+------
. 6 . | . . . | 2 8 .
. . . | 4 1 9 | . . 5
. . . | . 8 . | . 7 9
`

	// With a border, indented, with blank lines around it.
	puzzleBoxed = `

	+-------+-------+-------+
	| 5 3 . | . 7 . | . . . |
	| 6 . . | 1 9 5 | . . . |
	| . 9 8 | . . . | . 6 . |
	+-------+-------+-------+
	| 8 . . | . 6 . | . . 3 |
	| 4 . . | 8 . 3 | . . 1 |
	| 7 . . | . 2 . | . . 6 |
	+-------+-------+-------+
	| . 6 . | . . . | 2 8 . |
	| . . . | 4 1 9 | . . 5 |
	| . . . | . 8 . | . 7 9 |
	+-------+-------+-------+

`

	// Nine lines of nine digits, bands apart, zeros for blanks.
	puzzleCompact = "530070000\n600195000\n098000060\n\n800060003\n400803001\n700020006\n\n060000280\n000419005\n000080079"
)

// siteLine returns the line'th line (1-based) of puzzleSite.
func siteLine(line int) string { return strings.Split(puzzleSite, "\n")[line-1] }

// replaceLine returns puzzleSite with its line'th line (1-based) replaced.
func replaceLine(line int, with string) string {
	ls := strings.Split(puzzleSite, "\n")
	ls[line-1] = with
	return strings.Join(ls, "\n")
}

// at returns puzzle with the byte at i replaced by s.
func at(i int, s string) string { return puzzle[:i] + s + puzzle[i+1:] }

// parseTests are the inputs of TestParse, and the seeds of FuzzParseSolve.
// When err is nil Parse must succeed with a grid whose String is want
// (puzzle if want is empty); otherwise it must fail with an error equal to
// *err, and whose message is msg when msg is set.
var parseTests = []struct {
	name string
	in   string
	want string
	err  *ParseError
	msg  string
}{
	// One puzzle per line.
	{name: "line with dots", in: puzzle},
	{name: "line with zeros", in: puzzleZeros},
	{name: "line ending in LF", in: puzzle + "\n"},
	{name: "line ending in CRLF", in: puzzleZeros + "\r\n"},
	{name: "line with surrounding spaces and tabs", in: " \t " + puzzle + "\t  \r\n"},
	{name: "line with separators between cells", in: "53..7....|6..195...|.98....6.|8...6...3|4..8.3..1|7...2...6|.6....28.|...419..5|....8..79"},
	{name: "empty grid", in: strings.Repeat(".", 81), want: strings.Repeat(".", 81)},
	{name: "full grid", in: "534678912672195348198342567859761423426853791713924856961537284287419635345286179",
		want: "534678912672195348198342567859761423426853791713924856961537284287419635345286179"},

	// The 9-line grid.
	{name: "grid as sites print it", in: puzzleSite},
	{name: "grid with border and blank lines", in: puzzleBoxed},
	{name: "grid with CRLF", in: strings.ReplaceAll(puzzleSite, "\n", "\r\n")},
	{name: "grid of digits with zeros", in: puzzleCompact},

	// Too many or too few cells.
	{name: "empty input", in: "", err: &ParseError{Kind: CellCount}, msg: "solver: 0 cells, want 81"},
	{name: "blank lines only", in: "\n \r\n\t\n", err: &ParseError{Kind: CellCount}},
	{name: "separators only", in: "------+-------+------", err: &ParseError{Kind: CellCount}},
	{name: "line of 80 cells", in: puzzle[:80], err: &ParseError{Kind: CellCount, Cells: 80},
		msg: "solver: 80 cells, want 81"},
	{name: "line of 82 cells", in: puzzle + "9", err: &ParseError{Kind: CellCount, Cells: 82},
		msg: "solver: 82 cells, want 81"},
	{name: "line of 82 cells ending in CRLF", in: puzzle + "0\r\n", err: &ParseError{Kind: CellCount, Cells: 82},
		msg: "solver: 82 cells, want 81"},
	{name: "line of 83 cells", in: "." + puzzle + ".", err: &ParseError{Kind: CellCount, Cells: 83},
		msg: "solver: 83 cells, want 81"},
	{name: "line of 162 cells (two puzzles on a line)", in: puzzle + puzzleZeros, err: &ParseError{Kind: CellCount, Cells: 162},
		msg: "solver: 162 cells, want 81"},
	{name: "line of 300 cells", in: strings.Repeat("1", 300), err: &ParseError{Kind: CellCount, Cells: 300},
		msg: "solver: 300 cells, want 81"},
	{name: "line of 1000 cells", in: strings.Repeat("0", 1000), err: &ParseError{Kind: CellCount, Cells: 1000},
		msg: "solver: 1000 cells, want 81"},
	{name: "line of 1000 cells with separators", in: strings.Repeat("1 | ", 1000), err: &ParseError{Kind: CellCount, Cells: 1000},
		msg: "solver: 1000 cells, want 81"},
	{name: "longest input", in: strings.Repeat(".", MaxInputLen), err: &ParseError{Kind: CellCount, Cells: MaxInputLen},
		msg: "solver: 4096 cells, want 81"},
	{name: "one cell", in: "5", err: &ParseError{Kind: CellCount, Cells: 1}, msg: "solver: 1 cell, want 81"},
	{name: "grid row of 8 cells", in: replaceLine(5, "8 . . | . 6 . | . 3"),
		err: &ParseError{Kind: CellCount, Line: 5, Cells: 8},
		msg: "solver: line 5: 8 cells, want 9 in each of the 9 lines of a grid"},
	{name: "grid row of 10 cells", in: replaceLine(11, ". . . | 4 1 9 | . . 5 5"), err: &ParseError{Kind: CellCount, Line: 11, Cells: 10}},
	{name: "first grid row wrong", in: replaceLine(1, "5 3 . | . 7 . | . ."), err: &ParseError{Kind: CellCount, Line: 1, Cells: 8}},
	{name: "grid of 8 rows", in: replaceLine(11, ""), err: &ParseError{Kind: CellCount, Cells: 72},
		msg: "solver: 72 cells, want 81"},
	{name: "grid of 10 rows", in: puzzleSite + siteLine(11), err: &ParseError{Kind: CellCount, Cells: 90},
		msg: "solver: 90 cells, want 81"},
	{name: "grid row of 300 cells", in: replaceLine(2, strings.Repeat("6 ", 300)), err: &ParseError{Kind: CellCount, Line: 2, Cells: 300},
		msg: "solver: line 2: 300 cells, want 9 in each of the 9 lines of a grid"},
	{name: "two puzzles", in: puzzle + "\n" + puzzle, err: &ParseError{Kind: CellCount, Line: 1, Cells: 81},
		msg: "solver: line 1: 81 cells, want 9 in each of the 9 lines of a grid"},

	// Characters that are no cell.
	{name: "letter", in: at(4, "x"), err: &ParseError{Kind: BadChar, Line: 1, Col: 5, Char: 'x', Cell: 4},
		msg: "solver: column 5: invalid character 'x' (U+0078) for cell r1c5 (want 1-9, or . or 0 for a blank)"},
	{name: "full-width digit", in: at(9, "１"), err: &ParseError{Kind: BadChar, Line: 1, Col: 10, Char: '１', Cell: 9},
		msg: "solver: column 10: invalid character '１' (U+FF11) for cell r2c1 (want 1-9, or . or 0 for a blank)"},
	{name: "NUL", in: at(40, "\x00"), err: &ParseError{Kind: BadChar, Line: 1, Col: 41, Char: 0, Cell: 40},
		msg: `solver: column 41: invalid character '\x00' (U+0000) for cell r5c5 (want 1-9, or . or 0 for a blank)`},
	{name: "tab inside a line", in: puzzle[:27] + "\t" + puzzle[27:], err: &ParseError{Kind: BadChar, Line: 1, Col: 28, Char: '\t', Cell: 27}},
	{name: "CR inside a line", in: puzzle[:9] + "\r" + puzzle[9:], err: &ParseError{Kind: BadChar, Line: 1, Col: 10, Char: '\r', Cell: 9}},
	{name: "underscore blank", in: at(2, "_"), err: &ParseError{Kind: BadChar, Line: 1, Col: 3, Char: '_', Cell: 2}},
	{name: "HTML", in: "<td>5</td><td>3</td>", err: &ParseError{Kind: BadChar, Line: 1, Col: 1, Char: '<', Cell: 0}},
	{name: "invalid UTF-8", in: at(20, "\xff"), err: &ParseError{Kind: BadChar, Line: 1, Col: 21, Char: utf8.RuneError, Cell: 20}},
	{name: "byte order mark", in: "\uFEFF" + puzzle, err: &ParseError{Kind: BadChar, Line: 1, Col: 1, Char: '\uFEFF', Cell: 0}},
	{name: "comment after the last cell", in: puzzle + " # easy", err: &ParseError{Kind: BadChar, Line: 1, Col: 83, Char: '#', Cell: -1},
		msg: "solver: column 83: invalid character '#' (U+0023) after the last cell (want 1-9, or . or 0 for a blank)"},
	{name: "letter in a grid", in: replaceLine(3, ". 9 x | . . . | . 6 ."), err: &ParseError{Kind: BadChar, Line: 3, Col: 5, Char: 'x', Cell: 20},
		msg: "solver: line 3 column 5: invalid character 'x' (U+0078) for cell r3c3 (want 1-9, or . or 0 for a blank)"},
	{name: "full-width digit in an indented grid", in: strings.Replace(puzzleBoxed, "| 4 . .", "| 4 ４ .", 1),
		err: &ParseError{Kind: BadChar, Line: 9, Col: 6, Char: '４', Cell: 37}},

	// Givens that repeat.
	{name: "repeat in a row", in: "1......1." + strings.Repeat(".", 72), err: &ParseError{Kind: Conflict, Digit: 1, Unit: Row, Cell: 0, Cell2: 7},
		msg: "solver: digit 1 repeats in row 1: r1c1 and r1c8"},
	{name: "repeat in a column", in: at(34, "7"), err: &ParseError{Kind: Conflict, Digit: 7, Unit: Column, Cell: 34, Cell2: 79},
		msg: "solver: digit 7 repeats in column 8: r4c8 and r9c8"},
	{name: "repeat in a box", in: at(70, "2"), err: &ParseError{Kind: Conflict, Digit: 2, Unit: Box, Cell: 60, Cell2: 70},
		msg: "solver: digit 2 repeats in box 9: r7c7 and r8c8"},
	{name: "repeat in a grid", in: replaceLine(1, "5 3 . | . 7 . | . . 5"), err: &ParseError{Kind: Conflict, Digit: 5, Unit: Row, Cell: 0, Cell2: 8}},

	// Too long to look at.
	{name: "too long", in: strings.Repeat(".", MaxInputLen+1), err: &ParseError{Kind: TooLong, Len: MaxInputLen + 1},
		msg: "solver: input of 4097 bytes is too long for a puzzle (at most 4096)"},
	{name: "too long with a bad character", in: strings.Repeat("x", 5000), err: &ParseError{Kind: TooLong, Len: 5000}},
}

func TestParse(t *testing.T) {
	for _, tc := range parseTests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Parse(tc.in)
			if tc.err == nil {
				if err != nil {
					t.Fatalf("Parse(%q): %v", tc.in, err)
				}
				want := tc.want
				if want == "" {
					want = puzzle
				}
				if got := g.String(); got != want {
					t.Errorf("Parse(%q) = %s, want %s", tc.in, got, want)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) = %s, %v; want a *ParseError", tc.in, g.String(), err)
			}
			if *pe != *tc.err {
				t.Errorf("Parse(%q):\n got %+v\nwant %+v", tc.in, *pe, *tc.err)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("Parse(%q) error message\n got %s\nwant %s", tc.in, err, tc.msg)
			}
			if g != (Grid{}) {
				t.Errorf("Parse(%q) returned grid %s with its error, want the zero Grid", tc.in, g.String())
			}
		})
	}
}

// TestParseFastPath checks that the one-line fast path of Parse and the
// general parser agree on every test input.
func TestParseFastPath(t *testing.T) {
	for _, tc := range parseTests {
		if len(tc.in) > MaxInputLen {
			continue
		}
		checkSameParse(t, tc.in)
	}
}

// checkSameParse fails t unless Parse, ParseBytes and parseText agree on
// s.
func checkSameParse(t *testing.T, s string) {
	t.Helper()
	g1, err1 := Parse(s)
	g2, err2 := parseText(s)
	g3, err3 := ParseBytes([]byte(s))
	var pe1, pe2, pe3 *ParseError
	errors.As(err1, &pe1)
	errors.As(err2, &pe2)
	errors.As(err3, &pe3)
	if g1 != g2 || (err1 == nil) != (err2 == nil) || pe1 != nil && pe2 != nil && *pe1 != *pe2 {
		t.Errorf("input %q: Parse gives %s, %v; parseText gives %s, %v", s, g1.String(), err1, g2.String(), err2)
	}
	if g1 != g3 || (err1 == nil) != (err3 == nil) || pe1 != nil && pe3 != nil && *pe1 != *pe3 {
		t.Errorf("input %q: Parse gives %s, %v; ParseBytes gives %s, %v", s, g1.String(), err1, g3.String(), err3)
	}
}

// TestParseSameKey checks that every format of a puzzle gives the same
// grid, so the same cache key.
func TestParseSameKey(t *testing.T) {
	sum := sha256.Sum256([]byte(puzzle))
	want := hex.EncodeToString(sum[:])
	for _, in := range []string{puzzle, puzzleZeros, puzzle + "\r\n", puzzleSite, puzzleBoxed, puzzleCompact,
		strings.ReplaceAll(puzzleSite, "\n", "\r\n")} {
		g, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if k := g.Key(); k != want {
			t.Errorf("Parse(%q).Key() = %s, want %s (the SHA-256 of %s)", in, k, want, puzzle)
		}
		if !IsKey(g.Key()) {
			t.Errorf("IsKey(%s) = false", g.Key())
		}
	}
}

// TestParseAllocs checks that a successful Parse allocates nothing, and
// that a megabyte is rejected without being copied.
func TestParseAllocs(t *testing.T) {
	for _, in := range []string{puzzle, puzzle + "\r\n", puzzleSite} {
		if n := testing.AllocsPerRun(100, func() { _, _ = Parse(in) }); n != 0 {
			t.Errorf("Parse(%q) allocates %v times, want 0", in, n)
		}
	}
	// ParseBytes copies nothing on the fast path.
	for _, in := range []string{puzzle, puzzle + "\r\n"} {
		b := []byte(in)
		if n := testing.AllocsPerRun(100, func() { _, _ = ParseBytes(b) }); n != 0 {
			t.Errorf("ParseBytes(%q) allocates %v times, want 0", in, n)
		}
	}
	huge := strings.Repeat(puzzle, 1<<20/81)
	n := testing.AllocsPerRun(100, func() {
		if _, err := Parse(huge); err == nil {
			t.Fatal("Parse of a megabyte succeeded")
		}
	})
	if n > 1 {
		t.Errorf("Parse of a megabyte allocates %v times, want 1 (its error)", n)
	}
}

// BenchmarkParse parses puzzles of 17_clue_300.txt in the one-line format
// (the fast path, as the worker sees them), with a CRLF line end, and in
// the 9-line grid format.
func BenchmarkParse(b *testing.B) {
	lines := fixtureLines(b, "17_clue_300.txt")
	grids := make([]string, len(lines))
	crlf := make([]string, len(lines))
	for i, l := range lines {
		crlf[i] = l + "\r\n"
		var sb strings.Builder
		for r := 0; r < 9; r++ {
			if r == 3 || r == 6 {
				sb.WriteString("------+-------+------\n")
			}
			for c := 0; c < 9; c++ {
				if c == 3 || c == 6 {
					sb.WriteString("| ")
				}
				sb.WriteByte(l[r*9+c])
				sb.WriteByte(' ')
			}
			sb.WriteByte('\n')
		}
		grids[i] = sb.String()
	}
	for _, set := range []struct {
		name string
		in   []string
	}{{"line", lines}, {"line_crlf", crlf}, {"grid", grids}} {
		b.Run(set.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := Parse(set.in[i%len(set.in)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/puzzle")
		})
	}
}

// TestParseHugeInput checks that a megabyte on one line is rejected for
// its length, before its first character is looked at (a letter there
// would otherwise be a BadChar error).
func TestParseHugeInput(t *testing.T) {
	for _, in := range []string{strings.Repeat("1", 1<<20), "x" + strings.Repeat(".", 1<<20)} {
		_, err := Parse(in)
		var pe *ParseError
		if !errors.As(err, &pe) || *pe != (ParseError{Kind: TooLong, Len: len(in)}) {
			t.Errorf("Parse of %d bytes starting %q: %v, want a TooLong error", len(in), in[:1], err)
		}
	}
}

// TestOneLineEveryByte checks the fast path's eight-at-a-time conversion
// against cellValue for every byte value in every place of a word, and
// in the last cell, beside cells of every kind.
func TestOneLineEveryByte(t *testing.T) {
	base := []byte(strings.Repeat(".123456789", 9)[:81])
	for p := range 81 {
		for b := range 256 {
			line := slices.Clone(base)
			line[p] = byte(b)
			g, ok := oneLine(line)
			if want := cellValue[b] != notCell; ok != want {
				t.Fatalf("byte %#x at cell %d: ok %v, want %v", b, p+1, ok, want)
			}
			if !ok {
				continue
			}
			for i, c := range line {
				if g[i] != cellValue[c] {
					t.Fatalf("byte %#x at cell %d: cell %d is %d, want %d", b, p+1, i+1, g[i], cellValue[c])
				}
			}
		}
	}
}
