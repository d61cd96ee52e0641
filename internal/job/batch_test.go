package job

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

const (
	puzzle   = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	solution = "953168742862734951417952836746893125281645397395271468138529674574386219629417583"
	jobID    = "alice.06h2mh1cqjj76oiu2cdedqhn68"
)

func grid(t testing.TB, s string) solver.Grid {
	t.Helper()
	g, err := solver.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// outcomes has one outcome of every status.
func outcomes(t testing.TB) map[string]Outcome {
	p, sol := grid(t, puzzle), grid(t, solution)
	return map[string]Outcome{
		"unique":   {Status: result.StatusUnique, Guesses: 3, Puzzle: p, Solution: sol},
		"cached":   {Status: result.StatusUnique, Cached: true, Puzzle: p, Solution: sol},
		"solved":   {Status: result.StatusSolved, Guesses: 1 << 40, Puzzle: p, Solution: sol},
		"multiple": {Status: result.StatusMultiple, Guesses: 2, Puzzle: solver.Grid{}, Solution: sol},
		"none":     {Status: result.StatusNone, Guesses: 9, Puzzle: p},
		"gave up":  {Status: result.StatusGaveUp, Guesses: 7, Puzzle: p, Error: "solver: gave up after 5 nodes"},
		"invalid":  {Status: result.StatusInvalid, Text: "12x|45\x00", Error: "solver: line 1 column 3: invalid character 'x'"},
		"invalid, longest": {Status: result.StatusInvalid, Text: strings.Repeat("9", solver.MaxInputLen),
			Error: "solver: 4096 cells, want 81"},
	}
}

func TestOutcomeRoundTrip(t *testing.T) {
	for name, o := range outcomes(t) {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeOutcome(EncodeOutcome(&o))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, o) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, o)
			}
		})
	}
}

func TestOutcomeResult(t *testing.T) {
	os := outcomes(t)
	for _, tc := range []struct {
		name string
		want result.Result
	}{
		{"unique", result.Result{Line: 4, Puzzle: puzzle, Key: "k", Status: result.StatusUnique, Solution: solution, Guesses: 3}},
		{"cached", result.Result{Line: 4, Puzzle: puzzle, Key: "k", Status: result.StatusUnique, Solution: solution, Cached: true}},
		{"multiple", result.Result{Line: 4, Puzzle: strings.Repeat(".", 81), Key: "k", Status: result.StatusMultiple,
			Solution: solution, Error: result.MsgMultiple, Guesses: 2}},
		{"none", result.Result{Line: 4, Puzzle: puzzle, Key: "k", Status: result.StatusNone, Error: result.MsgNone, Guesses: 9}},
		{"gave up", result.Result{Line: 4, Puzzle: puzzle, Key: "k", Status: result.StatusGaveUp,
			Error: "solver: gave up after 5 nodes", Guesses: 7}},
		{"invalid", result.Result{Line: 4, Puzzle: "12x|45\x00", Status: result.StatusInvalid,
			Error: "solver: line 1 column 3: invalid character 'x'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := os[tc.name]
			if got := o.Result(4, "k"); got != tc.want {
				t.Errorf("Result:\n got %+v\nwant %+v", got, tc.want)
			}
			brief := tc.want
			if brief.Status != result.StatusInvalid {
				brief.Puzzle, brief.Key = "", ""
			}
			if got := o.Brief(4); got != brief {
				t.Errorf("Brief:\n got %+v\nwant %+v", got, brief)
			}
		})
	}
}

func TestFromSolveMatchesResultFromSolve(t *testing.T) {
	// The compact form says what result.FromSolve says, for every status
	// the solver gives.
	for _, tc := range []struct {
		puzzle string
		opts   solver.Options
	}{
		{puzzle, solver.Options{}},
		{puzzle, solver.Options{FirstSolution: true}},
		{strings.Repeat(".", 81), solver.Options{}},
		{"12345678." + strings.Repeat(".", 63) + "........9", solver.Options{}}, // no solution
		{"4...3.......6..8..........1....5..9..8....6...7.2........1.27..5.3....4.9........", solver.Options{MaxNodes: 1}},
	} {
		g := grid(t, tc.puzzle)
		var sv solver.Solver
		r, err := sv.Solve(t.Context(), &g, tc.opts)
		o := FromSolve(&g, r, err)
		want := result.FromSolve(&g, r, err)
		if got := o.Result(0, g.Key()); got != want {
			t.Errorf("%s %+v:\n got %+v\nwant %+v", tc.puzzle, tc.opts, got, want)
		}
		back, err := DecodeOutcome(EncodeOutcome(&o))
		if err != nil || !reflect.DeepEqual(back, o) {
			t.Errorf("%s: round trip %+v, %v", tc.puzzle, back, err)
		}
	}
}

