package producer

import (
	"errors"
	"io"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
)

// source gives a submission its items, as input.Reader.NextRaw does.
type source interface {
	NextRaw() (it input.Item, raw []byte, err error)
}

// lookahead is an input whose first items were read ahead, to learn
// whether the whole input fits in a job's first batch (all).
type lookahead struct {
	in    *input.Reader
	items []input.Item
	next  int
	// all is set when items hold the whole input.
	all bool
}

// lookAhead reads up to n+1 items of in, so that a job whose input holds
// n or fewer is known to be small before anything is published.
func lookAhead(in *input.Reader, n int) (*lookahead, error) {
	la := &lookahead{in: in}
	for len(la.items) <= n {
		it, raw, err := in.NextRaw()
		if errors.Is(err, io.EOF) {
			la.all = true
			break
		}
		if err != nil {
			return nil, err
		}
		if raw != nil {
			it.Text = string(raw)
		}
		la.items = append(la.items, it)
	}
	return la, nil
}

// NextRaw returns the items read ahead, then those of the input.
func (la *lookahead) NextRaw() (input.Item, []byte, error) {
	if la.next < len(la.items) {
		it := la.items[la.next]
		la.items[la.next] = input.Item{}
		la.next++
		return it, nil, nil
	}
	if la.all {
		return input.Item{}, nil, io.EOF
	}
	return la.in.NextRaw()
}
