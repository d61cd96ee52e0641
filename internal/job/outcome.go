package job

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// PackedLen is the length of a packed grid.
const PackedLen = 41

// maskLen is the length of a givens mask: 81 bits.
const maskLen = 11

// AppendPacked appends g packed to dst: two cells a byte, the first cell
// in the high nibble, 0 for a blank; the last byte's low nibble is 0.
func AppendPacked(dst []byte, g *solver.Grid) []byte {
	p := Pack(g)
	return append(dst, p[:]...)
}

// Pack returns g packed, as AppendPacked appends it: eight cells (a
// little-endian word, cells below 16) at a time, each pair of bytes made
// one in its 16-bit lane, then the four lanes' low bytes gathered.
func Pack(g *solver.Grid) (p [PackedLen]byte) {
	const lo4, hi4 = 0x000f000f000f000f, 0x00f000f000f000f0
	for w := range 10 {
		x := binary.LittleEndian.Uint64(g[8*w:])
		t := x<<4&hi4 | x>>8&lo4
		t = (t | t>>8) & 0x0000ffff0000ffff
		t = (t | t>>16) & 0xffffffff
		binary.LittleEndian.PutUint32(p[4*w:], uint32(t))
	}
	p[40] = g[80] << 4
	return p
}

// Unpack reverses AppendPacked. It checks the length and that the spare
// nibble is 0; a cell above 9 is left for solver's Validate to report.
// Like Pack, it works on words: four bytes spread to a byte a 16-bit
// lane, then each byte's nibbles made the lane's two cells.
func Unpack(p []byte) (solver.Grid, error) {
	var g solver.Grid
	if len(p) != PackedLen {
		return g, fmt.Errorf("job: packed grid of %d bytes, want %d", len(p), PackedLen)
	}
	if p[40]&15 != 0 {
		return g, errors.New("job: packed grid with a spare nibble set")
	}
	const lo4 = 0x000f000f000f000f
	q := (*[PackedLen]byte)(p)
	for w := range 10 {
		y := uint64(binary.LittleEndian.Uint32(q[4*w:]))
		y = (y | y<<16) & 0x0000ffff0000ffff
		y = (y | y<<8) & 0x00ff00ff00ff00ff
		binary.LittleEndian.PutUint64(g[8*w:], y>>4&lo4|(y&lo4)<<8)
	}
	g[80] = q[40] >> 4
	return g, nil
}

// Outcome is the result of one item in the compact form that batches and
// the cache carry. Unlike result.Result it holds grids, not text, and no
// line or key: Result adds them.
type Outcome struct {
	Status result.Status
	// Cached is set on a result the producer or worker found in the
	// cache rather than solved.
	Cached  bool
	Guesses int64
	// Puzzle is the puzzle (every status but invalid).
	Puzzle solver.Grid
	// Solution is set for unique, solved and multiple.
	Solution solver.Grid
	// Text is the input of an invalid item, as given (at most
	// solver.MaxInputLen bytes).
	Text string
	// Error is the reason of an invalid or gave_up result; the other
	// statuses' reasons follow from the status.
	Error string
}

// Status codes of the compact form.
const (
	codeUnique   = 1
	codeSolved   = 2
	codeMultiple = 3
	codeNone     = 4
	codeGaveUp   = 5
	codeInvalid  = 6
	cachedBit    = 0x80
)

var codeStatus = [...]result.Status{codeUnique: result.StatusUnique, codeSolved: result.StatusSolved,
	codeMultiple: result.StatusMultiple, codeNone: result.StatusNone, codeGaveUp: result.StatusGaveUp,
	codeInvalid: result.StatusInvalid}

// codeOf returns the status code of st (codeStatus read backwards), or
// false for an unknown status.
func codeOf(st result.Status) (byte, bool) {
	for code := codeUnique; code < len(codeStatus); code++ {
		if codeStatus[code] == st {
			return byte(code), true
		}
	}
	return 0, false
}

// HasSolution reports whether results of status st carry a solution.
func HasSolution(st result.Status) bool {
	return st == result.StatusUnique || st == result.StatusSolved || st == result.StatusMultiple
}

// AppendOutcome appends the compact form of o to dst. An unknown status
// is encoded as gave_up with an error that names it.
func AppendOutcome(dst []byte, o *Outcome) []byte { return appendOutcome(dst, o, false) }

