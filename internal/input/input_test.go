package input

import (
	"bytes"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

const (
	puzzle  = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	puzzle2 = ".................1.....2.3......3.2...4....5...6.1.....3......6.7..8...952.7....."
)

// rows returns the 9 rows of a puzzle in 81-character form.
func rows(p string) []string {
	r := make([]string, 9)
	for i := range r {
		r[i] = p[9*i : 9*i+9]
	}
	return r
}

// plain is p as 9 lines of 9 cells.
func plain(p string) string { return strings.Join(rows(p), "\n") }

// siteRows are p's lines as Sudoku sites print it, with box separators:
// "5 3 . | . 7 . | . . ." and "------+-------+------", 11 lines.
func siteRows(p string) []string {
	var out []string
	for i, r := range rows(p) {
		if i == 3 || i == 6 {
			out = append(out, "------+-------+------")
		}
		var b strings.Builder
		for j := range 9 {
			if j > 0 {
				b.WriteByte(' ')
			}
			if j == 3 || j == 6 {
				b.WriteString("| ")
			}
			b.WriteByte(r[j])
		}
		out = append(out, b.String())
	}
	return out
}

// site is p as Sudoku sites print it, 11 lines.
func site(p string) string { return strings.Join(siteRows(p), "\n") }

// border is the top and bottom line of boxed.
const border = "+-------+-------+-------+"

// boxed is p with a border around each box, 13 lines: the grid's text is
// lines 2 to 12.
func boxed(p string) string {
	var out []string
	for _, r := range siteRows(p) {
		if strings.HasPrefix(r, "-") {
			out = append(out, border)
		} else {
			out = append(out, "| "+r+" |")
		}
	}
	return border + "\n" + strings.Join(out, "\n") + "\n" + border
}

// boxedText is the Item text of boxed(p): without its first and last line.
func boxedText(p string) string {
	lines := strings.Split(boxed(p), "\n")
	return strings.Join(lines[1:len(lines)-1], "\n")
}

// lines joins lines with "\n", adding one at the end.
func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

// want is an expected Item: tooLong says Err is a TooLong *solver.ParseError
// of length n.
type want struct {
	line    int
	text    string
	tooLong int
}

// readAll returns every Item that rd reads and the error that ended the
// reading.
func readAll(t testing.TB, rd *Reader) ([]Item, error) {
	t.Helper()
	var items []Item
	for {
		it, err := rd.Next()
		if err != nil {
			return items, err
		}
		items = append(items, it)
		if len(items) > 1<<20 {
			t.Fatal("reader does not stop")
		}
	}
}

// readAllRaw reads rd to its end with NextRaw, copying each raw text into
// Text, and counts the items that came raw. An item both raw and with a
// Text fails t.
func readAllRaw(t testing.TB, rd *Reader) ([]Item, int, error) {
	t.Helper()
	var items []Item
	n := 0
	for {
		it, raw, err := rd.NextRaw()
		if err != nil {
			return items, n, err
		}
		if raw != nil {
			if it.Text != "" {
				t.Fatalf("line %d: raw %q and Text %q", it.Line, raw, it.Text)
			}
			it.Text = string(raw)
			n++
		}
		items = append(items, it)
		if len(items) > 1<<20 {
			t.Fatal("reader does not stop")
		}
	}
}

// check compares items with ws.
func check(t testing.TB, items []Item, ws []want) {
	t.Helper()
	if len(items) != len(ws) {
		t.Fatalf("got %d items %+v, want %d", len(items), items, len(ws))
	}
	for i, w := range ws {
		it := items[i]
		if it.Line != w.line {
			t.Errorf("item %d: line %d, want %d", i, it.Line, w.line)
		}
		if w.tooLong == 0 {
			if it.Err != nil {
				t.Errorf("item %d: unexpected error %v", i, it.Err)
			}
			if it.Text != w.text {
				t.Errorf("item %d: text %q, want %q", i, it.Text, w.text)
			}
			continue
		}
		var pe *solver.ParseError
		if !errors.As(it.Err, &pe) || pe.Kind != solver.TooLong {
			t.Errorf("item %d: error %v, want a TooLong *solver.ParseError", i, it.Err)
			continue
		}
		if pe.Len != w.tooLong {
			t.Errorf("item %d: length %d, want %d", i, pe.Len, w.tooLong)
		}
		if len(it.Text) > previewLen || !strings.HasPrefix(w.text, it.Text) {
			t.Errorf("item %d: preview %q is not a short prefix of the text", i, it.Text)
		}
	}
}

var (
	long = strings.Repeat("1", MaxLineLen+1)
	huge = strings.Repeat("x", 10<<20)
	// rules are 60 separator lines of the longest a grid's line may be:
	// enough to make a grid too long.
	rules = strings.Repeat(strings.Repeat("-", MaxRowLen)+"\n", 60)
	// shortRow is site(puzzle) with 8 cells on line 11, its last row.
	shortRow = mustReplace(site(puzzle), "6 2 . |", "6 . |")
	// badChar is site(puzzle) with an 'x' for r8c3, on line 10 column 5.
	badChar = mustReplace(site(puzzle), ". 7 . |", ". 7 x |")
)

// mustReplace replaces the first old in s, which must hold it.
func mustReplace(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic(old + " not in " + s)
	}
	return strings.Replace(s, old, new, 1)
}