func TestOutcomeCheck(t *testing.T) {
	os := outcomes(t)
	for name, o := range os {
		if err := o.Check(); err != nil {
			t.Errorf("%s: Check of a good outcome: %v", name, err)
		}
	}
	u := os["unique"]
	for _, tc := range []struct {
		name   string
		break_ func(o *Outcome)
	}{
		{"blank cell", func(o *Outcome) { o.Solution[40] = 0 }},
		{"swapped cells break a row's rule", func(o *Outcome) { o.Solution[0], o.Solution[9] = o.Solution[9], o.Solution[0] }},
		{"against a given", func(o *Outcome) {
			// Swap two digits everywhere: a valid grid, not this puzzle's.
			for i, v := range o.Solution {
				switch v {
				case 1:
					o.Solution[i] = 2
				case 2:
					o.Solution[i] = 1
				}
			}
		}},
	} {
		o := u
		tc.break_(&o)
		if err := o.Check(); err == nil {
			t.Errorf("%s: Check passed a bad solution", tc.name)
		}
	}
}

func TestAnswers(t *testing.T) {
	os := outcomes(t)
	for _, tc := range []struct {
		name         string
		count, first bool
	}{
		{"unique", true, true}, {"multiple", true, true}, {"none", true, true},
		{"solved", false, true}, {"gave up", false, false}, {"invalid", false, false},
	} {
		o := os[tc.name]
		if o.Answers(false) != tc.count || o.Answers(true) != tc.first {
			t.Errorf("%s: Answers(false)=%v Answers(true)=%v, want %v %v", tc.name, o.Answers(false), o.Answers(true), tc.count, tc.first)
		}
	}
}

// batches are work batches that encode and decode back to themselves.
func batches(t testing.TB) map[string]Batch {
	os := outcomes(t)
	p := grid(t, puzzle)
	many := make([]Item, 1000)
	for i := range many {
		many[i] = Item{Line: 3 * (i + 1), Kind: Solve, Grid: p}
	}
	bad := p
	bad[0], bad[1] = 12, 5 // a cell over 9: packed all the same, for Validate to find
	return map[string]Batch{
		"one puzzle":         {Job: jobID, Index: 3, First: 768, Items: []Item{{Line: 1001, Kind: Solve, Grid: p}}},
		"flags":              {Job: "a.j", Flags: FlagNoLookup | FlagFirstSolution, Items: []Item{{Line: 1, Kind: Solve, Grid: p}}},
		"unknown flags kept": {Job: "a.j", Flags: 1 << 40, Items: []Item{{Line: 1, Kind: Solve, Grid: p}}},
		"longest job id":     {Job: strings.Repeat("a", MaxOwner) + "." + strings.Repeat("v", 32), Items: []Item{{Line: 1, Kind: Solve, Grid: p}}},
		"largest numbers": {Job: "a.j", Index: 1<<64 - 1, First: 1<<63 - 1 - RepeatWindow,
			Items: []Item{{Line: 1<<40 - 1, Kind: Solve, Grid: p}, {Line: 1 << 40, Kind: Repeat, Back: RepeatWindow}}},
		"every kind": {Job: "a.j", Index: 1, First: 10, Items: []Item{
			{Line: 12, Kind: Solve, Grid: p},
			{Line: 12, Kind: Known, Outcome: os["cached"]},
			{Line: 13, Kind: Known, Outcome: os["invalid"]},
			{Line: 20, Kind: Repeat, Back: 3},
			{Line: 21, Kind: Repeat, Back: 11},
		}},
		"cell over 9": {Job: "a.j", Items: []Item{{Line: 1, Kind: Solve, Grid: bad}}},
		"many":        {Job: "a.j", Index: 7, Items: many},
	}
}

