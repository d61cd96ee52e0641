package cache

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// ErrJobNotFound is returned for a job id with no record.
var ErrJobNotFound = errors.New("cache: no such job")

// Job is the record of one job. Counters are kept idempotently: a batch
// delivered twice is counted once.
type Job struct {
	ID string
	// Total is the number of input lines holding a puzzle (valid or not,
	// repeated or not): the number of output lines.
	Total int64
	// Queued is the number of distinct puzzles sent to the workers; Done
	// how many of them have a result.
	Queued, Done int64
	// Batches is the number of messages published.
	Batches int64
	// Counts are results by status, counted once per distinct puzzle
	// (including those the producer found cached or invalid).
	Counts map[result.Status]int64
	// Sealed is set once every batch is published: until then, Done ==
	// Queued does not mean the job is finished.
	Sealed   bool
	Created  time.Time
	Finished time.Time // zero until the job finishes
}

// IsFinished reports whether every line of the job has its result.
func (j *Job) IsFinished() bool { return !j.Finished.IsZero() }

// Failed is the number of distinct puzzles without a unique (or, in
// first-solution mode, any) solution.
func (j *Job) Failed() int64 {
	var n int64
	for st, c := range j.Counts {
		if st != result.StatusUnique && st != result.StatusSolved {
			n += c
		}
	}
	return n
}

// OrderEntry is one line of a job, in input order: its line number and the
// key of its result.
type OrderEntry struct {
	Line int
	Key  string // 64 hex digits
}

// orderEntrySize is the stored size of an OrderEntry: a 4-byte big-endian
// line number and the 32 bytes of the key.
const orderEntrySize = 36

func appendOrder(dst []byte, es []OrderEntry) ([]byte, error) {
	for _, e := range es {
		var k [32]byte
		if n, err := hex.Decode(k[:], []byte(e.Key)); err != nil || n != 32 {
			return dst, fmt.Errorf("cache: bad key %q for line %d", e.Key, e.Line)
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Line))
		dst = append(dst, k[:]...)
	}
	return dst, nil
}

func parseOrder(b []byte) []OrderEntry {
	es := make([]OrderEntry, 0, len(b)/orderEntrySize)
	for len(b) >= orderEntrySize {
		es = append(es, OrderEntry{Line: int(binary.BigEndian.Uint32(b)), Key: hex.EncodeToString(b[4:orderEntrySize])})
		b = b[orderEntrySize:]
	}
	return es
}

// JobDelta is what a producer adds to a job as it reads its input: lines
// in order, distinct puzzles queued in batches, and results it already
// knows (cached or invalid puzzles).
type JobDelta struct {
	Lines   []OrderEntry
	Queued  int64
	Batches int64
	Counts  map[result.Status]int64
}

// statusCounts counts results by status.
func statusCounts(rs []result.Result) map[result.Status]int64 {
	m := make(map[result.Status]int64, 2)
	for i := range rs {
		m[rs[i].Status]++
	}
	return m
}

// Store is what both stores offer: results, job records and a health
// check. Consumers define narrower interfaces of their own; this one lets
// wiring code hold either store.
type Store interface {
	Get(ctx context.Context, keys []string) ([]*result.Result, error)
	Put(ctx context.Context, rs []result.Result) error
	CompleteBatch(ctx context.Context, jobID string, index uint64, rs []result.Result) (finished bool, err error)
	CreateJob(ctx context.Context, id string, created time.Time) error
	AddToJob(ctx context.Context, id string, d JobDelta) error
	SealJob(ctx context.Context, id string) (finished bool, err error)
	Job(ctx context.Context, id string) (Job, error)
	Jobs(ctx context.Context, limit int) ([]Job, error)
	Order(ctx context.Context, id string, from, n int64) ([]OrderEntry, error)
	Ping(ctx context.Context) error
	Close() error
}