// nextTests are the cases of TestNext, and the seeds of FuzzReader.
var nextTests = []struct {
	name string
	in   string
	want []want
}{
	// One puzzle per line.
	{"empty input", "", nil},
	{"one line with newline", puzzle + "\n", []want{{line: 1, text: puzzle}}},
	{"no trailing newline", "a\n" + puzzle, []want{{line: 1, text: "a"}, {line: 2, text: puzzle}}},
	{"CRLF line endings", puzzle + "\r\n" + puzzle2 + "\r\n", []want{{line: 1, text: puzzle}, {line: 2, text: puzzle2}}},
	{"surrounding spaces trimmed", "  \ta b \t\r\n", []want{{line: 1, text: "a b"}}},
	{"blank lines and comments skipped but counted",
		"\n# comment\n   \n  # indented comment\r\n\t\nx\n\n#\ny",
		[]want{{line: 6, text: "x"}, {line: 9, text: "y"}}},
	{"NUL bytes kept", "12\x003\n\n\x00\n", []want{{line: 1, text: "12\x003"}, {line: 3, text: "\x00"}}},
	{"byte order mark dropped", "\xef\xbb\xbf" + puzzle + "\n", []want{{line: 1, text: puzzle}}},
	{"line of the maximum length kept", strings.Repeat("1", MaxLineLen) + "\n",
		[]want{{line: 1, text: strings.Repeat("1", MaxLineLen)}}},
	{"line one byte too long rejected", "a\n" + long + "\nb\n",
		[]want{{line: 1, text: "a"}, {line: 2, text: long, tooLong: len(long)}, {line: 3, text: "b"}}},
	{"10 MB line rejected, next line read", "a\n" + huge + "\r\n" + puzzle + "\n",
		[]want{{line: 1, text: "a"}, {line: 2, text: huge, tooLong: len(huge) + 1}, {line: 3, text: puzzle}}},
	{"10 MB line without newline at the end", "a\n" + huge,
		[]want{{line: 1, text: "a"}, {line: 2, text: huge, tooLong: len(huge)}}},
	{"10 MB line after leading spaces", strings.Repeat(" ", 100<<10) + huge + "\nb",
		[]want{{line: 1, text: huge, tooLong: 100<<10 + len(huge)}, {line: 2, text: "b"}}},
	{"10 MB comment skipped", "#" + huge + "\nb\n", []want{{line: 2, text: "b"}}},
	{"10 MB of spaces skipped", strings.Repeat(" ", 10<<20) + "\nb\n", []want{{line: 2, text: "b"}}},
	{"10 MB of spaces then a comment skipped", strings.Repeat(" ", 100<<10) + "#" + huge + "\nb\n",
		[]want{{line: 2, text: "b"}}},
	{"one-line puzzle with spaces and separators",
		strings.ReplaceAll(site(puzzle), "\n", " ") + "\n",
		[]want{{line: 1, text: strings.ReplaceAll(site(puzzle), "\n", " ")}}},

	// Grids.
	{"grid of 9 lines", plain(puzzle) + "\n", []want{{line: 1, text: plain(puzzle)}}},
	{"grid without a newline at the end", plain(puzzle), []want{{line: 1, text: plain(puzzle)}}},
	{"grid with separators", site(puzzle) + "\n", []want{{line: 1, text: site(puzzle)}}},
	{"grid with a border: the item starts at the first row", boxed(puzzle) + "\n",
		[]want{{line: 2, text: boxedText(puzzle)}}},
	{"grid indented, CRLF, after a byte order mark",
		"\xef\xbb\xbf  " + strings.ReplaceAll(site(puzzle), "\n", "  \r\n\t") + "\r\n",
		[]want{{line: 1, text: site(puzzle)}}},
	{"grids separated by blank lines and comments",
		"# two grids\n\n" + plain(puzzle) + "\n\n\n# the next\n" + site(puzzle2) + "\n\n",
		[]want{{line: 3, text: plain(puzzle)}, {line: 15, text: site(puzzle2)}}},
	{"consecutive grids", plain(puzzle) + "\n" + plain(puzzle2) + "\n" + plain(puzzle),
		[]want{{line: 1, text: plain(puzzle)}, {line: 10, text: plain(puzzle2)}, {line: 19, text: plain(puzzle)}}},
	{"consecutive grids with separators", site(puzzle) + "\n" + site(puzzle2) + "\n",
		[]want{{line: 1, text: site(puzzle)}, {line: 12, text: site(puzzle2)}}},
	{"consecutive grids with a rule between them", site(puzzle) + "\n------+-------+------\n" + site(puzzle2) + "\n",
		[]want{{line: 1, text: site(puzzle)}, {line: 13, text: site(puzzle2)}}},
	{"consecutive boxed grids", boxed(puzzle) + "\n" + boxed(puzzle2) + "\n",
		[]want{{line: 2, text: boxedText(puzzle)}, {line: 15, text: boxedText(puzzle2)}}},
	{"grids and one-line puzzles mixed",
		puzzle + "\n" + plain(puzzle2) + "\n" + puzzle2 + "\n# c\n" + site(puzzle) + "\n" + puzzle + "\n",
		[]want{{line: 1, text: puzzle}, {line: 2, text: plain(puzzle2)}, {line: 11, text: puzzle2},
			{line: 13, text: site(puzzle)}, {line: 24, text: puzzle}}},
	{"separator lines alone skipped", "------+-------+------\n" + puzzle + "\n+---+\n| |\n" + puzzle2 + "\n",
		[]want{{line: 2, text: puzzle}, {line: 5, text: puzzle2}}},
	{"rows of 18 characters make a grid", lines("123456789123456789", "1 2 3 | 4 5 6 | 7 8 9 1 2 3 4 5 6 7 8 9"),
		[]want{{line: 1, text: "123456789123456789\n1 2 3 | 4 5 6 | 7 8 9 1 2 3 4 5 6 7 8 9"}}},
	{"lines of 19 characters are one-line puzzles", lines("1234567891234567891", "1234567891234567891"),
		[]want{{line: 1, text: "1234567891234567891"}, {line: 2, text: "1234567891234567891"}}},
	{"a character counts once, however many bytes", strings.Repeat("５３．．７．．．．\n", 9),
		[]want{{line: 1, text: strings.TrimSuffix(strings.Repeat("５３．．７．．．．\n", 9), "\n")}}},
	{"continuation bytes are not a separator", "\x80\x80\n", []want{{line: 1, text: "\x80\x80"}}},

	// Broken grids: one item each, at the first row, with what was there.
	{"grid of 8 rows", lines(rows(puzzle)[:8]...) + "\n" + puzzle2,
		[]want{{line: 1, text: plain(puzzle)[:8*10-1]}, {line: 10, text: puzzle2}}},
	{"grid with a row of 8 cells", shortRow + "\n", []want{{line: 1, text: shortRow}}},
	{"grid with a bad character", badChar + "\n", []want{{line: 1, text: badChar}}},
	{"grid of 10 rows: a grid and a row", plain(puzzle) + "\n123456789\n",
		[]want{{line: 1, text: plain(puzzle)}, {line: 10, text: "123456789"}}},
	{"grid cut short by a one-line puzzle", lines(rows(puzzle)[:4]...) + puzzle2 + "\n" + plain(puzzle),
		[]want{{line: 1, text: plain(puzzle)[:4*10-1]}, {line: 5, text: puzzle2}, {line: 6, text: plain(puzzle)}}},
	{"grid cut short by a comment", lines(rows(puzzle)[:4]...) + "# x\n" + plain(puzzle),
		[]want{{line: 1, text: plain(puzzle)[:4*10-1]}, {line: 6, text: plain(puzzle)}}},
	{"grid cut short by a line too long", lines(rows(puzzle)[:2]...) + long + "\n",
		[]want{{line: 1, text: plain(puzzle)[:2*10-1]}, {line: 3, text: long, tooLong: len(long)}}},
	{"grid cut short by a 10 MB line", lines(rows(puzzle)[:2]...) + huge + "\n",
		[]want{{line: 1, text: plain(puzzle)[:2*10-1]}, {line: 3, text: huge, tooLong: len(huge)}}},
	{"grid cut short by a 10 MB comment", lines(rows(puzzle)[:2]...) + "#" + huge + "\n" + plain(puzzle),
		[]want{{line: 1, text: plain(puzzle)[:2*10-1]}, {line: 4, text: plain(puzzle)}}},
	{"separators after the last row left out", lines(rows(puzzle)[:8]...) + "-----\n+++\n\n",
		[]want{{line: 1, text: plain(puzzle)[:8*10-1]}}},
	{"many separators after the last row left out", lines(rows(puzzle)[:8]...) + rules,
		[]want{{line: 1, text: plain(puzzle)[:8*10-1]}}},
	{"grid too long", lines(rows(puzzle)[0]) + rules + lines(rows(puzzle)[1:]...),
		[]want{{line: 1, text: lines(rows(puzzle)[0]) + rules + plain(puzzle)[10:],
			tooLong: len(plain(puzzle)) + len(rules)}}},
	{"a line of MaxRowLen bytes may be a row", lines("1"+strings.Repeat(" ", MaxRowLen-2)+"2", "3"),
		[]want{{line: 1, text: "1" + strings.Repeat(" ", MaxRowLen-2) + "2\n3"}}},
	{"a longer line is a one-line puzzle", lines("1"+strings.Repeat(" ", MaxRowLen-1)+"2", "3"),
		[]want{{line: 1, text: "1" + strings.Repeat(" ", MaxRowLen-1) + "2"}, {line: 2, text: "3"}}},
	{"short lines make a grid", "a\nb\r\n  c \n\nd\n", []want{{line: 1, text: "a\nb\nc"}, {line: 5, text: "d"}}},
}

