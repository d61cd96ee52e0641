package producer

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// verifyJob is the job id of the verifier's fixtures; verifyOther is
// another job's.
const verifyJob, verifyOther = "alice.v0job1", "alice.v0job2"

// verifyFixture is a job of two batches as its producer published them
// (the work batches, and the manifest's digests, in both modes), and the
// results a worker answers them with.
type verifyFixture struct {
	work    [2]*job.Batch            // batches 0 and 1, as published
	digests [2]map[uint64]job.Digest // the manifest, by mode (0: count to two, 1: first solution)
	spare   solver.Grid              // a unique puzzle the job does not have
}

// The items of batch 1 (item 6 on, line 7 on), by position.
const (
	itemUnique   = 0 // a puzzle with one solution
	itemMultiple = 1 // a puzzle with two or more (solved in first-solution mode)
	itemNone     = 2 // a puzzle without a solution
	itemInvalid  = 3 // a line that is no puzzle
	itemRepeat   = 4 // the puzzle of itemUnique again
	itemUnique2  = 5 // another puzzle with one solution
)

func newVerifyFixture(t testing.TB) *verifyFixture {
	t.Helper()
	ps := testenv.Puzzles(t, "testdata/17_clue_100.txt", 9)
	grids := make([]solver.Grid, len(ps))
	for i, p := range ps {
		g, err := solver.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		grids[i] = g
	}
	multi := grids[0]
	for i, n := 0, 0; n < 2; i++ { // two givens fewer: more than one solution
		if multi[i] != 0 {
			multi[i], n = 0, n+1
		}
	}
	if o := solveOutcome(&multi, false); o.Status != result.StatusMultiple {
		t.Fatalf("fixture: %s, want multiple", o.Status)
	}
	none := noSolutionGrid(t, &grids[1])
	fx := &verifyFixture{spare: grids[8]}
	fx.work[0] = &job.Batch{Job: verifyJob, Index: 0, First: 0}
	for i := range 6 {
		fx.work[0].Items = append(fx.work[0].Items, job.Item{Line: i + 1, Kind: job.Solve, Grid: grids[2+i]})
	}
	fx.work[1] = &job.Batch{Job: verifyJob, Index: 1, First: 6, Items: []job.Item{
		itemUnique:   {Line: 7, Kind: job.Solve, Grid: grids[0]},
		itemMultiple: {Line: 8, Kind: job.Solve, Grid: multi},
		itemNone:     {Line: 9, Kind: job.Solve, Grid: none},
		itemInvalid: {Line: 11, Kind: job.Known, Outcome: job.Outcome{Status: result.StatusInvalid, Text: "not a puzzle",
			Error: "not 81 cells"}},
		itemRepeat:  {Line: 12, Kind: job.Repeat, Back: 4},
		itemUnique2: {Line: 13, Kind: job.Solve, Grid: grids[1]},
	}}
	for mode, flags := range []uint64{0, job.FlagFirstSolution} {
		fx.digests[mode] = map[uint64]job.Digest{}
		for _, w := range fx.work {
			c := *w
			c.Flags = flags | job.FlagNoLookup
			fx.digests[mode][w.Index] = c.ComputeDigest()
		}
	}
	return fx
}

// solveOutcome solves g as a worker does.
func solveOutcome(g *solver.Grid, first bool) job.Outcome {
	r, err := solver.Solve(context.Background(), g, solver.Options{FirstSolution: first})
	return job.FromSolve(g, r, err)
}

// noSolutionGrid returns u with one blank filled so that no solution is
// left.
func noSolutionGrid(t testing.TB, u *solver.Grid) solver.Grid {
	t.Helper()
	sol := solveOutcome(u, false).Solution
	for i, v := range u {
		if v != 0 {
			continue
		}
		for d := uint8(1); d <= 9; d++ {
			g := *u
			if g[i] = d; d == sol[i] || g.Validate() != nil {
				continue
			}
			if solveOutcome(&g, false).Status == result.StatusNone {
				return g
			}
		}
	}
	t.Fatal("fixture: no puzzle without a solution found")
	return solver.Grid{}
}

