package result

import (
	"slices"
	"strconv"
	"strings"
)

// Summary counts results by status. The zero value is an empty summary,
// ready to use; it is not safe for concurrent use.
type Summary struct {
	counts map[Status]int
	total  int
}

// Add counts r.
func (s *Summary) Add(r Result) {
	if s.counts == nil {
		s.counts = make(map[Status]int, len(Statuses))
	}
	s.counts[r.Status]++
	s.total++
}

// Total returns the number of results counted.
func (s *Summary) Total() int { return s.total }

// Count returns the number of results with status st.
func (s *Summary) Count(st Status) int { return s.counts[st] }

// OK reports whether every result counted is StatusUnique (or StatusSolved,
// which only first-solution mode gives). An empty summary is OK.
func (s *Summary) OK() bool { return s.counts[StatusUnique]+s.counts[StatusSolved] == s.total }

// Counts returns the non-zero counts by status, in the order of Statuses
// (then any unknown status, sorted): "49150 unique, 3 multiple, 5 invalid".
// It returns "nothing" for an empty summary.
func (s *Summary) Counts() string {
	var b strings.Builder
	add := func(st Status, n int) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
		b.WriteByte(' ')
		b.WriteString(string(st))
	}
	for _, st := range Statuses {
		if n := s.counts[st]; n > 0 {
			add(st, n)
		}
	}
	var other []string
	for st := range s.counts {
		if !st.Valid() {
			other = append(other, string(st))
		}
	}
	if len(other) > 0 {
		slices.Sort(other)
		for _, st := range other {
			add(Status(st), s.counts[Status(st)])
		}
	}
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
func Puzzles(n int) string {
	if n == 1 {
		return "1 puzzle"
	}
	return strconv.Itoa(n) + " puzzles"
}
