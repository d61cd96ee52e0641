package input

import (
	"strings"
	"testing"
)

// puzzle1 is a 17-clue puzzle; grid1 the same as a 9-line grid with box
// separators.
const (
	puzzle1 = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	grid1   = `. . . | . . . | . . .
. . . | . . . | . . 1
. . . | . . 2 | . 3 .
------+-------+------
. . . | . . 3 | . 2 .
. . 1 | . 4 . | . . .
. . 5 | . . . | . 6 .
------+-------+------
. 3 . | . . . | . . 4
. 7 . | . 8 . | . . 9
6 2 . | . . 7 | . . .
`
)

// TestJSONLines checks that each element of a JSON array becomes one line
// and that a body of another shape is refused, saying where.
func TestJSONLines(t *testing.T) {
	for _, tt := range []struct {
		in, out, err string
	}{
		{`[]`, "", ""},
		{` [ "a" , "b" ] `, "a\nb\n", ""},
		{`["` + strings.ReplaceAll(grid1, "\n", `\n`) + `"]`, puzzle1 + "\n", ""},
		{`["x\ny"]`, "x y\n", ""},
		{`["a", null]`, "a\n", "element 2: want a string"},
		{`["a", ["b"]]`, "a\n", "element 2: want a string"},
		{`"a"`, "", "want a JSON array"},
		{``, "", "empty body"},
		{`["a"`, "a\n", "not closed"},
		{`["a"] x`, "a\n", "after the array"},
		{`[1`, "", "element 1"},
	} {
		var sb strings.Builder
		err := JSONLines(strings.NewReader(tt.in), &sb)
		if sb.String() != tt.out {
			t.Errorf("%s: wrote %q, want %q", tt.in, sb.String(), tt.out)
		}
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one with %q", tt.in, err, tt.err)
		}
	}
}