// appendOutcome is AppendOutcome, with a dense solution (see
// AppendCacheValue) when dense is set and the solution allows.
func appendOutcome(dst []byte, o *Outcome, dense bool) []byte {
	code, ok := codeOf(o.Status)
	errText := o.Error
	if !ok {
		code, errText = codeGaveUp, fmt.Sprintf("job: unknown status %q", o.Status)
	}
	b := code
	if o.Cached {
		b |= cachedBit
	}
	if dense && HasSolution(codeStatus[code]) && sums45(&o.Solution) {
		b |= denseBit
	}
	dst = append(dst, b)
	dst = binary.AppendUvarint(dst, uint64(max(o.Guesses, 0)))
	switch code {
	case codeUnique, codeSolved, codeMultiple:
		mask := givensMask(&o.Puzzle)
		dst = append(dst, mask[:]...)
		if b&denseBit != 0 {
			dst = appendDense(dst, &o.Solution)
		} else {
			dst = AppendPacked(dst, &o.Solution)
		}
	case codeNone:
		dst = AppendPacked(dst, &o.Puzzle)
	case codeGaveUp:
		dst = AppendPacked(dst, &o.Puzzle)
		dst = appendString(dst, errText)
	case codeInvalid:
		dst = appendString(dst, o.Text)
		dst = appendString(dst, errText)
	}
	return dst
}

// EncodeOutcome is AppendOutcome to a new slice.
func EncodeOutcome(o *Outcome) []byte { return AppendOutcome(nil, o) }

// DecodeOutcome decodes a whole compact outcome, as the cache stores it.
func DecodeOutcome(data []byte) (Outcome, error) {
	d := decoder{data: data}
	o := d.outcome()
	if d.err == nil && d.off != len(data) {
		d.fail(fmt.Sprintf("%d bytes after the outcome", len(data)-d.off))
	}
	return o, d.err
}

// DecodeOutcomePrefix decodes the compact outcome at the start of data,
// ignoring what follows it.
func DecodeOutcomePrefix(data []byte) (Outcome, error) {
	d := decoder{data: data}
	o := d.outcome()
	return o, d.err
}

// FromResult converts a result (as result.FromSolve builds it) to its
// compact form. The grids come from r's Puzzle and Solution text; it fails
// on a result whose puzzle or solution is not 81 cells.
func FromResult(r *result.Result) (Outcome, error) {
	o := Outcome{Status: r.Status, Cached: r.Cached, Guesses: r.Guesses}
	switch r.Status {
	case result.StatusInvalid:
		o.Text, o.Error = r.Puzzle, r.Error
		return o, nil
	case result.StatusGaveUp:
		o.Error = r.Error
	}
	var err error
	if o.Puzzle, err = solver.Parse(r.Puzzle); err != nil {
		return o, fmt.Errorf("job: result puzzle: %w", err)
	}
	if HasSolution(r.Status) {
		if o.Solution, err = solver.Parse(r.Solution); err != nil {
			return o, fmt.Errorf("job: result solution: %w", err)
		}
	}
	return o, nil
}

// FromSolve builds the outcome of solving g: r and err as Solver.Solve
// returned them.
func FromSolve(g *solver.Grid, r solver.Result, err error) Outcome {
	o := Outcome{Puzzle: *g, Guesses: r.Guesses}
	if err != nil {
		var pe *solver.ParseError
		if errors.As(err, &pe) {
			return Outcome{Status: result.StatusInvalid, Text: g.String(), Error: err.Error()}
		}
		o.Status, o.Error = result.StatusGaveUp, err.Error()
		return o
	}
	switch r.Status {
	case solver.Unique:
		o.Status, o.Solution = result.StatusUnique, r.Solution
	case solver.Solved:
		o.Status, o.Solution = result.StatusSolved, r.Solution
	case solver.Multiple:
		o.Status, o.Solution = result.StatusMultiple, r.Solution
	case solver.None:
		o.Status = result.StatusNone
	default:
		o.Status, o.Error = result.StatusGaveUp, "solver: unknown status "+r.Status.String()
	}
	return o
}

// Result converts o to the record commands print, with the input line
// and, for a valid puzzle, its key (solver.Grid.Key of o.Puzzle; "" leaves
// it out).
func (o *Outcome) Result(line int, key string) result.Result {
	r := o.Brief(line)
	if o.Status != result.StatusInvalid {
		r.Puzzle, r.Key = o.Puzzle.String(), key
	}
	return r
}

