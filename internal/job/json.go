package job

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// JSONResultsVersion is the version of the JSON form of a results batch.
const JSONResultsVersion = 1

// JSONResults is the JSON form of a results batch, for jobs submitted
// with Options.JSONResults (FlagJSONResults on their work batches): what a
// client in any language reads from the results stream. Such jobs have no
// Repeat items, so every batch stands alone.
type JSONResults struct {
	V      int    `json:"v"`
	Job    string `json:"job"`
	Batch  uint64 `json:"batch"`
	First  uint64 `json:"first"`
	Digest string `json:"digest"` // hex
	// Results are the batch's results, in input order.
	Results []JSONResult `json:"results"`
}

// JSONResult is one result of a JSONResults batch: a result.Result, and
// for a repeated puzzle (never in a JSON job) the item it repeats.
type JSONResult struct {
	result.Result
	// Repeat, when not zero, says the line repeats the puzzle of the item
	// Repeat items back; the other fields are then empty.
	Repeat uint64 `json:"repeat,omitempty"`
}

// IsJSONResults reports whether a results message body is in the JSON
// form (it starts with '{'; the binary form starts with its version).
func IsJSONResults(data []byte) bool { return len(data) > 0 && data[0] == '{' }

// AppendJSONResults appends b (every item answered, b.Digest set) in the
// JSON form to dst.
func (b *Batch) AppendJSONResults(dst []byte) []byte {
	r := JSONResults{V: JSONResultsVersion, Job: b.Job, Batch: b.Index, First: b.First,
		Digest: hex.EncodeToString(b.Digest[:]), Results: make([]JSONResult, len(b.Items))}
	for i := range b.Items {
		it := &b.Items[i]
		if it.Kind == Repeat {
			r.Results[i] = JSONResult{Result: result.Result{Line: it.Line}, Repeat: it.Back}
			continue
		}
		key := ""
		if it.Outcome.Status != result.StatusInvalid {
			key = KeyOf(&it.Outcome.Puzzle).String()
		}
		r.Results[i].Result = it.Outcome.Result(it.Line, key)
	}
	data, err := json.Marshal(&r)
	if err != nil {
		panic(err) // nothing in it can fail to encode
	}
	return append(dst, data...)
}

// DecodeJSONResults decodes the JSON form of a results batch back into a
// Batch, whose digest the reader checks as for the binary form. Every
// error matches ErrDecode.
func DecodeJSONResults(data []byte) (Batch, error) {
	var r JSONResults
	fail := func(format string, args ...any) (Batch, error) {
		return Batch{}, &DecodeError{0, "JSON results: " + fmt.Sprintf(format, args...)}
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fail("%v", err)
	}
	if r.V != JSONResultsVersion {
		return fail("version %d, want %d", r.V, JSONResultsVersion)
	}
	if !ValidID(r.Job) || len(r.Results) == 0 || len(r.Results) > MaxBatch {
		return fail("job %q with %d results", r.Job, len(r.Results))
	}
	b := Batch{Job: r.Job, Index: r.Batch, First: r.First, Items: make([]Item, len(r.Results))}
	if d, err := hex.DecodeString(r.Digest); err != nil || len(d) != DigestLen {
		return fail("digest %q", r.Digest)
	} else {
		copy(b.Digest[:], d)
	}
	for i := range r.Results {
		jr, it := &r.Results[i], &b.Items[i]
		it.Line = jr.Line
		if jr.Repeat != 0 {
			it.Kind, it.Back = Repeat, jr.Repeat
			continue
		}
		o, err := outcomeOf(&jr.Result)
		if err != nil {
			return fail("line %d: %v", jr.Line, err)
		}
		it.Kind, it.Outcome = Known, o
	}
	return b, nil
}

// outcomeOf converts a result of the JSON form to its outcome.
func outcomeOf(r *result.Result) (Outcome, error) {
	if !r.Status.Valid() {
		return Outcome{}, fmt.Errorf("status %q", r.Status)
	}
	o, err := FromResult(r)
	if err != nil {
		return o, err
	}
	// The reasons of multiple and none follow from the status.
	if r.Status == result.StatusMultiple || r.Status == result.StatusNone {
		o.Error = ""
	}
	return o, nil
}

// DecodeAnyResults decodes a results message body in either form.
func DecodeAnyResults(data []byte) (Batch, error) { return DecodeAnyResultsInto(data, nil) }

// DecodeAnyResultsInto is DecodeAnyResults with the items of a binary
// body in items' memory when it has room for them (a reader reuses it).
func DecodeAnyResultsInto(data []byte, items []Item) (Batch, error) {
	if IsJSONResults(data) {
		return DecodeJSONResults(data)
	}
	return decodeBatch(data, ResultsVersion, items)
}
