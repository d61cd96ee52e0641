package job

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// recordVersion is the version of the record's JSON.
const recordVersion = 1

// State is where a job is in its life.
type State string

// The states of a job, in order. A job moves forward only.
const (
	// Publishing: its producer is reading the input and publishing
	// batches; Batches and the counts grow.
	Publishing State = "publishing"
	// Published: every batch is published; the counts are final.
	Published State = "published"
	// Finished: every batch has its results, and Counts holds the
	// results by status.
	Finished State = "finished"
	// Failed: the submission stopped before every batch was published
	// (Error says why); the job will never finish.
	Failed State = "failed"
	// Cancelled: someone cancelled the job; its work not yet done left the
	// queue, and the results stored before stay readable.
	Cancelled State = "cancelled"
)

// Active reports whether a job in state s may still get work done:
// Publishing or Published.
func (s State) Active() bool { return s == Publishing || s == Published }

// Ended reports whether s is a final state.
func (s State) Ended() bool { return s == Finished || s == Failed || s == Cancelled }

// Options are what a job was asked to do.
type Options struct {
	// FirstSolution: stop at each puzzle's first solution.
	FirstSolution bool `json:"first_solution,omitempty"`
	// Force: solve every puzzle, even those in the cache.
	Force bool `json:"force,omitempty"`
	// BatchSize: the most items a batch holds (the first ones hold
	// fewer: producer.Options.FirstBatch, doubling).
	BatchSize int `json:"batch_size"`
	// JSONResults: results messages in the JSON form (JSONResults), and
	// no Repeat items, so that any client can read them.
	JSONResults bool `json:"json_results,omitempty"`
	// Priority is the job's share of the workers (PriorityNormal when
	// empty).
	Priority Priority `json:"priority,omitempty"`
}

// Tally counts a job's lines by what became of them. Record, and the
// producer's Status and Submitted, embed it: one set of fields, and of
// JSON names, for the three.
type Tally struct {
	// Lines is the number of items: puzzle lines of the input, one
	// result each.
	Lines int64 `json:"lines"`
	// Of the lines, Invalid are not puzzles, Repeated repeat an earlier
	// line's puzzle (see RepeatWindow), Queued went to the workers, and
	// Cached were answered from the cache: while the job is published,
	// those the producer found (it answers them itself); once Finished,
	// every one, those the workers found (among the Queued) too.
	Invalid  int64 `json:"invalid"`
	Cached   int64 `json:"cached"`
	Repeated int64 `json:"repeated"`
	Queued   int64 `json:"queued"`
	// Batches is the number of batches published.
	Batches int64 `json:"batches"`
}

// Record is a job's record, kept in the jobs bucket under the job's id as
// JSON.
type Record struct {
	// V is the record's format version.
	V       int     `json:"v"`
	ID      string  `json:"id"`
	State   State   `json:"state"`
	Options Options `json:"options"`
	// Tally counts the job's lines by what became of them, and its
	// batches (final once Published).
	Tally
	// Counts are the results stored so far by status, one per line:
	// each batch's results are added once, by whoever stores them (a
	// worker, or the producer for a batch the cache answered whole).
	// Lines that repeat a line of another batch are counted as
	// RepeatStatus. They sum to the lines of the batches in Done, and so
	// to Lines once the job is Finished.
	Counts map[result.Status]int64 `json:"counts,omitempty"`
	// Done has bit i set when batch i's results are stored and counted;
	// DoneBatches counts its bits.
	Done        []byte `json:"done,omitempty"`
	DoneBatches int64  `json:"done_batches,omitempty"`
	// Error says why a Failed job failed.
	Error   string    `json:"error,omitempty"`
	Created time.Time `json:"created"`
	// ResultsFrom is a sequence of the results stream at or before the
	// job's first result (the stream's last one, plus one, when the
	// record was created): its readers start there, instead of looking
	// through every older job's results. 0 (a record of an older
	// producer, or one that could not ask) makes them start at Created,
	// less a margin.
	ResultsFrom uint64 `json:"results_from,omitempty"`
	// Heartbeat is when the producer last said it was publishing: at
	// least every HeartbeatEvery while the job is Publishing.
	Heartbeat time.Time `json:"heartbeat,omitzero"`
	// Finished is when the job reached its final state.
	Finished time.Time `json:"finished,omitzero"`
	// Slot is the slot of the job's lane among its owner's lanes of its
	// priority (internal/queue: "s" for a job whose input fits in one
	// batch, "b0", "b1", ... for larger ones; "" is "s").
	Slot string `json:"slot,omitempty"`
	// Manifest, when set, is the job's first manifest chunk (Manifest.Encode),
	// stored in the record instead of a key of its own: a small job's,
	// whose batches were all published at once, costs one write less, and
	// the workers find it in the record they watch.
	Manifest []byte `json:"manifest,omitempty"`
}