// Brief is Result without the puzzle and key: what a text output shows.
func (o *Outcome) Brief(line int) result.Result {
	r := result.Result{Line: line, Status: o.Status, Guesses: o.Guesses, Cached: o.Cached, Error: o.Error}
	switch o.Status {
	case result.StatusUnique, result.StatusSolved:
		r.Solution = o.Solution.Digits()
	case result.StatusMultiple:
		r.Solution, r.Error = o.Solution.Digits(), result.MsgMultiple
	case result.StatusNone:
		r.Error = result.MsgNone
	case result.StatusInvalid:
		r.Puzzle = o.Text
	}
	return r
}

// Answers reports whether o answers a request for its puzzle in the given
// mode: any solution or proof of none does in first-solution mode; a
// count-to-two request needs unique, multiple or none (a "solved" found in
// first-solution mode does not say whether it is unique). Gave_up and
// invalid never do.
func (o *Outcome) Answers(first bool) bool {
	switch o.Status {
	case result.StatusUnique, result.StatusMultiple, result.StatusNone:
		return true
	case result.StatusSolved:
		return first
	}
	return false
}

// Check verifies what can be verified of o without solving: a solution is
// complete, follows the rules and agrees with the givens. It returns nil
// for the statuses without a solution.
func (o *Outcome) Check() error {
	if !HasSolution(o.Status) {
		return nil
	}
	if o.solutionOK() {
		return nil
	}
	for i, v := range o.Solution {
		if p := o.Puzzle[i]; p != 0 && p != v {
			return fmt.Errorf("job: solution cell %s is %d, the given is %d", solver.CellName(i), v, p)
		}
	}
	if err := o.Solution.Validate(); err != nil {
		return fmt.Errorf("job: solution breaks the rules: %w", err)
	}
	return fmt.Errorf("job: solution is not complete")
}

// solutionOK reports whether o's solution agrees with its givens and
// holds every digit once in each row, column and box: the OR of the
// digits' bits of a unit is 0x3fe exactly when it holds all nine (a cell
// out of 1-9 sets another bit).
func (o *Outcome) solutionOK() bool {
	s, p := &o.Solution, &o.Puzzle
	// Givens: every byte of the puzzle is 0 or the solution's. Cells are
	// below 16, so adding 0x7f to a byte sets its top bit exactly when it
	// is not 0, without a carry into the next byte.
	const ones7f, top = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080
	var bad uint64
	for w := 0; w < 80; w += 8 {
		x := binary.LittleEndian.Uint64(p[w:])
		y := binary.LittleEndian.Uint64(s[w:])
		bad |= (x + ones7f) & ((x ^ y) + ones7f) & top
	}
	if p[80] != 0 && p[80] != s[80] {
		return false
	}
	// Rows a band at a time, unrolled, every mask in a register: the
	// bits of a row's nine cells make its mask, go to the nine columns',
	// and three at a time to the band's boxes.
	var c0, c1, c2, c3, c4, c5, c6, c7, c8 uint16
	const all = 0x3fe
	for band := 0; band < 81; band += 27 {
		var x0, x1, x2 uint16
		for r := band; r < band+27; r += 9 {
			row := (*[9]uint8)(s[r : r+9])
			b0, b1, b2 := uint16(1)<<(row[0]&15), uint16(1)<<(row[1]&15), uint16(1)<<(row[2]&15)
			b3, b4, b5 := uint16(1)<<(row[3]&15), uint16(1)<<(row[4]&15), uint16(1)<<(row[5]&15)
			b6, b7, b8 := uint16(1)<<(row[6]&15), uint16(1)<<(row[7]&15), uint16(1)<<(row[8]&15)
			l, m, h := b0|b1|b2, b3|b4|b5, b6|b7|b8
			bad |= uint64((l | m | h) ^ all)
			x0, x1, x2 = x0|l, x1|m, x2|h
			c0, c1, c2, c3, c4, c5, c6, c7, c8 = c0|b0, c1|b1, c2|b2, c3|b3, c4|b4, c5|b5, c6|b6, c7|b7, c8|b8
		}
		bad |= uint64((x0 ^ all) | (x1 ^ all) | (x2 ^ all))
	}
	bad |= uint64((c0 ^ all) | (c1 ^ all) | (c2 ^ all) | (c3 ^ all) | (c4 ^ all) | (c5 ^ all) | (c6 ^ all) | (c7 ^ all) | (c8 ^ all))
	return bad == 0
}