func TestNext(t *testing.T) {
	for _, tt := range nextTests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := readAll(t, NewReader(strings.NewReader(tt.in)))
			if err != io.EOF {
				t.Fatalf("ended with %v, want io.EOF", err)
			}
			check(t, items, tt.want)

			// NextRaw reads the same items, as bytes where it can.
			raw, _, err := readAllRaw(t, NewReader(strings.NewReader(tt.in)))
			if err != io.EOF {
				t.Fatalf("NextRaw ended with %v, want io.EOF", err)
			}
			check(t, raw, tt.want)

			// Count agrees with Next, and so do a reader that returns
			// one byte at a time and the model of the format.
			n, err := Count(strings.NewReader(tt.in))
			if err != nil || n != len(tt.want) {
				t.Errorf("Count = %d, %v; want %d, nil", n, err, len(tt.want))
			}
			if len(tt.in) < 1<<20 {
				items, err := readAll(t, NewReader(iotest.OneByteReader(strings.NewReader(tt.in))))
				if err != io.EOF {
					t.Fatalf("one byte at a time: ended with %v, want io.EOF", err)
				}
				check(t, items, tt.want)
			}
			if len(tt.in) < bufSize {
				check(t, model(tt.in, false), tt.want)
			}
		})
	}
}

// TestNextRaw: one-line puzzles come raw, in the Reader's buffer, without
// a copy; a grid comes as Next gives it.
func TestNextRaw(t *testing.T) {
	in := lines(puzzle, "", "  "+puzzle+"\r", "# c", plain(puzzle), puzzle, puzzle)
	items, n, err := readAllRaw(t, NewReader(strings.NewReader(in)))
	if err != io.EOF {
		t.Fatalf("ended with %v", err)
	}
	check(t, items, []want{{line: 1, text: puzzle}, {line: 3, text: puzzle}, {line: 5, text: plain(puzzle)},
		{line: 14, text: puzzle}, {line: 15, text: puzzle}})
	if n != 4 { // all but the grid: it ends at its ninth row
		t.Errorf("%d items raw, want 4", n)
	}
	many := strings.Repeat(puzzle+"\n", 1000)
	rd := NewReader(strings.NewReader(many))
	if a := testing.AllocsPerRun(500, func() {
		if _, raw, err := rd.NextRaw(); err != nil || raw == nil {
			t.Fatalf("NextRaw = %q, %v", raw, err)
		}
	}); a != 0 {
		t.Errorf("NextRaw allocates %v times a puzzle, want 0", a)
	}
}