func TestWorkRoundTrip(t *testing.T) {
	for name, b := range batches(t) {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeWork(b.AppendWork(nil))
			if err != nil {
				t.Fatal(err)
			}
			diffBatch(t, got, b)
			if _, err := DecodeResults(b.AppendWork(nil)); !errors.Is(err, ErrDecode) {
				t.Errorf("a work batch decoded as results: %v", err)
			}
			// The format before, every puzzle packed, still decodes.
			old, err := DecodeWork(b.append(nil, WorkVersionPacked))
			if err != nil {
				t.Fatalf("version %d: %v", WorkVersionPacked, err)
			}
			diffBatch(t, old, b)
		})
	}
}

// TestSparsePuzzles checks the form of a Solve item by its givens: sparse
// (mask and a nibble a given) up to MaxSparseGivens, packed beyond, each
// decoding to the puzzle, and never longer than packed.
func TestSparsePuzzles(t *testing.T) {
	solution := grid(t, "534678912672195348198342567859761423426853791713924856961537284287419635345286179")
	for _, tt := range []struct {
		givens int
		len    int // of the item after its line delta: kind and puzzle
	}{
		{0, 1 + maskLen},
		{1, 1 + maskLen + 1},
		{17, 1 + maskLen + 9},
		{24, 1 + maskLen + 12},
		{MaxSparseGivens, 1 + maskLen + 29},
		{MaxSparseGivens + 1, 1 + PackedLen},
		{81, 1 + PackedLen},
	} {
		var g solver.Grid
		// Givens spread over the grid: every third cell, then the rest.
		var order []int
		for start := range 3 {
			for i := start; i < 81; i += 3 {
				order = append(order, i)
			}
		}
		for _, i := range order[:tt.givens] {
			g[i] = solution[i]
		}
		b := Batch{Job: "a.j", Items: []Item{{Line: 1, Kind: Solve, Grid: g}}}
		data := b.AppendWork(nil)
		head := len((&Batch{Job: "a.j", Items: []Item{{Line: 1, Kind: Repeat}}}).AppendWork(nil)) - 2 // up to the kind
		if got := len(data) - head; got != tt.len {
			t.Errorf("%d givens: an item of %d bytes, want %d", tt.givens, got, tt.len)
		}
		got, err := DecodeWork(data)
		if err != nil {
			t.Fatalf("%d givens: %v", tt.givens, err)
		}
		diffBatch(t, got, b)
	}
}

// answered returns b with every Solve item answered by the solver, and
// its digest set: the results batch a worker publishes.
func answered(t testing.TB, b Batch) Batch {
	t.Helper()
	b.Digest = b.ComputeDigest()
	b.Items = append([]Item(nil), b.Items...)
	var sv solver.Solver
	for i := range b.Items {
		if it := &b.Items[i]; it.Kind == Solve {
			r, err := sv.Solve(t.Context(), &it.Grid, solver.Options{})
			it.Kind, it.Outcome = Known, FromSolve(&it.Grid, r, err)
			it.Grid = solver.Grid{}
		}
	}
	return b
}

func TestResultsRoundTripAndDigest(t *testing.T) {
	for name, b := range batches(t) {
		if name == "cell over 9" {
			continue // its answer is an invalid result: another input
		}
		t.Run(name, func(t *testing.T) {
			r := answered(t, b)
			got, err := DecodeResults(r.AppendResults(nil))
			if err != nil {
				t.Fatal(err)
			}
			diffBatch(t, got, r)
			if d := got.ComputeDigest(); d != b.ComputeDigest() || d != got.Digest {
				t.Errorf("results digest %s, work digest %s, carried %s: want all equal", d, b.ComputeDigest(), got.Digest)
			}
		})
	}
}

// diffBatch reports how got differs from want, briefly.
func diffBatch(t *testing.T, got, want Batch) {
	t.Helper()
	gi, wi := got.Items, want.Items
	got.Items, want.Items = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batch header:\n got %+v\nwant %+v", got, want)
	}
	if len(gi) != len(wi) {
		t.Errorf("%d items, want %d", len(gi), len(wi))
		return
	}
	for i := range gi {
		if !reflect.DeepEqual(gi[i], wi[i]) {
			t.Errorf("item %d:\n got %+v\nwant %+v", i, gi[i], wi[i])
			return
		}
	}
}

func TestResultsHaveNoSolveItems(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("AppendResults of a Solve item did not panic")
		}
	}()
	b := batches(t)["one puzzle"]
	b.AppendResults(nil)
}

