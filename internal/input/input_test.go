package input

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

const puzzle = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."

// want is an expected Item: tooLong says Err is a TooLong *solver.ParseError
// of length n.
type want struct {
	line    int
	text    string
	tooLong int
}

// readAll returns every Item of in and the error that ended the reading.
func readAll(t *testing.T, in io.Reader) ([]Item, error) {
	t.Helper()
	r := NewReader(in)
	var items []Item
	for {
		it, err := r.Next()
		if err != nil {
			return items, err
		}
		items = append(items, it)
		if len(items) > 1000 {
			t.Fatal("reader does not stop")
		}
	}
}

// check compares items with ws.
func check(t *testing.T, items []Item, ws []want) {
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
			t.Errorf("item %d: preview %q is not a short prefix of the line", i, it.Text)
		}
	}
}

func TestNext(t *testing.T) {
	long := strings.Repeat("1", MaxLineLen+1)
	huge := strings.Repeat("x", 10<<20)
	tests := []struct {
		name string
		in   string
		want []want
	}{
		{"empty input", "", nil},
		{"one line with newline", puzzle + "\n", []want{{line: 1, text: puzzle}}},
		{"no trailing newline", "a\n" + puzzle, []want{{line: 1, text: "a"}, {line: 2, text: puzzle}}},
		{"CRLF line endings", "a\r\nb\r\n", []want{{line: 1, text: "a"}, {line: 2, text: "b"}}},
		{"surrounding spaces trimmed", "  \ta b \t\r\n", []want{{line: 1, text: "a b"}}},
		{"blank lines and comments skipped but counted",
			"\n# comment\n   \n  # indented comment\r\n\t\nx\n\n#\ny",
			[]want{{line: 6, text: "x"}, {line: 9, text: "y"}}},
		{"NUL bytes kept", "12\x003\n\x00\n", []want{{line: 1, text: "12\x003"}, {line: 2, text: "\x00"}}},
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := readAll(t, strings.NewReader(tt.in))
			if err != io.EOF {
				t.Fatalf("ended with %v, want io.EOF", err)
			}
			check(t, items, tt.want)

			// Count agrees with Next, and so does a reader that returns
			// one byte at a time.
			n, err := Count(strings.NewReader(tt.in))
			if err != nil || n != len(tt.want) {
				t.Errorf("Count = %d, %v; want %d, nil", n, err, len(tt.want))
			}
			if len(tt.in) < 1<<20 {
				items, err := readAll(t, iotest.OneByteReader(strings.NewReader(tt.in)))
				if err != io.EOF {
					t.Fatalf("one byte at a time: ended with %v, want io.EOF", err)
				}
				check(t, items, tt.want)
			}
		})
	}
}

func TestNextReadError(t *testing.T) {
	boom := errors.New("boom")
	in := io.MultiReader(strings.NewReader("a\nb\nc"), iotest.ErrReader(boom))
	r := NewReader(in)
	for _, want := range []string{"a", "b"} {
		it, err := r.Next()
		if err != nil || it.Text != want {
			t.Fatalf("Next = %+v, %v; want %q", it, err, want)
		}
	}
	// The third line is cut short by the error: it is not returned.
	for range 2 { // the error is sticky
		_, err := r.Next()
		if !errors.Is(err, boom) {
			t.Fatalf("Next error = %v, want boom", err)
		}
		if !strings.Contains(err.Error(), "line 3") {
			t.Errorf("error %q does not name line 3", err)
		}
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
	items, err := readAll(t, in)
	runtime.ReadMemStats(&after)
	if err != io.EOF {
		t.Fatalf("ended with %v, want io.EOF", err)
	}
	check(t, items, []want{{line: 1, text: strings.Repeat("x", previewLen), tooLong: n}, {line: 2, text: "b"}})
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("reading a %d MB line allocated %d bytes", n>>20, alloc)
	}
}

func BenchmarkNext(b *testing.B) {
	text := strings.Repeat(puzzle+"\n", 10000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		r := NewReader(strings.NewReader(text))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}