// TestGridsParse reads the same puzzles in every format and layout and
// checks that each Item parses as the puzzle it came from.
func TestGridsParse(t *testing.T) {
	ps := []string{puzzle, puzzle2, strings.ReplaceAll(puzzle, ".", "0")}
	formats := map[string]func(string) string{
		"one line": func(p string) string { return p },
		"plain":    plain,
		"site":     site,
		"boxed":    boxed,
		"indented": func(p string) string { return "  " + strings.ReplaceAll(site(p), "\n", "\r\n\t ") },
	}
	for name, format := range formats {
		for _, sep := range []string{"\n", "\n\n", "\n# next\n", "\n \n\n"} {
			var b strings.Builder
			for i := range 30 {
				b.WriteString(format(ps[i%len(ps)]))
				b.WriteString(sep)
			}
			items, err := readAll(t, NewReader(strings.NewReader(b.String())))
			if err != io.EOF {
				t.Fatalf("%s, %q: ended with %v", name, sep, err)
			}
			if len(items) != 30 {
				t.Fatalf("%s, %q: %d items, want 30", name, sep, len(items))
			}
			for i, it := range items {
				g, err := solver.Parse(it.Text)
				want, _ := solver.Parse(ps[i%len(ps)])
				if err != nil || g != want || it.Err != nil {
					t.Errorf("%s, %q: item %d, line %d: %q parses as %s, %v, want %s",
						name, sep, i, it.Line, it.Text, g.String(), err, want.String())
				}
			}
		}
	}
}