func TestDigestCoversEverything(t *testing.T) {
	base := batches(t)["every kind"]
	d := base.ComputeDigest()
	other := grid(t, strings.Replace(puzzle, "1", ".", 1))
	for _, tc := range []struct {
		name   string
		change func(b *Batch)
	}{
		{"job", func(b *Batch) { b.Job = "k" }},
		{"index", func(b *Batch) { b.Index++ }},
		{"first item", func(b *Batch) { b.First++ }},
		{"one item fewer", func(b *Batch) { b.Items = b.Items[:len(b.Items)-1] }},
		{"a line", func(b *Batch) { b.Items[2].Line++ }},
		{"a puzzle", func(b *Batch) { b.Items[0].Grid = other }},
		{"a cached puzzle", func(b *Batch) { b.Items[1].Outcome.Puzzle = other }},
		{"an invalid text", func(b *Batch) { b.Items[2].Outcome.Text += " " }},
		{"a repeat", func(b *Batch) { b.Items[3].Back++ }},
		{"a repeat for a puzzle", func(b *Batch) { b.Items[3] = Item{Line: 20, Kind: Solve, Grid: other} }},
		{"the mode", func(b *Batch) { b.Flags ^= FlagFirstSolution }},
	} {
		b := base
		b.Items = append([]Item(nil), base.Items...)
		tc.change(&b)
		if b.ComputeDigest() == d {
			t.Errorf("%s: the digest did not change", tc.name)
		}
	}
	// What is not the question does not count: the other flags (how the
	// batch travels), and a result's status.
	b := base
	b.Items = append([]Item(nil), base.Items...)
	b.Flags ^= FlagNoLookup | FlagJSONResults
	b.Items[1].Outcome.Status, b.Items[1].Outcome.Guesses = result.StatusMultiple, 99
	if b.ComputeDigest() != d {
		t.Error("the digest depends on the flags besides the mode, or on results")
	}
}