// givensMask returns the mask of g's filled cells: bit i%8 of byte i/8
// for cell i. Cells are below 16, so adding 0x7f to a cell sets its top
// bit exactly when it is not 0, without a carry into the next byte;
// multiplying the eight top bits of a word by the magic below gathers
// them into its top byte (cell i of the word at bit i).
func givensMask(g *solver.Grid) (mask [maskLen]byte) {
	const ones7f, top, gather = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080, 0x0102040810204080
	for w := range 10 {
		x := (binary.LittleEndian.Uint64(g[8*w:]) + ones7f) & top
		mask[w] = byte((x >> 7) * gather >> 56)
	}
	if g[80] != 0 {
		mask[10] = 1
	}
	return mask
}

// maskedGrid returns the cells of g that mask marks (givensMask's form),
// the others 0: eight cells at a time, through byteMask, without a branch
// on each given (their pattern would make it mispredict).
func maskedGrid(g *solver.Grid, mask []byte) (out solver.Grid) {
	for w := range 10 {
		binary.LittleEndian.PutUint64(out[8*w:], binary.LittleEndian.Uint64(g[8*w:])&byteMask[mask[w]])
	}
	out[80] = g[80] & -(mask[10] & 1)
	return out
}

// byteMask[m] has byte i all ones where bit i of m is set, else 0.
var byteMask = func() (t [256]uint64) {
	for m := range t {
		for i := range 8 {
			if m&(1<<i) != 0 {
				t[m] |= 0xff << (8 * i)
			}
		}
	}
	return t
}()

// maskWords returns a givens mask as two words: cells 0-63, then 64-80
// (bit i-64), for a loop over the givens by bits.TrailingZeros64 with no
// loop per byte of the mask (whose exits the givens' pattern would make
// mispredict).
func maskWords(mask []byte) [2]uint64 {
	return [2]uint64{binary.LittleEndian.Uint64(mask), uint64(mask[8]) | uint64(mask[9])<<8 | uint64(mask[10])<<16}
}

