package input

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestRequirePuzzle(t *testing.T) {
	g := strings.Repeat(strings.Repeat("1", 9)+"\n", 9)
	for _, tc := range []struct {
		name, text string
		want       error
		items      []int // the lines of the items Next returns afterwards
	}{
		{"empty", "", ErrEmpty, nil},
		{"blank and comments", "\n \n# c\n\t\n", ErrEmpty, nil},
		{"one line", "\n# c\nabc\n", nil, []int{3}},
		{"a grid then a line", "\n" + g + "xyz\n", nil, []int{2, 11}},
		{"a line too long", strings.Repeat("x", MaxLineLen+5), nil, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.text))
			if err := r.RequirePuzzle(); !errors.Is(err, tc.want) {
				t.Fatalf("RequirePuzzle = %v, want %v", err, tc.want)
			}
			if err := r.RequirePuzzle(); !errors.Is(err, tc.want) {
				t.Fatalf("RequirePuzzle again = %v, want %v", err, tc.want)
			}
			var lines []int
			for {
				it, raw, err := r.NextRaw()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if it.Text == "" && raw == nil {
					t.Errorf("line %d: no text", it.Line)
				}
				lines = append(lines, it.Line)
			}
			if len(lines) != len(tc.items) || (len(lines) > 0 && lines[0] != tc.items[0]) ||
				(len(lines) > 1 && lines[1] != tc.items[1]) {
				t.Errorf("items at lines %v, want %v", lines, tc.items)
			}
		})
	}
}