// decodeErrors are bodies Decode must refuse, and where.
func decodeErrors(t testing.TB) []struct {
	name   string
	body   []byte
	offset int
	reason string
} {
	one := batches(t)["one puzzle"]
	good := one.AppendWork(nil)
	head := func(n int) []byte { // version, flags 0, job id "a.j", index 0, first 0, then n
		b := []byte{WorkVersion, 0, 3, 'a', '.', 'j', 0, 0}
		return binary.AppendUvarint(b, uint64(n))
	}
	g := grid(t, puzzle)            // 17 givens
	item := func(b []byte) []byte { // line 1, Solve, the sparse grid (21 bytes)
		return appendPuzzle(append(b, 1), &g, WorkVersion)
	}
	mask := givensMask(&g)
	sparse := func(mask []byte, digits ...byte) []byte { // line 1, a sparse Solve
		return append(append(append(head(1), 1, solveSparse), mask...), digits...)
	}
	var full solver.Grid // every cell given (not a valid puzzle: a decoder leaves that to Validate)
	for i := range full {
		full[i] = 1
	}
	fullMask := givensMask(&full)
	return []struct {
		name   string
		body   []byte
		offset int
		reason string
	}{
		{"empty", nil, 0, "missing format version"},
		{"version 1", append([]byte{1}, good[1:]...), 0, "format version 1, want 3"},
		{"text", []byte("hello world\n"), 0, `the body is text ("hello world\n"), not a binary batch (format version 3) as the producer publishes`},
		{"a puzzle as text", []byte(strings.Repeat("1", 81)), 0, `the body is text ("` + strings.Repeat("1", 40) +
			`..."), not a binary batch (format version 3) as the producer publishes`},
		{"only a version", []byte{WorkVersion}, 1, "bad or missing flags"},
		{"padded flags", []byte{WorkVersion, 0x80, 0x00}, 1, "padded flags"},
		{"padded index", []byte{WorkVersion, 0, 3, 'a', '.', 'j', 0x81, 0x00}, 6, "padded batch index"},
		{"job id too long", append([]byte{WorkVersion, 0, MaxJobID + 1}, strings.Repeat("v", MaxJobID+1)...), 3,
			"job id of 101 bytes, at most 100"},
		{"empty job id", []byte{WorkVersion, 0, 0}, 3, `job id "" is not one NewID makes`},
		{"job id without an owner", []byte{WorkVersion, 0, 1, 'j'}, 4, `job id "j" is not one NewID makes`},
		{"job id with two dots", []byte{WorkVersion, 0, 5, 'a', '.', 'b', '.', 'c'}, 8, `job id "a.b.c" is not one NewID makes`},
		{"job id cut short", []byte{WorkVersion, 0, 5, 'j'}, 3, "job id of 5 bytes runs past the end"},
		{"no items", head(0), 9, "0 items, want 1-100000"},
		{"too many items", head(MaxBatch + 1), 11, "100001 items, want 1-100000"},
		{"more items than bytes", item(head(30)), 9, "30 items cannot fit in the 22 bytes left"},
		{"unknown kind", append(head(1), 1, 9, 0, 0), 11, "item 0 of kind 9"},
		{"grid cut short", append(head(1), 1, byte(Solve), 0x12, 0x34), 11, "puzzle of 41 bytes runs past the end"},
		{"spare nibble set", append(append(head(1), 1, byte(Solve)), bytes.Repeat([]byte{0x11}, PackedLen)...), 11,
			"puzzle: job: packed grid with a spare nibble set"},
		{"repeat of nothing", append(head(1), 1, byte(Repeat), 1), 12, "item 0 repeats the item 1 back"},
		{"packed though sparse is shorter", AppendPacked(append(head(1), 1, byte(Solve)), &g), 11,
			"packed puzzle of 17 givens, which the sparse form carries"},
		{"sparse cut short", sparse(mask[:], 0x12), 22, "puzzle digits of 9 bytes runs past the end"},
		{"sparse mask cut short", sparse(mask[:4]), 11, "puzzle givens mask of 11 bytes runs past the end"},
		{"sparse mask past cell 81", sparse(append(mask[:10:10], 3), bytes.Repeat([]byte{0x11}, 9)...), 11,
			"puzzle: givens mask with bits past cell 81"},
		{"sparse with a given 0", sparse(mask[:], append([]byte{0x10}, bytes.Repeat([]byte{0x11}, 8)...)...), 11,
			"puzzle: given cell 24 is 0"},
		{"sparse spare nibble set", sparse(mask[:], bytes.Repeat([]byte{0x11}, 9)...), 11,
			"puzzle: sparse digits with a spare nibble set"},
		{"sparse though packed is shorter", sparse(fullMask[:], bytes.Repeat([]byte{0x11}, 41)...), 11,
			"puzzle: sparse with 81 givens, which the packed form carries"},
		{"repeat too far", append(append(item(head(2)), 1, byte(Repeat)), binary.AppendUvarint(nil, RepeatWindow+1)...), 36,
			"item 1 repeats the item 65537 back"},
		{"unknown status", append(head(1), 1, byte(Known), 9, 0), 12, "unknown status code 9"},
		{"solution with a blank", append(append(append(head(1), 1, byte(Known), codeUnique, 0), make([]byte, maskLen)...),
			append(bytes.Repeat([]byte{0x12}, 20), make([]byte, PackedLen-20)...)...), 24, "solution with a blank cell 41"},
		{"trailing bytes", append(item(head(1)), 0), 31, "1 byte after the last item"},
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range decodeErrors(t) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeWork(tc.body)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrDecode) {
				t.Fatalf("DecodeWork = %v, want a *DecodeError", err)
			}
			if de.Offset != tc.offset || de.Reason != tc.reason {
				t.Errorf("DecodeWork = at %d %q, want at %d %q", de.Offset, de.Reason, tc.offset, tc.reason)
			}
		})
	}
}

// TestDecodeAllocatesWithinTheBody checks that a body claiming many items
// cannot make Decode allocate much more than the body's size.
func TestDecodeAllocatesWithinTheBody(t *testing.T) {
	b := []byte{WorkVersion, 0, 3, 'a', '.', 'j', 0, 0}
	b = binary.AppendUvarint(b, MaxBatch)
	b = append(b, make([]byte, 3000)...) // room for 1000 items at most
	allocs := testing.Benchmark(func(bm *testing.B) {
		bm.ReportAllocs()
		for range bm.N {
			_, _ = DecodeWork(b)
		}
	})
	if per := allocs.AllocedBytesPerOp(); per > 64*int64(len(b)) {
		t.Errorf("Decode of a %d-byte body allocated %d bytes", len(b), per)
	}
}