// answer returns the results batch a worker publishes for batch index in
// the given mode.
func (fx *verifyFixture) answer(index uint64, first bool) *job.Batch {
	w := fx.work[index]
	b := &job.Batch{Job: w.Job, Index: w.Index, First: w.First, Items: slices.Clone(w.Items),
		Digest: fx.digest(index, first)}
	if first {
		b.Flags = job.FlagFirstSolution
	}
	for i := range b.Items {
		if it := &b.Items[i]; it.Kind == job.Solve {
			it.Kind, it.Outcome, it.Grid = job.Known, solveOutcome(&it.Grid, first), solver.Grid{}
		}
	}
	return b
}

func (fx *verifyFixture) digest(index uint64, first bool) job.Digest {
	return fx.digests[modeOf(first)][index]
}

func modeOf(first bool) int {
	if first {
		return 1
	}
	return 0
}

// verifier returns a verifier of the fixture's job in the given mode,
// with its manifest and a final count of batches.
func (fx *verifyFixture) verifier(first bool, batches uint64, final bool, manifest map[uint64]job.Digest) *verifier {
	return &verifier{job: verifyJob, first: first,
		batches: func() (uint64, bool) { return batches, final },
		digest: func(ctx context.Context, index uint64) (job.Digest, bool, error) {
			if err := ctx.Err(); err != nil {
				return job.Digest{}, false, err
			}
			d, ok := manifest[index]
			return d, ok, nil
		}}
}

// verifyCase is one results message for the fixture's job and what the
// verifier must make of it.
type verifyCase struct {
	name  string
	first bool   // the job's mode
	json  bool   // the body in the JSON form
	index uint64 // the subject's batch index; the answer is of batch 1 unless edit changes it
	// batches and final are the job's count of batches (default 2, final).
	batches  uint64
	notFinal bool
	// edit changes the answer, and may change the manifest, before the
	// body is encoded.
	edit func(fx *verifyFixture, b *job.Batch, manifest map[uint64]job.Digest)
	body []byte // a body of its own instead of the answer
	// check is the check that must refuse it ("" to accept it); line the
	// input line a checkAnswer refusal names.
	check string
	line  int
}