// NewRecord returns the record of a new job id with opts, created now:
// its state is Publishing, the only state a job starts in.
func NewRecord(id string, opts Options, now time.Time) Record {
	return Record{ID: id, State: Publishing, Created: now.UTC(), Options: opts}
}

// Owner returns the owner of the job: the first part of its id.
func (r *Record) Owner() string { return OwnerOf(r.ID) }

// HasDone reports whether batch index's results are counted.
func (r *Record) HasDone(index uint64) bool {
	return index/8 < uint64(len(r.Done)) && r.Done[index/8]&(1<<(index%8)) != 0
}

// LinesDone returns the lines whose results are stored: the sum of Counts.
func (r *Record) LinesDone() int64 {
	var n int64
	for _, c := range r.Counts {
		n += c
	}
	return n
}

// AddResults counts the results of batch index, c, unless they are
// counted already (a batch redelivered after its results were stored),
// and finishes the job if they were its last. It reports whether it
// changed r. The results of a cancelled job's batches are counted too:
// they are stored and readable.
func (r *Record) AddResults(index uint64, c Counts, now time.Time) bool {
	if r.HasDone(index) || r.State == Failed {
		return false
	}
	if need := int(index/8) + 1; len(r.Done) < need {
		r.Done = append(r.Done, make([]byte, need-len(r.Done))...)
	}
	r.Done[index/8] |= 1 << (index % 8)
	r.DoneBatches++
	if r.Counts == nil {
		r.Counts = map[result.Status]int64{}
	}
	for st, n := range c {
		if n != 0 {
			r.Counts[st] += n
		}
	}
	r.FinishIfDone(now)
	return true
}

// Recount replaces what r counts of its results by a tally of them, done
// maps each batch with results stored to its counts (the results
// stream's), and finishes the job if they are all there. It reports
// whether that changed r. It repairs a record whose counting write was
// lost: nats-server before 2.9.21 checks a key-value update's expected
// revision outside the cluster's consensus, so that two updates made at
// once in a cluster may both be taken, the second undoing the first.
func (r *Record) Recount(done map[uint64]Counts, now time.Time) bool {
	if r.State == Failed || int64(len(done)) <= r.DoneBatches {
		return false
	}
	r.Done, r.DoneBatches, r.Counts = nil, 0, nil
	for index, c := range done {
		r.AddResults(index, c, now)
	}
	return true
}

// Complete reports whether every batch of a Published job has its results
// stored: the one definition of a job's end of work.
func (r *Record) Complete() bool {
	return (r.State == Published || r.State == Finished) && r.DoneBatches >= r.Batches
}

// Publish moves a Publishing job to Published (every batch is out; the
// counts are final), and on to Finished if its results are all there
// (FinishIfDone). It reports whether it changed the state.
func (r *Record) Publish(now time.Time) bool {
	if r.State != Publishing {
		return false
	}
	r.State = Published
	r.FinishIfDone(now)
	return true
}

// FinishIfDone moves a Published job whose results are all stored to
// Finished, and reports whether it did.
func (r *Record) FinishIfDone(now time.Time) bool {
	if r.State != Published || r.DoneBatches < r.Batches {
		return false
	}
	r.State, r.Finished = Finished, now.UTC()
	return true
}