// TestBrokenGridOneError checks that a broken grid is one puzzle that
// solver.Parse rejects once, naming the line of the grid that is wrong.
func TestBrokenGridOneError(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  string // what solver.Parse says of the item
	}{
		{"8 rows", lines(rows(puzzle)[:8]...), "solver: 72 cells, want 81"},
		{"a row of 8 cells", shortRow, "solver: line 11: 8 cells, want 9 in each of the 9 lines of a grid"},
		{"a bad character", badChar, "solver: line 10 column 5: invalid character 'x' (U+0078) for cell r8c3"},
		{"a repeated digit", strings.Replace(site(puzzle), ". . .", ". . 1", 1),
			"solver: digit 1 repeats in column 3: r1c3 and r5c3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "# a broken grid between two good ones\n" + plain(puzzle2) + "\n\n" + tt.in + "\n\n" + boxed(puzzle2) + "\n"
			items, err := readAll(t, NewReader(strings.NewReader(in)))
			if err != io.EOF || len(items) != 3 {
				t.Fatalf("got %d items, %v; want 3 and io.EOF", len(items), err)
			}
			it := items[1]
			if it.Line != 12 || it.Err != nil {
				t.Errorf("item at line %d, error %v; want line 12 and no error", it.Line, it.Err)
			}
			if _, err := solver.Parse(it.Text); err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("solver.Parse(%q) = %v, want %q...", it.Text, err, tt.err)
			}
			for _, i := range []int{0, 2} {
				if _, err := solver.Parse(items[i].Text); err != nil {
					t.Errorf("item %d, line %d: %v", i, items[i].Line, err)
				}
			}
			if n, err := Count(strings.NewReader(in)); n != 3 || err != nil {
				t.Errorf("Count = %d, %v; want 3", n, err)
			}
		})
	}
}