// verifyCases are the verifier's cases: the right answers in every form
// and mode, then at least one forgery each check alone refuses.
func verifyCases() []verifyCase {
	return []verifyCase{
		// Accepted.
		{name: "right answers", index: 1},
		{name: "right answers, JSON", index: 1, json: true},
		{name: "right answers, first solution", index: 1, first: true},
		{name: "right answers, first solution, JSON", index: 1, first: true, json: true},
		{name: "right answers, batch 0", index: 0, edit: func(fx *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
			*b = *fx.answer(0, false)
		}},
		{name: "a batch past the count so far, while the job publishes", index: 1, batches: 1, notFinal: true},
		// The mode comes from the job, not the message: a worker's other
		// flags (or none) do not make the right answers wrong.
		{name: "first-solution job, results without the mode's flag", index: 1, first: true,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) { b.Flags = 0 }},
		{name: "count-to-two job, results with the first-solution and other flags", index: 1,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				b.Flags = job.FlagFirstSolution | job.FlagNoLookup | job.FlagJSONResults
			}},

		// checkDecode.
		{name: "text published on the subject", index: 1, body: []byte("hello"), check: checkDecode},
		{name: "a binary body cut short", index: 1, check: checkDecode}, // body cuts it
		{name: "JSON of another version", index: 1, body: []byte(`{"v":9,"job":"alice.v0job1","batch":1}`), check: checkDecode},

		// checkJob.
		{name: "the batch of another job", index: 1, check: checkJob,
			edit: func(fx *verifyFixture, b *job.Batch, m map[uint64]job.Digest) {
				b.Job = verifyOther
				b.Digest = b.ComputeDigest()
				m[1] = b.Digest // even were it listed
			}},

		// checkIndex.
		{name: "batch 1's answer on batch 0's subject", index: 0, check: checkIndex},
		{name: "batch 0's answer on batch 1's subject", index: 1, check: checkIndex,
			edit: func(fx *verifyFixture, b *job.Batch, m map[uint64]job.Digest) {
				*b = *fx.answer(0, false)
				m[1] = m[0] // even were it listed
			}},

		// checkRange.
		{name: "a batch past the job's last, listed by a manifest", index: 2, check: checkRange,
			edit: func(fx *verifyFixture, b *job.Batch, m map[uint64]job.Digest) {
				b.Index, b.First = 2, 12
				b.Digest = b.ComputeDigest()
				m[2] = b.Digest
			}},

		// checkManifest.
		{name: "a batch no manifest lists", index: 1, check: checkManifest,
			edit: func(_ *verifyFixture, _ *job.Batch, m map[uint64]job.Digest) { delete(m, 1) }},
		{name: "a batch past the count so far that no manifest lists", index: 7, notFinal: true, check: checkManifest,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				b.Index = 7
				b.Digest = b.ComputeDigest()
			}},

		// checkDigest: the items are the batch's, the message's digest not
		// the manifest's.
		{name: "a digest not the manifest's", index: 1, check: checkDigest,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) { b.Digest[0] ^= 1 }},
		{name: "the digest of the batch in the other mode", index: 1, check: checkDigest,
			edit: func(fx *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) { b.Digest = fx.digest(1, true) }},
		{name: "the digest of the other mode, JSON", index: 1, first: true, json: true, check: checkDigest,
			edit: func(fx *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) { b.Digest = fx.digest(1, false) }},

		// checkItems: the manifest's digest, on items that are not the
		// batch's.
		{name: "another puzzle answered", index: 1, check: checkItems,
			edit: func(fx *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				b.Items[itemUnique2].Outcome = solveOutcome(&fx.spare, false)
			}},
		{name: "one item fewer", index: 1, check: checkItems,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) { b.Items = b.Items[:len(b.Items)-1] }},
		{name: "one item more", index: 1, check: checkItems,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				b.Items = append(b.Items, job.Item{Line: 14, Kind: job.Known, Outcome: b.Items[itemUnique].Outcome})
			}},
		{name: "one item fewer, JSON", index: 1, json: true, check: checkItems,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) { b.Items = b.Items[1:] }},
		{name: "the answers on other lines", index: 1, check: checkItems,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				for i := range b.Items {
					b.Items[i].Line++
				}
			}},
		{name: "the batch one item later", index: 1, check: checkItems,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) { b.First++ }},
		{name: "a repeat answered as a puzzle of its own", index: 1, check: checkItems,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				b.Items[itemRepeat] = job.Item{Line: b.Items[itemRepeat].Line, Kind: job.Known,
					Outcome: b.Items[itemUnique].Outcome}
			}},
		{name: "an invalid line's text changed", index: 1, check: checkItems,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				b.Items[itemInvalid].Outcome.Text = "another line"
			}},
		{name: "another grid by the rules, not keeping the givens (binary: the givens travel in the solution)", index: 1,
			check: checkItems, edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				relabel(&b.Items[itemUnique].Outcome.Solution)
			}},

		// checkAnswer: the batch's items, with the manifest's digest, and
		// a wrong answer.
		{name: "a unique solution that breaks the rules", index: 1, check: checkAnswer, line: 7,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				o := &b.Items[itemUnique].Outcome
				i, j := twoBlanksOfARow(&o.Puzzle, &o.Solution)
				o.Solution[i], o.Solution[j] = o.Solution[j], o.Solution[i]
			}},
		{name: "a multiple's solution that breaks the rules, first solution", index: 1, first: true, check: checkAnswer,
			line: 8, edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				o := &b.Items[itemMultiple].Outcome
				i, j := twoBlanksOfARow(&o.Puzzle, &o.Solution)
				o.Solution[i], o.Solution[j] = o.Solution[j], o.Solution[i]
			}},
		{name: "another grid by the rules, not keeping the givens (JSON)", index: 1, json: true, check: checkAnswer, line: 13,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				relabel(&b.Items[itemUnique2].Outcome.Solution)
			}},
		{name: "none for a puzzle with one solution", index: 1, check: checkAnswer, line: 7,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				o := &b.Items[itemUnique].Outcome
				o.Status, o.Solution = result.StatusNone, solver.Grid{}
			}},
		{name: "none for a puzzle with solutions, first solution, JSON", index: 1, first: true, json: true,
			check: checkAnswer, line: 8, edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				o := &b.Items[itemMultiple].Outcome
				o.Status, o.Solution = result.StatusNone, solver.Grid{}
			}},
		{name: "multiple for a puzzle with one solution", index: 1, check: checkAnswer, line: 13,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				b.Items[itemUnique2].Outcome.Status = result.StatusMultiple
			}},
		{name: "solved (a first solution) in a job that proves each solution unique", index: 1, check: checkAnswer, line: 13,
			edit: func(_ *verifyFixture, b *job.Batch, _ map[uint64]job.Digest) {
				b.Items[itemUnique2].Outcome.Status = result.StatusSolved
			}},
	}
}