func FuzzDecodeWork(f *testing.F) {
	for _, b := range batches(f) {
		f.Add(b.AppendWork(nil))
		f.Add(b.append(nil, WorkVersionPacked))
	}
	for _, tc := range decodeErrors(f) {
		f.Add(tc.body)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeWork(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(data) {
				t.Fatalf("error %v is not a *DecodeError within the body", err)
			}
			return
		}
		// What decodes encodes to the same bytes, in its version: one
		// encoding per batch (no padded numbers, no spare bits, sparse
		// exactly when shorter).
		if again := b.append(nil, data[0]); !bytes.Equal(again, data) {
			t.Fatalf("decoded %+v, which encodes to %x, not %x", b, again, data)
		}
		if !ValidID(b.Job) || len(b.Items) == 0 {
			t.Fatalf("decoded a batch with job %q and %d items", b.Job, len(b.Items))
		}
		for i, it := range b.Items {
			if it.Kind == Repeat && (it.Back == 0 || it.Back > RepeatWindow || it.Back > b.First+uint64(i)) {
				t.Fatalf("item %d repeats %d back", i, it.Back)
			}
		}
	})
}

func FuzzDecodeResults(f *testing.F) {
	for name, b := range batches(f) {
		if name != "cell over 9" {
			r := answered(f, b)
			f.Add(r.AppendResults(nil))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeResults(data)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not match ErrDecode", err)
			}
			return
		}
		if again := b.AppendResults(nil); !bytes.Equal(again, data) {
			t.Fatalf("decoded %+v, which encodes to %x, not %x", b, again, data)
		}
		for _, it := range b.Items {
			if it.Kind == Solve {
				t.Fatal("a results batch decoded with a Solve item")
			}
		}
	})
}

func TestJSONResultsRoundTrip(t *testing.T) {
	for name, b := range batches(t) {
		if name == "cell over 9" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			r := answered(t, b)
			r.Flags = 0 // not carried in the JSON form
			data := r.AppendJSONResults(nil)
			if !IsJSONResults(data) || IsJSONResults(r.AppendResults(nil)) {
				t.Fatal("IsJSONResults cannot tell the forms apart")
			}
			got, err := DecodeAnyResults(data)
			if err != nil {
				t.Fatal(err)
			}
			diffBatch(t, got, r)
			got.Flags = b.Flags & FlagFirstSolution // from the job's options, as a reader does
			if got.ComputeDigest() != b.ComputeDigest() {
				t.Error("the JSON form's digest differs from the work batch's")
			}
		})
	}
	for _, bad := range []string{`{`, `{"v":2}`, `{"v":1,"job":"a.b.c","results":[{}]}`,
		`{"v":1,"job":"j","digest":"00","results":[{"status":"unique"}]}`,
		`{"v":1,"job":"j","digest":"00000000000000000000000000000000","results":[{"status":"nope"}]}`} {
		if _, err := DecodeJSONResults([]byte(bad)); !errors.Is(err, ErrDecode) {
			t.Errorf("DecodeJSONResults(%s) = %v, want ErrDecode", bad, err)
		}
	}
}

// TestSolutionOK checks the unrolled rule check of Check against
// solver's Validate, on solutions of the fixture broken at random: cells
// swapped, set to any value a decoded cell can have (0-15), givens
// changed.
func TestSolutionOK(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := outcomes(t)["unique"]
	good, bad := 0, 0
	for range 20000 {
		o := base
		switch rng.IntN(4) {
		case 0: // intact, relabelled: valid
			perm := rng.Perm(9)
			for i := range o.Solution {
				o.Solution[i] = uint8(perm[o.Solution[i]-1] + 1)
				if o.Puzzle[i] != 0 {
					o.Puzzle[i] = o.Solution[i]
				}
			}
		case 1:
			i, j := rng.IntN(81), rng.IntN(81)
			o.Solution[i], o.Solution[j] = o.Solution[j], o.Solution[i]
		case 2:
			o.Solution[rng.IntN(81)] = uint8(rng.IntN(16))
		case 3:
			o.Puzzle[rng.IntN(81)] = uint8(1 + rng.IntN(9))
		}
		want := !slices.Contains(o.Solution[:], 0) && o.Solution.Validate() == nil
		for i, p := range o.Puzzle {
			want = want && (p == 0 || p == o.Solution[i])
		}
		if got := o.solutionOK(); got != want {
			t.Fatalf("solutionOK = %v, want %v:\npuzzle   %v\nsolution %v", got, want, o.Puzzle, o.Solution)
		}
		if want {
			good++
		} else {
			bad++
		}
	}
	if good < 4000 || bad < 4000 {
		t.Errorf("%d good and %d bad solutions: the test needs more of each", good, bad)
	}
}
