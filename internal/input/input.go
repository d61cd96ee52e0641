// Package input reads puzzle files: one puzzle per line or one per 9-line
// grid, mixed freely, with blank lines and '#' comments skipped, every
// puzzle numbered by the line where it starts, and lines too long for a
// puzzle rejected without being read into memory.
//
// # Format
//
// The two formats are solver.Parse's. Each line is trimmed of surrounding
// spaces, then:
//
//   - A blank line, or one whose first character is '#', is skipped.
//   - A line longer than MaxRowLen (80) bytes, or holding more than
//     MaxRowCells (18) characters other than spaces and the box
//     separators '|', '-' and '+', is a one-line puzzle (81 cells, or an
//     error that says what is wrong with it).
//   - Any other line is a line of a grid: a separator line when it holds
//     only separators (such as "------+-------+------"), else a row (such
//     as "5 3 . | . 7 . | . . ." or "530070000").
//
// Consecutive rows make grids of 9 rows each: a grid ends at its 9th row,
// so 9-line grids may follow each other with no line between them. A grid
// also ends, short, at a blank line, a comment, a one-line puzzle, a line
// too long or the end of the input: such a grid is one puzzle, which
// solver.Parse rejects with a single error. Separator lines between the
// rows of a grid belong to it; the others (a border above the first row
// or below the last, a stray rule between puzzles) are skipped.
//
// Rows of a grid must be consecutive: unlike solver.Parse, which skips
// blank lines inside a grid, a file separates its grids with blank lines.
// Grids that follow each other with no blank line between them each need
// 9 rows, or the rows of the next ones are miscounted: separate grids
// with a blank line to keep a broken one from affecting the others.
package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// MaxLineLen is the longest line, after trimming surrounding spaces, that
// Next returns as text: solver.MaxInputLen, the longest input solver.Parse
// accepts. It is also the longest text of a grid.
const MaxLineLen = solver.MaxInputLen

// MaxRowCells is the most characters, other than spaces and the box
// separators '|', '-' and '+', that a line of a grid may hold: a line
// holding more is a one-line puzzle. A row holds 9 cells; the margin
// keeps a broken row (a cell too many, a bad character between cells) in
// its grid, and a one-line puzzle holds 81.
const MaxRowCells = 18

// MaxRowLen is the longest line, in bytes after trimming surrounding
// spaces, that may be a line of a grid: a longer line is a one-line
// puzzle. A one-line puzzle is 81 bytes at least; a grid's line, 9 to 40
// or so. Thanks to it, telling a one-line puzzle in the usual form from a
// line of a grid costs nothing.
const MaxRowLen = 80

// gridRows is the number of rows in a grid.
const gridRows = 9

// previewLen is how much of a line too long to keep, so that a report can
// show what the line was.
const previewLen = 128

// bufSize is the read buffer: large enough for fast reads and for any line
// of MaxLineLen with generous surrounding spaces; a line that does not fit
// is too long by far.
const bufSize = 64 << 10

// Item is one puzzle of the input: a one-line puzzle or a grid.
type Item struct {
	// Line is the 1-based line number in the input of the puzzle's line,
	// or of the first row of its grid.
	Line int
	// Text is the puzzle's text for solver.Parse. For a one-line puzzle,
	// it is the line without its line ending ("\n" or "\r\n") and
	// surrounding spaces. For a grid, it is the lines from its first row
	// to its last, trimmed so and joined with "\n": line k of Text (as a
	// *solver.ParseError counts them) is input line Line+k-1. For a line
	// or a grid too long, it holds only the first bytes.
	Text string
	// Err is non-nil when the text cannot be a puzzle as read: a line, or
	// a grid, longer than MaxLineLen gives a *solver.ParseError of kind
	// solver.TooLong (the same error solver.Parse gives for such input).
	// The caller reports the item as invalid and goes on with the next.
	Err error
}