// relabel swaps the digits 1 and 2 of s: a grid by the rules still, not
// the solution of a puzzle that gives a 1 or a 2.
func relabel(s *solver.Grid) {
	for i, v := range s {
		switch v {
		case 1:
			s[i] = 2
		case 2:
			s[i] = 1
		}
	}
}

// twoBlanksOfARow returns two blank cells of p in one row whose digits
// differ in s: swapping them keeps the row and the givens, and breaks
// two columns.
func twoBlanksOfARow(p, s *solver.Grid) (int, int) {
	for i := range 81 {
		for j := i + 1; j < i/9*9+9; j++ {
			if p[i] == 0 && p[j] == 0 && s[i] != s[j] {
				return i, j
			}
		}
	}
	panic("no two blanks in a row")
}

// body returns the results message of tc, and the manifest it is checked
// against.
func (fx *verifyFixture) body(t testing.TB, tc *verifyCase) ([]byte, map[uint64]job.Digest) {
	t.Helper()
	manifest := map[uint64]job.Digest{}
	for k, v := range fx.digests[modeOf(tc.first)] {
		manifest[k] = v
	}
	if tc.body != nil {
		return tc.body, manifest
	}
	b := fx.answer(1, tc.first)
	if tc.edit != nil {
		tc.edit(fx, b, manifest)
	}
	if tc.json {
		return b.AppendJSONResults(nil), manifest
	}
	data := b.AppendResults(nil)
	if tc.check == checkDecode {
		data = data[:len(data)-1] // cut short
	}
	return data, manifest
}

// TestVerify checks the verifier against its cases: the right answers
// are accepted, and each forgery is refused by the check its case names
// (so that each case fails when that check is removed, even where a later
// check would refuse it too), naming the job, the batch and, for an
// answer, its line.
func TestVerify(t *testing.T) {
	fx := newVerifyFixture(t)
	for _, tc := range verifyCases() {
		t.Run(tc.name, func(t *testing.T) {
			data, manifest := fx.body(t, &tc)
			batches := tc.batches
			if batches == 0 {
				batches = 2
			}
			v := fx.verifier(tc.first, batches, !tc.notFinal, manifest)
			b, err := v.check(context.Background(), tc.index, "", data, nil)
			var r *refusal
			switch {
			case tc.check == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.check == "":
				if b == nil || b.Job != verifyJob || b.Index != tc.index {
					t.Fatalf("accepted as %+v", b)
				}
				return
			case err == nil:
				t.Fatalf("accepted; want refused by the %s check", tc.check)
			case !errors.As(err, &r) || !errors.Is(err, errRefused):
				t.Fatalf("error %v is not a refusal", err)
			case b != nil:
				t.Fatalf("refused with a batch: %+v", b)
			case r.Check != tc.check || r.Line != tc.line:
				t.Fatalf("refused by the %s check at line %d (%v); want the %s check at line %d",
					r.Check, r.Line, err, tc.check, tc.line)
			case r.Job != verifyJob || r.Batch != tc.index:
				t.Fatalf("refusal of job %s batch %d; want job %s batch %d", r.Job, r.Batch, verifyJob, tc.index)
			}
			t.Logf("%v", err)
		})
	}
}