// maskCount returns how many cells a givens mask marks.
func maskCount(mask []byte) int {
	n := 0
	for _, m := range mask {
		n += bits.OnesCount8(m)
	}
	return n
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// outcome reads a compact outcome at d's offset.
func (d *decoder) outcome() Outcome {
	var o Outcome
	b := d.byte("status")
	if d.err != nil {
		return o
	}
	code := b &^ (cachedBit | denseBit)
	if code == 0 || int(code) >= len(codeStatus) || b&denseBit != 0 && !d.dense {
		d.fail(fmt.Sprintf("unknown status code %d", b&^cachedBit))
		return o
	}
	if b&denseBit != 0 && !HasSolution(codeStatus[code]) {
		d.fail(fmt.Sprintf("status %s with a dense solution", codeStatus[code]))
		return o
	}
	o.Status, o.Cached = codeStatus[code], b&cachedBit != 0
	g := d.uvarint("guesses")
	if g > 1<<62 {
		d.fail("guesses out of range")
	}
	o.Guesses = int64(g)
	switch code {
	case codeUnique, codeSolved, codeMultiple:
		mask := d.bytes(maskLen, "givens mask")
		var sol solver.Grid
		if b&denseBit != 0 {
			sol = d.denseGrid("solution")
		} else {
			sol = d.grid("solution")
		}
		if d.err != nil {
			return o
		}
		if mask[maskLen-1]>>1 != 0 {
			d.fail("givens mask with bits past cell 81")
			return o
		}
		// A solution has no blank: a given over a blank would not encode
		// back to the same bytes.
		if i := bytes.IndexByte(sol[:], 0); i >= 0 {
			d.off -= PackedLen
			d.fail(fmt.Sprintf("solution with a blank cell %d", i+1))
			return o
		}
		o.Solution = sol
		o.Puzzle = maskedGrid(&sol, mask)
	case codeNone:
		o.Puzzle = d.grid("puzzle")
	case codeGaveUp:
		o.Puzzle = d.grid("puzzle")
		o.Error = d.str(maxErrorLen, "error")
	case codeInvalid:
		o.Text = d.str(solver.MaxInputLen, "input text")
		o.Error = d.str(maxErrorLen, "error")
	}
	return o
}

// maxErrorLen bounds an error text in the compact form.
const maxErrorLen = 4096

// Provenance says what vouches for an outcome beyond its own bytes: a
// proof (internal/proof: a trusted worker's signature, checked) or
// nothing.
type Provenance bool

// The provenances of Verify.
const (
	// Unproven: the outcome came from a source anyone with the right to
	// write there could forge (a results message, a solve reply, the
	// cache) and no trusted signature covers it.
	Unproven Provenance = false
	// Proven: a trusted worker signed the outcome, or the caller
	// produced it itself.
	Proven Provenance = true
)

// Verify is Check, and for the answers a solution cannot prove, a solve
// of the puzzle that must agree: none must find no solution, multiple
// two (its solution checked too). The solver is fast (microseconds for
// most puzzles), so a reader can afford it for every such answer from a
// source it does not trust (a results message, the cache, a solve
// reply). A search that runs out of its node budget disproves nothing:
// the answer stands. invalid is no answer (the line is reported failed)
// and is not verified. first is the request's mode: solved (a first
// solution) answers only a first-solution request.
//
// An Unproven outcome must also stand what only a worker's word
// vouches for otherwise: unique is solved again to a count of two (the
// search must find no second solution), and gave_up with the default
// node budget (the search must give up too; when it answers, the error
// is a *SettledError with that answer). A Proven one (a trusted
// worker signed it) is taken at its word for these: solving every
// unique answer again would double the cost of a job.
func (o *Outcome) Verify(ctx context.Context, first bool, p Provenance) error {
	if err := o.Check(); err != nil {
		return err
	}
	if o.Status == result.StatusSolved && !first {
		return errors.New("job: says solved (a first solution, not proven unique) for a job that proves each solution unique")
	}
	switch o.Status {
	case result.StatusNone, result.StatusMultiple:
	case result.StatusUnique, result.StatusGaveUp:
		if p == Proven {
			return nil
		}
	default:
		return nil
	}
	firstOnly := first && (o.Status == result.StatusNone || o.Status == result.StatusGaveUp)
	r, err := solver.Solve(ctx, &o.Puzzle, solver.Options{FirstSolution: firstOnly})
	switch {
	case errors.Is(err, solver.ErrGaveUp):
		return nil
	case err != nil:
		return fmt.Errorf("job: %s: %w", o.Status, err)
	}
	if got := FromSolve(&o.Puzzle, r, nil); got.Status != o.Status {
		switch o.Status {
		case result.StatusGaveUp:
			return &SettledError{Outcome: got}
		case result.StatusUnique:
			return fmt.Errorf("job: says %s with no proof (%w), solving says %s", o.Status, ErrUnproven, got.Status)
		}
		return fmt.Errorf("job: says %s, solving says %s", o.Status, got.Status)
	}
	return nil
}

// SettledError is Verify's error for an Unproven gave_up that the
// reader's own solve settled: Outcome is that answer. A gave_up is no
// claim that the puzzle cannot be solved (a worker with a smaller node
// budget, or a search that failed, gives up honestly), so a reader may
// print Outcome in its place; what it must not do is print the gave_up.
type SettledError struct {
	Outcome Outcome
}

// Error says what the reader's solve found.
func (e *SettledError) Error() string {
	return fmt.Sprintf("job: says gave_up with no proof (%v), solving says %s", ErrUnproven, e.Outcome.Status)
}

// Unwrap makes errors.Is(err, ErrUnproven) true.
func (e *SettledError) Unwrap() error { return ErrUnproven }

// ErrUnproven is matched by Verify's refusal of an Unproven unique or
// gave_up that solving contradicts: the answer needed a worker's proof.
var ErrUnproven = proof.ErrUnproven

// SameAnswer reports whether o and p answer the same puzzle alike: the
// same status and input and, for unique and solved, the same solution (a
// multiple's solution is any of them; each is Checked by Verify).
func (o *Outcome) SameAnswer(p *Outcome) bool {
	if o.Status != p.Status || o.Text != p.Text {
		return false
	}
	switch o.Status {
	case result.StatusInvalid:
		return true
	case result.StatusUnique, result.StatusSolved:
		return o.Puzzle == p.Puzzle && o.Solution == p.Solution
	}
	return o.Puzzle == p.Puzzle
}

// SameAnswers reports whether the results batches a and b answer the
// same work batch alike: the same digest, job, index and items, each
// Known item's outcome SameAnswer as the other's.
func SameAnswers(a, b *Batch) bool {
	if a.Digest != b.Digest || a.Job != b.Job || a.Index != b.Index || a.First != b.First || len(a.Items) != len(b.Items) {
		return false
	}
	for i := range a.Items {
		x, y := &a.Items[i], &b.Items[i]
		if x.Line != y.Line || x.Kind != y.Kind || x.Back != y.Back ||
			x.Kind == Known && !x.Outcome.SameAnswer(&y.Outcome) {
			return false
		}
	}
	return true
}