func TestNewLineReader(t *testing.T) {
	in := "a\nb\n\n# c\n" + plain(puzzle) + "\n" + long + "\n" + puzzle
	var ws []want
	for i, l := range strings.Split(in, "\n") {
		switch {
		case l == "" || l[0] == '#':
		case l == long:
			ws = append(ws, want{line: i + 1, text: l, tooLong: len(l)})
		default:
			ws = append(ws, want{line: i + 1, text: l})
		}
	}
	items, err := readAll(t, NewLineReader(strings.NewReader(in)))
	if err != io.EOF {
		t.Fatalf("ended with %v", err)
	}
	check(t, items, ws)
	check(t, model(in, true), ws)
	if n, err := CountLines(strings.NewReader(in)); n != len(ws) || err != nil {
		t.Errorf("CountLines = %d, %v; want %d", n, err, len(ws))
	}
}

func TestNextReadError(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name string
		in   string
		want []string
		line string
	}{
		{"in a one-line puzzle", puzzle + "\n" + puzzle2 + "\n" + puzzle[:40], []string{puzzle, puzzle2}, "line 3"},
		// The grid cut short is not reported as a broken one.
		{"in a grid", puzzle + "\n" + plain(puzzle2)[:45], []string{puzzle}, "line 6"},
		{"after a grid's last full line", puzzle + "\n" + plain(puzzle2)[:49] + "\n", []string{puzzle}, "line 7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(io.MultiReader(strings.NewReader(tt.in), iotest.ErrReader(boom)))
			for _, want := range tt.want {
				it, err := r.Next()
				if err != nil || it.Text != want {
					t.Fatalf("Next = %+v, %v; want %q", it, err, want)
				}
			}
			for range 2 { // the error is sticky
				_, err := r.Next()
				if !errors.Is(err, boom) {
					t.Fatalf("Next error = %v, want boom", err)
				}
				if !strings.Contains(err.Error(), tt.line) {
					t.Errorf("error %q does not name %s", err, tt.line)
				}
			}
		})
	}
	if _, err := Count(io.MultiReader(strings.NewReader("a\n"), iotest.ErrReader(boom))); !errors.Is(err, boom) {
		t.Errorf("Count error = %v, want boom", err)
	}
}

// xReader yields n bytes of 'x', then rest.
type xReader struct {
	n    int
	rest io.Reader
}

func (x *xReader) Read(p []byte) (int, error) {
	if x.n == 0 {
		return x.rest.Read(p)
	}
	k := min(len(p), x.n)
	for i := range k {
		p[i] = 'x'
	}
	x.n -= k
	return k, nil
}

func TestNextLongLineNotInMemory(t *testing.T) {
	const n = 64 << 20
	in := &xReader{n: n, rest: strings.NewReader("\nb\n")}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	items, err := readAll(t, NewReader(in))
	runtime.ReadMemStats(&after)
	if err != io.EOF {
		t.Fatalf("ended with %v, want io.EOF", err)
	}
	check(t, items, []want{{line: 1, text: strings.Repeat("x", previewLen), tooLong: n}, {line: 2, text: "b"}})
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("reading a %d MB line allocated %d bytes", n>>20, alloc)
	}
}