// Reader reads Items from an input. It is not safe for concurrent use.
type Reader struct {
	br    *bufio.Reader
	line  int   // lines read so far
	err   error // sticky: io.EOF or a read error
	lines bool  // every line is one puzzle: no grids

	grid grid
	// held is a one-line puzzle that ended a grid: the grid was returned,
	// held is the next Item.
	held   Item
	isHeld bool
	// peeked is the Item RequirePuzzle read ahead: Next returns it first.
	peeked   Item
	isPeeked bool

	// raw, with wantRaw (NextRaw), is the text of a one-line puzzle on
	// the hot path, in br's buffer, instead of a copy in Item.Text.
	raw     []byte
	wantRaw bool
}

// grid is the grid being read. It is empty (the zero grid but for the
// text's buffer) until its first row.
type grid struct {
	first int // line of its first row; 0 for none
	rows  int
	// size is the length of the grid's text up to the end of its last
	// row; total adds the separator lines read after that row.
	size, total int
	// text holds the first bytes of the text, up to MaxLineLen+1 of them
	// (none when the Reader does not keep text).
	text []byte
}

// NewReader returns a Reader reading from r, in either format (see the
// package documentation). The Reader buffers: it may read from r past the
// last puzzle it returned.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, bufSize)}
}

// NewLineReader returns a Reader that takes every line of r, blank lines
// and comments apart, as one puzzle, and reads no grids: for input that a
// program wrote one puzzle per line, where line N must give the Item of
// line N even when it is a short bad line next to another.
func NewLineReader(r io.Reader) *Reader {
	rd := NewReader(r)
	rd.lines = true
	return rd
}

// Line returns the number of input lines read so far, skipped ones
// included.
func (r *Reader) Line() int { return r.line }

// Next returns the next puzzle, skipping blank lines and lines whose
// first non-space character is '#'. At the end of the input it returns
// io.EOF; on a read error, that error wrapped with the line number. Both
// are sticky; a grid cut short by a read error is not returned. A line or
// grid too long is not an error of Next: it is returned as an Item with
// Err set.
func (r *Reader) Next() (Item, error) {
	return r.next(true)
}

// NextRaw is Next, except for the common item, a one-line puzzle that no
// grid ends: its Text is left empty, and raw is the text instead, in the
// Reader's buffer, valid only until the next call. For every other item
// raw is nil and Text is what Next sets. A caller that parses the text at
// once (solver.ParseBytes), and copies it only when it is kept, saves an
// allocation per puzzle.
func (r *Reader) NextRaw() (it Item, raw []byte, err error) {
	r.wantRaw, r.raw = true, nil
	it, err = r.next(true)
	raw, r.wantRaw, r.raw = r.raw, false, nil
	return it, raw, err
}

// ErrEmpty is matched by the error of RequirePuzzle for an input without
// a puzzle.
var ErrEmpty = errors.New("no puzzle in the input: it is empty, or holds only blank lines and # comments")

// RequirePuzzle reads ahead to the next puzzle, which Next then returns.
// It returns ErrEmpty when the input holds no more (at the start: none at
// all), or the read error. Every way in (solve, submit, POST /v1/jobs,
// the micro service's submit) calls it before it solves anything or
// creates a job, so that an empty input is refused the same way
// everywhere: a job of no puzzle is always a mistake (a wrong file, a
// pipe that gave nothing), and a success would hide it.
func (r *Reader) RequirePuzzle() error {
	if r.isPeeked {
		return nil
	}
	it, err := r.next(true)
	switch {
	case errors.Is(err, io.EOF):
		return ErrEmpty
	case err != nil:
		return err
	}
	r.peeked, r.isPeeked = it, true
	return nil
}

// Count returns the number of Items a Reader from NewReader would return
// for r (lines too long included), without keeping their text: a cheap
// total for a progress bar.
func Count(r io.Reader) (int, error) {
	return count(NewReader(r))
}

// CountLines is Count for a Reader from NewLineReader.
func CountLines(r io.Reader) (int, error) {
	return count(NewLineReader(r))
}

