// Package cache stores solved puzzles and job records: in Redis for every
// real deployment (a single server, Sentinel or Cluster through go-redis's
// UniversalClient), and in process memory for the one-command start when no
// Redis is around. Both keep the same semantics, checked by one test suite.
//
// # Keys
//
// With the default prefix "sudoku:":
//
//	sudoku:sol:<key>            one result (see Entry encoding below)
//	sudoku:job:{<id>}           hash: the job record (see Job)
//	sudoku:job:{<id>}:batches   bitmap: batch i is done when bit i is set
//	sudoku:job:{<id>}:order     string: the job's lines in input order,
//	                            orderEntrySize bytes each (line number, key)
//	sudoku:jobs                 sorted set: job ids by creation time
//
// The braces are a Redis Cluster hash tag: one job's keys live on one node.
//
// # Result encoding
//
// A result is stored as the text
//
//	v1|<status>|<guesses>|<solution>|<n>|<puzzle>|<error>
//
// where status is one of result.Statuses, guesses a decimal integer,
// solution the 81 digits or empty, puzzle the canonical form (or the input
// text of an invalid puzzle) and n its length in bytes, and error the
// reason (the rest of the value). Puzzle and error may contain '|'.
package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// ErrCorrupt is matched by errors from decoding a stored value that is not
// a result of this version.
var ErrCorrupt = errors.New("cache: corrupt value")

// encodeResult renders r for storage (Line and Key are not stored: the key
// is the Redis key, the line belongs to a job).
func encodeResult(r *result.Result) string {
	var b strings.Builder
	b.Grow(32 + len(r.Status) + len(r.Puzzle) + len(r.Solution) + len(r.Error))
	b.WriteString("v1|")
	b.WriteString(string(r.Status))
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(r.Guesses, 10))
	b.WriteByte('|')
	b.WriteString(r.Solution)
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(len(r.Puzzle)))
	b.WriteByte('|')
	b.WriteString(r.Puzzle)
	b.WriteByte('|')
	b.WriteString(r.Error)
	return b.String()
}

// decodeResult parses a value written by encodeResult; key is set on the
// result.
func decodeResult(key, v string) (result.Result, error) {
	corrupt := func() (result.Result, error) {
		return result.Result{}, fmt.Errorf("%w: key %s: %.40q", ErrCorrupt, key, v)
	}
	parts := strings.SplitN(v, "|", 6)
	if len(parts) != 6 || parts[0] != "v1" {
		return corrupt()
	}
	st := result.Status(parts[1])
	g, err1 := strconv.ParseInt(parts[2], 10, 64)
	n, err2 := strconv.Atoi(parts[4])
	rest := parts[5]
	if !st.Valid() || err1 != nil || err2 != nil || n < 0 || n >= len(rest) || rest[n] != '|' {
		return corrupt()
	}
	return result.Result{Key: key, Status: st, Guesses: g, Solution: parts[3], Puzzle: rest[:n], Error: rest[n+1:]}, nil
}

// InputKey is the key of a result for an input that is not a valid puzzle:
// the hex SHA-256 of the text as given. A valid puzzle's key is
// solver.Grid.Key, the hash of its canonical form; no input text that is a
// canonical form is invalid, so the two never meet.
func InputKey(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}
