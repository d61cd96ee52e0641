package result

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Summary counts results by status. The zero value is an empty summary,
// ready to use; it is not safe for concurrent use.
type Summary struct {
	known  [6]int // by the index of the status in Statuses (Status.index)
	other  map[Status]int
	total  int
	cached int
}

// Add counts r. A result of a defined status is counted without a map:
// every result of a job goes through here.
func (s *Summary) Add(r Result) {
	s.total++
	if r.Cached {
		s.cached++
	}
	if i := r.Status.index(); i >= 0 {
		s.known[i]++
		return
	}
	if s.other == nil {
		s.other = map[Status]int{}
	}
	s.other[r.Status]++
}

// Cached returns the number of results counted that came from the cache.
func (s *Summary) Cached() int { return s.cached }

// index returns the index of s in Statuses, or -1 for a status not
// defined.
func (s Status) index() int {
	switch s {
	case StatusUnique:
		return 0
	case StatusSolved:
		return 1
	case StatusMultiple:
		return 2
	case StatusNone:
		return 3
	case StatusInvalid:
		return 4
	case StatusGaveUp:
		return 5
	}
	return -1
}

// Total returns the number of results counted.
func (s *Summary) Total() int { return s.total }

// Count returns the number of results with status st.
func (s *Summary) Count(st Status) int {
	if i := st.index(); i >= 0 {
		return s.known[i]
	}
	return s.other[st]
}

// OK reports whether every result counted is StatusUnique (or StatusSolved,
// which only first-solution mode gives). An empty summary is OK.
func (s *Summary) OK() bool { return s.Count(StatusUnique)+s.Count(StatusSolved) == s.total }

// Each calls fn with each status counted and its count, in the order of
// Statuses, then any unknown status, sorted.
func (s *Summary) Each(fn func(st Status, n int)) {
	for i, st := range Statuses {
		if n := s.known[i]; n > 0 {
			fn(st, n)
		}
	}
	other := slices.Sorted(maps.Keys(s.other))
	for _, st := range other {
		fn(st, s.other[st])
	}
}

// Counts returns the non-zero counts by status, in the order of Statuses
// (then any unknown status, sorted): "49150 unique, 3 multiple, 5 invalid".
// It returns "nothing" for an empty summary.
func (s *Summary) Counts() string {
	var b strings.Builder
	s.Each(func(st Status, n int) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
		b.WriteByte(' ')
		b.WriteString(string(st))
	})
	if b.Len() == 0 {
		return "nothing"
	}
	return b.String()
}

// String returns the total and the counts: "49158 puzzles: 49158 unique".
func (s *Summary) String() string {
	return Puzzles(s.total) + ": " + s.Counts()
}

// Puzzles returns "1 puzzle" or "N puzzles".
func Puzzles(n int) string { return Plural(n, "puzzle", "puzzles") }

// Plural returns n and the noun for it: "1 batch", "2 batches".
func Plural[N int | int64 | uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprint(n) + " " + many
}
