package job

import (
	"fmt"
	"strings"
)

// Priority is a job's claim on the workers: each worker takes its next
// batch from the job with work that has had the least of its share, a
// job's share being proportional to its priority's Weight. No level is
// starved: a low job gets one batch for every Weight(high) batches of a
// high job.
type Priority string

// The priorities.
const (
	PriorityLow    Priority = "low"
	PriorityNormal Priority = "normal"
	PriorityHigh   Priority = "high"
)

// Priorities lists the priorities, lowest first.
var Priorities = []Priority{PriorityLow, PriorityNormal, PriorityHigh}

// Weight returns p's share of the workers against other jobs': 1 for
// low, 2 for normal (and unset), 4 for high.
func (p Priority) Weight() int {
	switch p {
	case PriorityLow:
		return 1
	case PriorityHigh:
		return 4
	}
	return 2
}

// Or returns p, or PriorityNormal when p is empty.
func (p Priority) Or() Priority {
	if p == "" {
		return PriorityNormal
	}
	return p
}

// ParsePriority parses a priority's name ("" is normal).
func ParsePriority(s string) (Priority, error) {
	switch p := Priority(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return PriorityNormal, nil
	case PriorityLow, PriorityNormal, PriorityHigh:
		return p, nil
	}
	return "", fmt.Errorf("priority %q: want low, normal or high", s)
}