// TestNextGridNotInMemory reads a grid row followed by 81 MB of separator
// lines: the grid is too long, and its text is not kept.
func TestNextGridNotInMemory(t *testing.T) {
	const n = (MaxRowLen + 1) << 20
	seps := &sepReader{n: n}
	in := io.MultiReader(strings.NewReader("123456789\n"), seps, strings.NewReader("123456789\n\nb\n"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	items, err := readAll(t, NewReader(in))
	runtime.ReadMemStats(&after)
	if err != io.EOF {
		t.Fatalf("ended with %v, want io.EOF", err)
	}
	size := len("123456789\n") + seps.read + len("123456789")
	check(t, items, []want{
		{line: 1, text: "123456789\n" + rules, tooLong: size},
		{line: 4 + seps.lines, text: "b"},
	})
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("reading a %d MB grid allocated %d bytes", n>>20, alloc)
	}
}

// sepReader yields separator lines of MaxRowLen '-' and a newline, n
// bytes in all (n a multiple of MaxRowLen+1); read and lines count what it
// yielded.
type sepReader struct {
	n, read, lines int
}

func (s *sepReader) Read(p []byte) (int, error) {
	k := min(len(p), s.n-s.read)
	if k == 0 {
		return 0, io.EOF
	}
	for i := range k {
		p[i] = '-'
		if (s.read+i)%(MaxRowLen+1) == MaxRowLen {
			p[i] = '\n'
			s.lines++
		}
	}
	s.read += k
	return k, nil
}

// model is the package's format written as simply as can be, for inputs
// with no line of bufSize bytes or more: the oracle of TestNext and
// FuzzReader. With oneLine, every line is a puzzle (NewLineReader).
func model(in string, oneLine bool) []Item {
	var items []Item
	var grid []string // its lines, from its first row
	first, nrows, last := 0, 0, 0
	end := func() {
		if nrows > 0 {
			text := strings.Join(grid[:last+1], "\n")
			it := Item{Line: first, Text: text}
			if len(text) > MaxLineLen {
				it = Item{Line: first, Text: text[:previewLen], Err: &solver.ParseError{Kind: solver.TooLong, Len: len(text)}}
			}
			items = append(items, it)
		}
		grid, nrows = nil, 0
	}
	for i, l := range strings.Split(in, "\n") {
		if i == 0 {
			l = strings.TrimPrefix(l, "\xef\xbb\xbf")
		}
		t := strings.TrimSpace(l)
		chars := 0
		for _, c := range []byte(t) {
			if !strings.ContainsRune(" |-+", rune(c)) && c&0xc0 != 0x80 {
				chars++
			}
		}
		switch {
		case t == "" || t[0] == '#':
			end()
		case len(t) > MaxLineLen:
			end()
			items = append(items, Item{Line: i + 1, Text: t[:previewLen], Err: &solver.ParseError{Kind: solver.TooLong, Len: len(t)}})
		case oneLine || len(t) > MaxRowLen || chars > MaxRowCells:
			end()
			items = append(items, Item{Line: i + 1, Text: t})
		case strings.Trim(t, " |-+") == "": // a separator line
			if nrows > 0 {
				grid = append(grid, t)
			}
		default: // a row
			if nrows == 0 {
				first = i + 1
			}
			grid = append(grid, t)
			nrows++
			last = len(grid) - 1
			if nrows == 9 {
				end()
			}
		}
	}
	end()
	return items
}

// FuzzReader reads any input both ways (whole and one byte at a time),
// counts it, and checks the Items against the model of the format and
// against the input: each one starts on a line that is not skipped, and
// its text is the input's lines from there, trimmed.
//
// The seeds are the inputs of TestNext. Run it with
//
//	go test -fuzz FuzzReader -fuzztime 20s ./internal/input/
func FuzzReader(f *testing.F) {
	for _, tt := range nextTests {
		if len(tt.in) < bufSize {
			f.Add(tt.in, false)
		}
	}
	f.Add(lines("a", "b", "", puzzle), true)
	f.Fuzz(func(t *testing.T, in string, oneLine bool) {
		newReader, count := NewReader, Count
		if oneLine {
			newReader, count = NewLineReader, CountLines
		}
		items, err := readAll(t, newReader(strings.NewReader(in)))
		if err != io.EOF {
			t.Fatalf("ended with %v", err)
		}
		if n, err := count(strings.NewReader(in)); n != len(items) || err != nil {
			t.Fatalf("count = %d, %v; Next read %d items", n, err, len(items))
		}
		slow, err := readAll(t, newReader(iotest.OneByteReader(strings.NewReader(in))))
		if err != io.EOF || !sameItems(slow, items) {
			t.Fatalf("one byte at a time: %+v, %v; want %+v", slow, err, items)
		}
		if raw, _, err := readAllRaw(t, newReader(strings.NewReader(in))); err != io.EOF || !sameItems(raw, items) {
			t.Fatalf("NextRaw: %+v, %v; want %+v", raw, err, items)
		}
		if len(in) < bufSize {
			if m := model(in, oneLine); !sameItems(items, m) {
				t.Fatalf("Next read %+v, the model %+v", items, m)
			}
		}
		inLines := strings.Split(strings.TrimPrefix(in, "\xef\xbb\xbf"), "\n")
		prev := 0
		for _, it := range items {
			if it.Line <= prev || it.Line > len(inLines) {
				t.Fatalf("item at line %d after one at line %d, in %d lines", it.Line, prev, len(inLines))
			}
			prev = it.Line
			var pe *solver.ParseError
			if it.Err != nil {
				if !errors.As(it.Err, &pe) || pe.Kind != solver.TooLong || pe.Len <= MaxLineLen || len(it.Text) > previewLen {
					t.Fatalf("line %d: error %v with text %q", it.Line, it.Err, it.Text)
				}
				continue
			}
			if len(it.Text) > MaxLineLen {
				t.Fatalf("line %d: text of %d bytes", it.Line, len(it.Text))
			}
			if _, err := solver.Parse(it.Text); errors.As(err, &pe) && pe.Kind == solver.TooLong {
				t.Fatalf("line %d: solver.Parse says the text is too long: %v", it.Line, err)
			}
			for k, l := range strings.Split(it.Text, "\n") {
				if want := strings.TrimSpace(inLines[it.Line-1+k]); l != want || l == "" || l[0] == '#' {
					t.Fatalf("line %d: text line %d is %q, input line %q", it.Line, k+1, l, want)
				}
			}
		}
	})
}

// sameItems reports whether a and b hold the same Items, with errors
// compared by their text.
func sameItems(a, b []Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Line != b[i].Line || a[i].Text != b[i].Text || (a[i].Err == nil) != (b[i].Err == nil) ||
			(a[i].Err != nil && a[i].Err.Error() != b[i].Err.Error()) {
			return false
		}
	}
	return true
}

