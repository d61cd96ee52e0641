package result

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Format is an output format for results.
type Format string

// The output formats.
const (
	// Text writes one line per result: the 81-digit solution for
	// StatusUnique and StatusSolved, otherwise "error: line N: REASON"
	// (followed by ": " and the found solution for StatusMultiple).
	Text Format = "text"
	// JSONL writes one JSON object (a Result) per line.
	JSONL Format = "jsonl"
)

// Formats lists the formats ParseFormat accepts.
var Formats = []Format{Text, JSONL}

// ParseFormat returns the Format named s, or an error that lists the valid
// names.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if s == string(f) {
			return f, nil
		}
	}
	return "", fmt.Errorf("result: unknown format %q (want %q or %q)", s, Text, JSONL)
}

// Writer writes results to an io.Writer in one Format, buffered: call Flush
// when done (and before reporting an interruption). A Writer is not safe
// for concurrent use.
type Writer struct {
	w      *bufio.Writer
	format Format
	enc    *json.Encoder
	line   []byte // reused for text lines
}

// NewWriter returns a Writer of format to w. An unknown format writes text.
func NewWriter(w io.Writer, format Format) *Writer {
	bw := bufio.NewWriterSize(w, 64<<10)
	rw := &Writer{w: bw, format: format}
	if format == JSONL {
		rw.enc = json.NewEncoder(bw)
		rw.enc.SetEscapeHTML(false)
	}
	return rw
}

// Write writes r. Errors come from the underlying writer, possibly only at
// a later Write or at Flush.
func (w *Writer) Write(r Result) error {
	if w.enc != nil {
		if err := w.enc.Encode(r); err != nil {
			return fmt.Errorf("result: writing line %d: %w", r.Line, err)
		}
		return nil
	}
	w.line = AppendText(w.line[:0], &r)
	w.line = append(w.line, '\n')
	if _, err := w.w.Write(w.line); err != nil {
		return fmt.Errorf("result: writing line %d: %w", r.Line, err)
	}
	return nil
}

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("result: flushing output: %w", err)
	}
	return nil
}

// AppendText appends r in the text format, without a newline, to b: the
// solution when r.OK(), otherwise "error: line N: " (without the line when
// r.Line is 0), the reason, and for StatusMultiple ": " and the found solution.
func AppendText(b []byte, r *Result) []byte {
	if r.OK() {
		return append(b, r.Solution...)
	}
	b = append(b, "error: "...)
	if r.Line > 0 {
		b = append(b, "line "...)
		b = strconv.AppendInt(b, int64(r.Line), 10)
		b = append(b, ": "...)
	}
	reason := r.Error
	if reason == "" {
		reason = string(r.Status)
	}
	b = append(b, reason...)
	if r.Status == StatusMultiple && r.Solution != "" {
		b = append(b, ": "...)
		b = append(b, r.Solution...)
	}
	return b
}

// Text returns r in the text format, without a newline.
func (r Result) Text() string { return string(AppendText(nil, &r)) }
