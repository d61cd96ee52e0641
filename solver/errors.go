package solver

import (
	"fmt"
	"strconv"
)

// ErrorKind says what is wrong with a puzzle's input.
type ErrorKind uint8

// The kinds of ParseError.
const (
	// CellCount: the input does not hold exactly 81 cells. ParseError.Cells
	// says how many it does hold (every one is counted: the input is at most
	// MaxInputLen bytes long, or it would be TooLong). When Line is
	// set, the input is a grid of several lines and Cells counts the cells
	// of line Line, which should hold 9.
	CellCount ErrorKind = iota + 1
	// BadChar: a character that is neither a digit, a blank ('.' or '0')
	// nor a separator where one is allowed (ParseError.Char, Line, Col, and
	// Cell, which is -1 when the character comes after the 81st cell).
	BadChar
	// Conflict: a given repeats in a row, column or box (ParseError.Digit,
	// Unit, Cell and Cell2).
	Conflict
	// BadDigit: a Grid cell holds a value above 9 (only for grids built by
	// hand; ParseError.Cell and Digit).
	BadDigit
	// TooLong: the input is longer than MaxInputLen bytes.
	TooLong
)

// MaxInputLen is the longest input Parse looks at. The 9-line grid format
// with separators and generous spacing fits easily; anything longer is
// rejected at once without being scanned.
const MaxInputLen = 4096

// UnitKind names a row, a column or a box.
type UnitKind uint8

// The three kinds of unit.
const (
	Row UnitKind = iota
	Column
	Box
)

// String returns "row", "column" or "box".
func (u UnitKind) String() string {
	switch u {
	case Row:
		return "row"
	case Column:
		return "column"
	case Box:
		return "box"
	}
	return "unit"
}

// ParseError reports an input that is not a valid puzzle: what is wrong
// and where. Line and Col are 1-based positions in the text given to Parse
// (Col counts characters, not bytes); Cell and Cell2 are cell indexes
// 0-80, printed in r1c1 notation.
type ParseError struct {
	Kind  ErrorKind
	Line  int  // line of the bad character (BadChar) or of the bad grid line (CellCount, 0 for the whole input)
	Col   int  // column of the bad character (BadChar)
	Char  rune // the bad character (BadChar; utf8.RuneError for invalid UTF-8)
	Cells int  // cells found (CellCount), at most MaxInputLen
	Cell  int  // the cell (BadChar: the cell it would have filled, or -1 past the last; Conflict: the first of the two)
	Cell2 int  // Conflict: the second cell
	Digit int  // Conflict, BadDigit: the digit
	Unit  UnitKind
	Len   int // TooLong: the input's length in bytes
}

// Error says what is wrong and where, naming lines and columns of the input
// and cells in r1c1 notation, prefixed with "solver: ".
func (e *ParseError) Error() string {
	switch e.Kind {
	case CellCount:
		if e.Line > 0 {
			return fmt.Sprintf("solver: line %d: %s, want 9 in each of the 9 lines of a grid", e.Line, cellCount(e.Cells))
		}
		return fmt.Sprintf("solver: %s, want 81", cellCount(e.Cells))
	case BadChar:
		where := "for cell " + CellName(e.Cell)
		if e.Cell < 0 || e.Cell > 80 {
			where = "after the last cell"
		}
		at := fmt.Sprintf("line %d column %d", e.Line, e.Col)
		if e.Line <= 1 { // one line: callers name the input line themselves
			at = fmt.Sprintf("column %d", e.Col)
		}
		return fmt.Sprintf("solver: %s: invalid character %s %s (want 1-9, or . or 0 for a blank)",
			at, quoteRune(e.Char), where)
	case Conflict:
		return fmt.Sprintf("solver: digit %d repeats in %s %d: %s and %s",
			e.Digit, e.Unit, e.unitNumber(), CellName(e.Cell), CellName(e.Cell2))
	case BadDigit:
		return fmt.Sprintf("solver: cell %s holds %d, want 0-9", CellName(e.Cell), e.Digit)
	case TooLong:
		return fmt.Sprintf("solver: input of %d bytes is too long for a puzzle (at most %d)", e.Len, MaxInputLen)
	}
	return "solver: invalid puzzle"
}

// cellCount says how many cells were found: "1 cell", "82 cells".
func cellCount(n int) string {
	if n == 1 {
		return "1 cell"
	}
	return strconv.Itoa(n) + " cells"
}

// unitNumber is the 1-based number of the unit of a Conflict; boxes are
// numbered 1-9 row by row.
func (e *ParseError) unitNumber() int {
	r, c := e.Cell2/9, e.Cell2%9
	switch e.Unit {
	case Row:
		return r + 1
	case Column:
		return c + 1
	}
	return r/3*3 + c/3 + 1
}

// quoteRune prints a rune readably, with its code point: 'x' (U+0078),
// '\x00' (U+0000), '１' (U+FF11).
func quoteRune(r rune) string {
	return strconv.QuoteRune(r) + fmt.Sprintf(" (U+%04X)", r)
}