// TestVerifyManifestError checks that a manifest that cannot be read is
// the verifier's error, not a refusal: the reader stops rather than
// waits for a batch it refused for nothing.
func TestVerifyManifestError(t *testing.T) {
	fx := newVerifyFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data := fx.answer(1, false).AppendResults(nil)
	b, err := fx.verifier(false, 2, true, fx.digests[0]).check(ctx, 1, "", data, nil)
	if b != nil || !errors.Is(err, context.Canceled) || errors.Is(err, errRefused) {
		t.Fatalf("check with the manifest unreadable = %v, %v; want context.Canceled, no refusal", b, err)
	}
}

// TestVerifySpare checks that a batch decodes into the spare items given,
// when they have room: a reader reuses them batch after batch.
func TestVerifySpare(t *testing.T) {
	fx := newVerifyFixture(t)
	spare := make([]job.Item, 16)
	data := fx.answer(1, false).AppendResults(nil)
	b, err := fx.verifier(false, 2, true, fx.digests[0]).check(context.Background(), 1, "", data, spare)
	if err != nil {
		t.Fatal(err)
	}
	if &b.Items[0] != &spare[0] {
		t.Error("the batch was not decoded into the spare items")
	}
}

// FuzzVerify checks the verifier on results messages made from its
// cases' bodies: it never panics, refuses only with a refusal, and what
// it accepts is the batch its job published, every answer right: the same
// lines, kinds and puzzles (or texts, or repeats) as the work batch, each
// solution complete, by the rules and keeping the givens, each none and
// multiple what solving says. The one answer it takes on trust is a
// unique's uniqueness (proving it would mean solving every puzzle
// again): a unique's solution is checked as any other.
func FuzzVerify(f *testing.F) {
	fx := newVerifyFixture(f)
	for _, tc := range verifyCases() {
		data, _ := fx.body(f, &tc)
		f.Add(data, tc.index, tc.first)
	}
	f.Fuzz(func(t *testing.T, data []byte, index uint64, first bool) {
		v := fx.verifier(first, 2, true, fx.digests[modeOf(first)])
		b, err := v.check(context.Background(), index, "", data, nil)
		if err != nil {
			var r *refusal
			if !errors.As(err, &r) || r.Job != verifyJob || r.Batch != index || r.Why == "" {
				t.Fatalf("error %v is not a refusal of this batch", err)
			}
			return
		}
		if b.Job != verifyJob || index > 1 || b.Index != index {
			t.Fatalf("accepted batch %d of job %s on the subject of batch %d", b.Index, b.Job, index)
		}
		w := fx.work[index]
		if b.First != w.First || len(b.Items) != len(w.Items) {
			t.Fatalf("accepted first item %d, %d items; published %d, %d", b.First, len(b.Items), w.First, len(w.Items))
		}
		for i := range b.Items {
			got, want := &b.Items[i], &w.Items[i]
			if got.Line != want.Line {
				t.Fatalf("item %d: accepted line %d, published %d", i, got.Line, want.Line)
			}
			switch want.Kind {
			case job.Repeat:
				if got.Kind != job.Repeat || got.Back != want.Back {
					t.Fatalf("line %d: accepted %+v for a repeat %d back", got.Line, got, want.Back)
				}
				continue
			case job.Known:
				if got.Kind != job.Known || got.Outcome.Text != want.Outcome.Text {
					t.Fatalf("line %d: accepted %+v for %+v", got.Line, got, want)
				}
				continue
			}
			o := &got.Outcome
			if got.Kind != job.Known || o.Puzzle != want.Grid {
				t.Fatalf("line %d: accepted %+v for puzzle %s", got.Line, got, want.Grid.String())
			}
			if err := o.Check(); err != nil {
				t.Fatalf("line %d: accepted a wrong solution: %v", got.Line, err)
			}
			truth := solveOutcome(&want.Grid, false).Status
			switch o.Status {
			case result.StatusNone, result.StatusMultiple:
				if o.Status != truth {
					t.Fatalf("line %d: accepted %s; solving says %s", got.Line, o.Status, truth)
				}
			case result.StatusUnique, result.StatusSolved:
				if truth == result.StatusNone {
					t.Fatalf("line %d: accepted %s for a puzzle without a solution", got.Line, o.Status)
				}
			}
		}
	})
}