// Cancel moves an active job to Cancelled, and reports whether it did.
func (r *Record) Cancel(now time.Time) bool {
	if !r.State.Active() {
		return false
	}
	r.State, r.Finished = Cancelled, now.UTC()
	return true
}

// HeartbeatEvery is how often a producer refreshes Record.Heartbeat while
// it publishes; a job Publishing without a heartbeat for StaleAfter has
// lost its producer (killed, or cut off) and will never finish.
const (
	HeartbeatEvery = 5 * time.Second
	StaleAfter     = 6 * HeartbeatEvery
)

// Stale reports whether r is Publishing with a producer that has not been
// heard of for StaleAfter at now.
func (r *Record) Stale(now time.Time) bool {
	last := r.Heartbeat
	if last.IsZero() {
		last = r.Created
	}
	return r.State == Publishing && now.Sub(last) > StaleAfter
}

// Encode returns the stored form of r.
func (r *Record) Encode() []byte {
	r.V = recordVersion
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // no field of Record can fail to encode
	}
	return b
}

// DecodeRecord decodes a stored record.
func DecodeRecord(data []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("job: record: %w", err)
	}
	if r.V != recordVersion {
		return r, fmt.Errorf("job: record of version %d, want %d", r.V, recordVersion)
	}
	if !ValidID(r.ID) {
		return r, fmt.Errorf("job: record with id %q", r.ID)
	}
	return r, nil
}

// Fail moves an active job to Failed at now, saying why, and reports
// whether it did.
func (r *Record) Fail(reason string, now time.Time) bool {
	if !r.State.Active() {
		return false
	}
	r.State, r.Error, r.Finished = Failed, reason, now.UTC()
	return true
}

// FailStale marks a Stale record Failed at now, saying why.
func (r *Record) FailStale(now time.Time) {
	r.State, r.Finished = Failed, now.UTC()
	r.Error = fmt.Sprintf("its producer stopped publishing after %d lines (no heartbeat since %s)",
		r.Lines, r.Heartbeat.Format(time.RFC3339))
}

// Unsolved returns the lines done without a unique (or, in
// first-solution mode, any) solution, repeats of other lines apart: no
// solution, several, invalid, or given up. None of them is a failure of
// the job.
func (r *Record) Unsolved() int64 {
	var n int64
	for st, c := range r.Counts {
		if st != result.StatusUnique && st != result.StatusSolved && st != RepeatStatus {
			n += c
		}
	}
	return n
}

// Counts are results by status, plus the count of repeats that a batch
// could not resolve itself: what the Counts header of a results message
// carries.
type Counts map[result.Status]int64

// RepeatStatus counts Repeat items in a batch's Counts: their status is
// that of an item in another batch.
const RepeatStatus result.Status = "repeat"

// CountItems counts the items of a results batch by status: a Repeat of
// an item of the same batch as that item's status, a Repeat of an item of
// another batch as RepeatStatus (its status is not in the batch).
func CountItems(items []Item) Counts {
	c := Counts{}
	for i := range items {
		it := &items[i]
		if it.Kind != Repeat {
			c[it.Outcome.Status]++
			continue
		}
		if j := i - int(it.Back); it.Back > 0 && j >= 0 && items[j].Kind != Repeat {
			c[items[j].Outcome.Status]++
			continue
		}
		c[RepeatStatus]++
	}
	return c
}

// String returns c as "gave_up=1 unique=250", sorted by status.
func (c Counts) String() string {
	var b strings.Builder
	for _, st := range slices.Sorted(maps.Keys(c)) {
		if c[st] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(st))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(c[st], 10))
	}
	return b.String()
}

// ParseCounts parses what Counts.String returns.
func ParseCounts(s string) (Counts, error) {
	c := Counts{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if st := result.Status(k); !ok || err != nil || n < 0 || (!st.Valid() && st != RepeatStatus) {
			return nil, fmt.Errorf("job: bad counts %q", s)
		}
		c[result.Status(k)] += n
	}
	return c, nil
}
