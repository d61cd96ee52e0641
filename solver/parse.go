package solver

import (
	"encoding/binary"
	"strings"
	"unicode/utf8"
)

// Parse reads one puzzle from s, in either of two formats:
//
//   - one line of 81 cells, row by row;
//   - a grid of 9 lines of 9 cells each, as Sudoku sites print it, its lines
//     ending in "\n" or "\r\n".
//
// A cell is '1'-'9' for a given, '.' or '0' for a blank. In both formats,
// spaces and the box separators '|', '-' and '+' may stand between cells
// and are ignored, as are spaces and tabs at either end of a line and a
// "\r" before its "\n". Lines that hold no cell, blank or made of
// separators only (such as "------+-------+------"), are skipped.
//
// Only '.' and '0' mean a blank: they are what the data sets, our own
// output and most sites use, and accepting more ('_', '*', 'x'...) later is
// a compatible change where taking one back would not be.
//
// Anything else is a *ParseError (see ErrorKind for the fields each kind
// sets):
//   - TooLong when s is longer than MaxInputLen bytes, decided from its
//     length alone;
//   - BadChar for the first character that is neither a cell nor, where
//     allowed, a separator or surrounding space: a letter, a full-width
//     digit, NUL, a tab or "\r" inside a line, invalid UTF-8 (reported as
//     utf8.RuneError)...;
//   - CellCount when a one-line puzzle does not hold 81 cells, a line of
//     the grid does not hold 9 (Line says which) or the grid does not have
//     9 lines;
//   - Conflict, from Validate, when a given repeats in a row, column or box.
//
// On success the Grid is valid (Validate returns nil); on error it is the
// zero Grid. Parse allocates nothing unless it returns an error.
func Parse(s string) (Grid, error) { return parse(s) }

// ParseBytes is Parse(string(b)), without the copy when b is one line of
// 81 cells: a caller with the text in a buffer saves an allocation per
// puzzle.
func ParseBytes(b []byte) (Grid, error) { return parse(b) }

// parse is Parse and ParseBytes: the fast path on t as it is, the rest on
// a string (the same string for Parse, a copy for ParseBytes).
func parse[T string | []byte](t T) (Grid, error) {
	if len(t) > MaxInputLen {
		return Grid{}, &ParseError{Kind: TooLong, Len: len(t)}
	}
	if g, ok := oneLine(t); ok {
		if err := g.Validate(); err != nil {
			return Grid{}, err
		}
		return g, nil
	}
	return parseText(string(t))
}

// oneLine is the fast path of Parse: t is one line of exactly 81 cell
// characters, perhaps with a line end. ok is false for everything else,
// every error included, which parseText decides: it is exact but slower.
// The grid is not validated.
func oneLine[T string | []byte](t T) (g Grid, ok bool) {
	if len(t) > 81 && t[len(t)-1] == '\n' {
		t = t[:len(t)-1]
	}
	if len(t) > 81 && t[len(t)-1] == '\r' {
		t = t[:len(t)-1]
	}
	if len(t) != 81 {
		return g, false
	}
	var bad uint64
	for w := 0; w < 80; w += 8 {
		x := uint64(t[w]) | uint64(t[w+1])<<8 | uint64(t[w+2])<<16 | uint64(t[w+3])<<24 |
			uint64(t[w+4])<<32 | uint64(t[w+5])<<40 | uint64(t[w+6])<<48 | uint64(t[w+7])<<56
		v, b := cells8(x)
		binary.LittleEndian.PutUint64(g[w:], v)
		bad |= b
	}
	g[80] = cellValue[t[80]]
	return g, bad == 0 && g[80]&notCell == 0
}

// cells8 returns the values of eight cell characters (x, little-endian):
// 0 for '.' and '0', 1-9 for '1'-'9'; bad is not 0 when any byte is
// something else. Eight at a time, without a branch or a load a byte.
func cells8(x uint64) (v, bad uint64) {
	const ones = 0x0101010101010101
	d := x ^ 0x30*ones // '0'-'9' -> 0-9, and only those; '.' -> 0x1e
	// The bytes of d that are 0x1e (the dots): z holds the top bit of
	// each, the zero bytes of d^0x1e.
	z := nonzero(d^0x1e*ones) ^ highBits
	d &^= (z >> 7) * 0xff
	// Every byte must now be at most 9: its low 7 bits plus 0x76 reach the
	// top bit from 10 on (without a carry into the next byte), and a byte
	// of 0x80 or more has it already.
	return d, (((d & low7Bits) + 0x76*ones) | d) & highBits
}

// notCell marks the bytes in cellValue that are not a cell.
const notCell = 0x80

// cellValue maps a byte to the value of the cell it writes: 0 for '.' and
// '0', 1-9 for '1'-'9', notCell for every other byte.
var cellValue = func() (t [256]uint8) {
	for i := range t {
		t[i] = notCell
	}
	t['.'], t['0'] = 0, 0
	for c := '1'; c <= '9'; c++ {
		t[c] = uint8(c - '0')
	}
	return t
}()

// parseText is Parse without the fast path and without the length check.
//
// It reads s line by line, counting the cells of each line, and decides the
// format from the number of lines that hold cells: one means the one-line
// format, more the grid format. Errors come in reading order: the first bad
// character, or the first line of a grid whose count is wrong, as soon as
// it is known to be a grid (at its second line holding cells).
func parseText(s string) (Grid, error) {
	var g Grid
	total := 0     // cells so far, in reading order
	lines := 0     // lines that held at least one cell
	firstN := 0    // cells on the first such line
	firstLine := 0 // its line number
	lineNo := 0
	for rest := s; ; {
		lineNo++
		line, next, more := strings.Cut(rest, "\n")
		rest = next
		// Trim the ends: "\r" only at the right, where it ends a "\r\n".
		start, end := 0, len(line)
		for start < end && (line[start] == ' ' || line[start] == '\t') {
			start++
		}
		for end > start && (line[end-1] == ' ' || line[end-1] == '\t' || line[end-1] == '\r') {
			end--
		}
		n := 0
		for i := start; i < end; i++ {
			c := line[i]
			switch {
			case cellValue[c]&notCell == 0:
				if total < 81 {
					g[total] = cellValue[c]
				}
				total++
				n++
			case c == ' ' || c == '|' || c == '-' || c == '+':
			default:
				r := rune(c)
				if c >= utf8.RuneSelf {
					r, _ = utf8.DecodeRuneInString(line[i:])
				}
				cell := total
				if cell >= 81 {
					cell = -1
				}
				// Every byte before i on the line is ASCII (anything else
				// would have stopped the scan), so the column is i+1.
				return Grid{}, &ParseError{Kind: BadChar, Line: lineNo, Col: i + 1, Char: r, Cell: cell}
			}
		}
		if n > 0 {
			lines++
			switch {
			case lines == 1:
				firstN, firstLine = n, lineNo
			case firstN != 9:
				return Grid{}, &ParseError{Kind: CellCount, Line: firstLine, Cells: firstN}
			case n != 9:
				return Grid{}, &ParseError{Kind: CellCount, Line: lineNo, Cells: n}
			}
		}
		if !more {
			break
		}
	}
	// Past the loop every line with cells held 9, or there was one line.
	if total != 81 {
		return Grid{}, &ParseError{Kind: CellCount, Cells: total}
	}
	if err := g.Validate(); err != nil {
		return Grid{}, err
	}
	return g, nil
}
