// Package input reads puzzle files: one puzzle per line, blank lines and
// '#' comments skipped, every line numbered, and lines too long for a
// puzzle rejected without being read into memory.
package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// MaxLineLen is the longest line, after trimming surrounding spaces, that
// Next returns as text: solver.MaxInputLen, the longest input solver.Parse
// accepts.
const MaxLineLen = solver.MaxInputLen

// previewLen is how much of a line too long to keep, so that a report can
// show what the line was.
const previewLen = 128

// bufSize is the read buffer: large enough for fast reads and for any line
// of MaxLineLen with generous surrounding spaces; a line that does not fit
// is too long by far.
const bufSize = 64 << 10

// Item is one puzzle line of the input.
type Item struct {
	// Line is the 1-based line number in the input.
	Line int
	// Text is the line without its line ending ("\n" or "\r\n") and
	// surrounding spaces. For a line too long, it holds only the line's
	// first bytes.
	Text string
	// Err is non-nil when the line cannot be a puzzle as read: a line
	// longer than MaxLineLen gives a *solver.ParseError of kind
	// solver.TooLong (the same error solver.Parse gives for such input).
	// The caller reports the line as invalid and goes on with the next.
	Err error
}

// Reader reads Items from an input. It is not safe for concurrent use.
type Reader struct {
	br   *bufio.Reader
	line int   // lines read so far
	err  error // sticky: io.EOF or a read error
}

// NewReader returns a Reader reading from r. The Reader buffers: it may
// read from r past the last line it returned.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, bufSize)}
}

// Line returns the number of input lines read so far, skipped ones
// included.
func (r *Reader) Line() int { return r.line }

// Next returns the next puzzle line, skipping blank lines and lines whose
// first non-space character is '#'. At the end of the input it returns
// io.EOF; on a read error, that error wrapped with the line number. Both
// are sticky. A line too long is not an error of Next: it is returned as
// an Item with Err set.
func (r *Reader) Next() (Item, error) {
	return r.next(true)
}

// Count returns the number of Items a Reader would return for r (lines
// too long included), without keeping their text: a cheap total for a
// progress bar.
func Count(r io.Reader) (int, error) {
	rd := NewReader(r)
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

// next is Next; with keep false it leaves Item.Text empty, which saves an
// allocation per line.
func (r *Reader) next(keep bool) (Item, error) {
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
				return it, nil
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
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		it := Item{Line: r.line}
		if len(t) > MaxLineLen {
			it.Err = &solver.ParseError{Kind: solver.TooLong, Len: len(t)}
			t = t[:previewLen]
		}
		if keep {
			it.Text = string(t)
		}
		return it, nil
	}
	return Item{}, r.err
}

// long handles a line that does not fit in the buffer; first is its first
// buffer-full. It reads and drops the rest of the line, counting its
// length, and returns the Item to report, or false when the line is a
// comment or blank after all.
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