// benchInput is the input of the benchmarks of one-line puzzles: the
// 49,158 puzzles of ../shared/data/17_clue.txt beside the checkout, else
// 50,000 copies of puzzle.
func benchInput(b *testing.B) []byte {
	data, err := os.ReadFile("../../../shared/data/17_clue.txt")
	if err != nil {
		b.Logf("17_clue.txt not found (needs ../shared/data beside the checkout): %v; using copies of one puzzle", err)
		return []byte(strings.Repeat(puzzle+"\n", 50000))
	}
	return data
}

func BenchmarkNext(b *testing.B) {
	benchRead(b, benchInput(b))
}

func BenchmarkNextGrids(b *testing.B) {
	var buf bytes.Buffer
	for range 5000 {
		buf.WriteString(site(puzzle) + "\n\n")
	}
	benchRead(b, buf.Bytes())
}

func benchRead(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(data))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

func BenchmarkCount(b *testing.B) {
	data := benchInput(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Count(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOneLine checks the one-line form of a list's element: a grid read
// as its puzzle, other line breaks as spaces, one line as it is.
func TestOneLine(t *testing.T) {
	row := "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
	var grid strings.Builder
	for i := 0; i < 81; i += 9 {
		grid.WriteString(row[i:i+9] + "\n")
	}
	for _, tc := range []struct{ name, in, want string }{
		{"one line", row, row},
		{"a 9-line grid", grid.String(), row},
		{"a 9-line grid, CRLF", strings.ReplaceAll(grid.String(), "\n", "\r\n"), row},
		{"no puzzle", "1 2\n3\r\n4\r5", "1 2 3 4 5"},
	} {
		if got := OneLine(tc.in); got != tc.want {
			t.Errorf("%s: OneLine(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}
