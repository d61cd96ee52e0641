package input

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSONError is a JSON input that is not an array of strings; Msg says
// where and what.
type JSONError struct{ Msg string }

// Error returns Msg.
func (e *JSONError) Error() string { return "input: " + e.Msg }

// JSONLines reads a JSON array of strings from r with a token stream and
// writes each string to w as one line, so that input.Reader sees the
// text format: element i is line i+1 (OneLine: a 9-line grid in its
// one-line form, other line breaks turned into spaces). An empty element,
// or one starting with '#', is skipped like a blank or comment line.
// Errors from r (such as the size limit) are returned as they are; a body
// of the wrong shape gives a *JSONError that says where. It is how POST /v1/jobs of sudoku
// serve takes a JSON body.
func JSONLines(r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(r)
	fail := func(format string, args ...any) error {
		return &JSONError{Msg: fmt.Sprintf("body at byte %d: ", dec.InputOffset()) + fmt.Sprintf(format, args...)}
	}
	readErr := func(err error) error {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return fail("not JSON: %v", err)
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return fail("the array is not closed")
		}
		return err
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fail("empty body: want a JSON array of strings")
		}
		return readErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fail("want a JSON array of strings, found %v", tok)
	}
	var line []byte
	for n := 1; dec.More(); n++ {
		tok, err := dec.Token()
		if err != nil {
			return readErr(err)
		}
		el, ok := tok.(string)
		if !ok {
			return fail("element %d: want a string (one puzzle), found %v", n, tok)
		}
		line = append(append(line[:0], OneLine(el)...), '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return readErr(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail("unexpected data after the array")
	}
	return nil
}
