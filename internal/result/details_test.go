package result

import (
	"errors"
	"maps"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestParseDetails checks the details of each kind of parse error, and
// that another error has none.
func TestParseDetails(t *testing.T) {
	parse := func(s string) error {
		_, err := solver.Parse(s)
		return err
	}
	for _, tt := range []struct {
		name string
		err  error
		want map[string]any
	}{
		{"bad char", parse("x" + dots(80)),
			map[string]any{"reason": "bad_char", "line": 1, "column": 1, "char": "x", "cell": "r1c1"}},
		{"cell count", parse("123"), map[string]any{"reason": "cell_count", "cells": 3}},
		{"conflict", parse("11" + dots(79)),
			map[string]any{"reason": "conflict", "digit": 1, "unit": "row", "cell": "r1c1", "cell2": "r1c2"}},
		{"too long", &solver.ParseError{Kind: solver.TooLong, Len: 99999},
			map[string]any{"reason": "too_long", "bytes": 99999, "max_bytes": solver.MaxInputLen}},
		{"other", errors.New("not a parse error"), nil},
	} {
		if got := ParseDetails(tt.err); !maps.Equal(got, tt.want) {
			t.Errorf("%s: %v: details %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func dots(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '.'
	}
	return string(b)
}