func count(rd *Reader) (int, error) {
	n := 0
	for {
		_, err := rd.next(false)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// The kinds of line that are not skipped.
const (
	kindPuzzle = iota // a one-line puzzle
	kindRow           // a row of a grid
	kindSep           // a separator line
)

// cellLike is 1 for the bytes that count towards MaxRowCells: all but
// spaces, separators and UTF-8 continuation bytes (so that a character
// counts once).
var cellLike = func() (t [256]uint8) {
	for i := range t {
		if i < 0x80 || i >= 0xc0 {
			t[i] = 1
		}
	}
	t[' '], t['|'], t['-'], t['+'] = 0, 0, 0, 0
	return t
}()

// kind classifies a trimmed line that is not blank, a comment, too long
// or longer than MaxRowLen. It looks at no more than MaxRowCells+1
// characters of a one-line puzzle.
func kind(t []byte) int {
	n := 0
	for _, c := range t {
		n += int(cellLike[c])
		if n > MaxRowCells {
			return kindPuzzle
		}
	}
	if n > 0 {
		return kindRow
	}
	for _, c := range t {
		if c != ' ' && c != '|' && c != '-' && c != '+' {
			return kindRow // UTF-8 continuation bytes alone: not a separator
		}
	}
	return kindSep
}

// next is Next; with keep false it leaves Item.Text empty, which saves an
// allocation per puzzle.
func (r *Reader) next(keep bool) (Item, error) {
	if r.isPeeked {
		it := r.peeked
		r.peeked, r.isPeeked = Item{}, false
		return it, nil
	}
	if r.isHeld {
		it := r.held
		r.held, r.isHeld = Item{}, false
		return it, nil
	}
	for r.err == nil {
		b, err := r.br.ReadSlice('\n')
		if len(b) == 0 && err != nil {
			r.setErr(err, r.line+1)
			break
		}
		r.line++
		if err == bufio.ErrBufferFull {
			it, ok := r.long(b, keep)
			if ok {
				return r.puzzle(it, keep), nil
			}
			if r.err != nil {
				break
			}
			// A blank line or a comment.
			if r.grid.rows > 0 {
				return r.endGrid(keep), nil
			}
			continue
		}
		if err != nil && err != io.EOF {
			// The line was cut short by the error: do not guess at it.
			r.setErr(err, r.line)
			break
		}
		// io.EOF with data is a last line without a newline; the next call
		// gets io.EOF again from the bufio.Reader.
		t := bytes.TrimSpace(r.trimBOM(b))
		if len(t) > MaxRowLen && t[0] != '#' && len(t) <= MaxLineLen && r.grid.rows == 0 {
			// The hot path: a one-line puzzle, and no grid that it ends.
			it := Item{Line: r.line}
			switch {
			case r.wantRaw:
				r.raw = t
			case keep:
				it.Text = string(t)
			}
			return it, nil
		}
		if len(t) == 0 || t[0] == '#' {
			if r.grid.rows > 0 {
				return r.endGrid(keep), nil
			}
			continue
		}
		if len(t) > MaxLineLen {
			it := Item{Line: r.line, Err: &solver.ParseError{Kind: solver.TooLong, Len: len(t)}}
			if keep {
				it.Text = string(t[:previewLen])
			}
			return r.puzzle(it, keep), nil
		}
		k := kindPuzzle
		if len(t) <= MaxRowLen && !r.lines {
			k = kind(t)
		}
		switch k {
		case kindPuzzle:
			it := Item{Line: r.line}
			if keep {
				it.Text = string(t)
			}
			return r.puzzle(it, keep), nil
		case kindSep:
			// Part of the grid if a row follows; else dropped at its end.
			// Before the first row, there is no grid to add it to.
			if r.grid.rows > 0 {
				r.grid.add(t, keep)
			}
		case kindRow:
			if r.grid.rows == 0 {
				r.grid.first = r.line
			}
			r.grid.add(t, keep)
			r.grid.rows++
			r.grid.size = r.grid.total
			if r.grid.rows == gridRows {
				return r.endGrid(keep), nil
			}
		}
	}
	if r.err == io.EOF && r.grid.rows > 0 {
		return r.endGrid(keep), nil
	}
	r.grid.reset()
	return Item{}, r.err
}

// puzzle returns it, a one-line puzzle, or the grid it ends, holding it
// for the next call.
func (r *Reader) puzzle(it Item, keep bool) Item {
	if r.grid.rows == 0 {
		return it
	}
	r.held, r.isHeld = it, true
	return r.endGrid(keep)
}

// endGrid returns the grid read so far as an Item and starts afresh.
func (r *Reader) endGrid(keep bool) Item {
	g := &r.grid
	it := Item{Line: g.first}
	switch {
	case g.size > MaxLineLen:
		it.Err = &solver.ParseError{Kind: solver.TooLong, Len: g.size}
		if keep {
			it.Text = string(g.text[:min(len(g.text), previewLen)])
		}
	case keep:
		it.Text = string(g.text[:g.size])
	}
	g.reset()
	return it
}

// add appends a line to the grid's text, after a "\n" unless it is the
// first. It keeps no more than MaxLineLen+1 bytes of text: enough to tell
// a text too long, and to show one that is not.
func (g *grid) add(t []byte, keep bool) {
	if g.total > 0 {
		g.total++
		if keep && len(g.text) <= MaxLineLen {
			g.text = append(g.text, '\n')
		}
	}
	g.total += len(t)
	if keep && len(g.text) <= MaxLineLen {
		g.text = append(g.text, t[:min(len(t), MaxLineLen+1-len(g.text))]...)
	}
}

// reset forgets the grid, keeping the text's buffer.
func (g *grid) reset() {
	*g = grid{text: g.text[:0]}
}

// long handles a line that does not fit in the buffer; first is its first
// buffer-full. It reads and drops the rest of the line, counting its
// length, and returns the Item to report, or false when the line is a
// comment or blank after all, or on a read error (set in r.err).
func (r *Reader) long(first []byte, keep bool) (Item, bool) {
	first = r.trimBOM(first)
	n := len(first)
	t := bytes.TrimLeft(first, " \t\r\v\f")
	comment := len(t) > 0 && t[0] == '#'
	var preview string
	if keep && len(t) > 0 {
		preview = string(t[:min(len(t), previewLen)])
	}
	blank := len(t) == 0
	var err error = bufio.ErrBufferFull
	for err == bufio.ErrBufferFull {
		var b []byte
		b, err = r.br.ReadSlice('\n')
		n += len(b)
		if blank {
			if t := bytes.TrimLeft(b, " \t\r\v\f\n"); len(t) > 0 {
				blank = false
				comment = t[0] == '#'
				if keep {
					preview = string(t[:min(len(t), previewLen)])
				}
			}
		}
		if err == nil {
			n-- // the newline
		}
	}
	if err != nil && err != io.EOF {
		r.setErr(err, r.line)
		return Item{}, false
	}
	if comment || blank {
		return Item{}, false
	}
	return Item{
		Line: r.line,
		Text: preview,
		Err:  &solver.ParseError{Kind: solver.TooLong, Len: n},
	}, true
}

// trimBOM drops a UTF-8 byte order mark at the start of the first line.
func (r *Reader) trimBOM(b []byte) []byte {
	if r.line == 1 {
		return bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	}
	return b
}

// setErr records the sticky error: io.EOF as is, anything else wrapped
// with the line it stopped.
func (r *Reader) setErr(err error, line int) {
	if err == io.EOF {
		r.err = io.EOF
		return
	}
	r.err = fmt.Errorf("input: reading line %d: %w", line, err)
}

// OneLine returns a puzzle given as one element of a list (a JSON array's
// string) as one line, so that element i stays line i+1 of a
// NewLineReader: a 9-line grid in its one-line form; the line breaks of
// anything else turned into spaces (its error then describes it as one
// line).
func OneLine(p string) string {
	if !strings.ContainsAny(p, "\r\n") {
		return p
	}
	if g, err := solver.Parse(p); err == nil {
		return g.String()
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(p)
}
