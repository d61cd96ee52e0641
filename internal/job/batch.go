package job

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"sync"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Format versions of the two batch messages.
const (
	// WorkVersion is the version AppendWork writes: a puzzle of up to
	// MaxSparseGivens givens travels as its givens (sparse), a fuller one
	// packed.
	WorkVersion = 3
	// WorkVersionPacked is the work format before it, every puzzle
	// packed, which the decoders still read: work published by producers
	// of the release before is solved, not dead-lettered, while a fleet
	// is upgraded (workers first).
	WorkVersionPacked = 2
	ResultsVersion    = 1
)

// MaxSparseGivens is the most givens a puzzle of a version 3 work batch
// carries in the sparse form: the givens mask and a nibble a given (at
// most 11+29 bytes, shorter than the 41 of a packed grid). Fuller puzzles
// are packed.
const MaxSparseGivens = 2 * (PackedLen - maskLen - 1)

// solveSparse is the kind byte of a Solve item in the sparse form (work
// version 3); the item decodes as a Solve.
const solveSparse byte = 4

// Flags of a batch.
const (
	// FlagNoLookup: the worker does not look the Solve items up in the
	// cache, and goes straight to solving: the producer looked them up
	// and found none, or the job is forced (solved again, whatever the
	// cache holds).
	FlagNoLookup uint64 = 1 << iota
	// FlagFirstSolution: stop at the first solution instead of proving
	// uniqueness.
	FlagFirstSolution
	// FlagJSONResults: publish the results in the JSON form
	// (JSONResults), for clients in other languages.
	FlagJSONResults
)

// Limits of a batch.
const (
	// MaxBatch is the most items one batch may carry.
	MaxBatch = 100_000
	// MaxJobID is the longest job id, in bytes.
	MaxJobID = 100
	// RepeatWindow is the farthest back a Repeat item may point: a reader
	// keeps the outcomes of this many items to resolve them.
	RepeatWindow = 1 << 16
)

// DigestLen is the length of a batch digest.
const DigestLen = 16

// Digest identifies a batch's content (see the package doc).
type Digest [DigestLen]byte

// String returns the digest in hex.
func (d Digest) String() string { return fmt.Sprintf("%x", d[:]) }

// Kind is the kind of an item.
type Kind uint8

// The item kinds.
const (
	// Solve: a puzzle for a worker (Item.Grid).
	Solve Kind = 1
	// Repeat: the same puzzle as the item Item.Back items earlier.
	Repeat Kind = 2
	// Known: a result already known (Item.Outcome).
	Known Kind = 3
)

// Batch is a run of consecutive items of one job: the body of a work
// message or of a results message.
type Batch struct {
	Job   string
	Index uint64 // batch index within the job, from 0
	First uint64 // the job-wide index of the first item
	Flags uint64
	// Digest is, in a results batch, the digest of the work batch it
	// answers; Append computes it for a work batch.
	Digest Digest
	Items  []Item
}

// Item is one puzzle line of a job.
type Item struct {
	Line    int // the input line, from 1
	Kind    Kind
	Grid    solver.Grid // Solve: the puzzle as given (not validated)
	Back    uint64      // Repeat: how many items back
	Outcome Outcome     // Known
}

// ID returns "<job>.<index>": the batch's Nats-Msg-Id.
func (b *Batch) ID() string { return b.Job + "." + strconv.FormatUint(b.Index, 10) }

// Manifested reports whether b is a batch of a job with a manifest (not
// an interactive request).
func (b *Batch) Manifested() bool { return b.Job != "" }

// AppendWork appends b encoded as a work batch to dst.
func (b *Batch) AppendWork(dst []byte) []byte { return b.append(dst, WorkVersion) }

// AppendResults appends b encoded as a results batch, with b.Digest, to
// dst. Solve items have no place there: encoding one panics.
func (b *Batch) AppendResults(dst []byte) []byte { return b.append(dst, ResultsVersion) }

func (b *Batch) append(dst []byte, version byte) []byte {
	dst = append(dst, version)
	dst = binary.AppendUvarint(dst, b.Flags)
	dst = appendString(dst, b.Job)
	dst = binary.AppendUvarint(dst, b.Index)
	dst = binary.AppendUvarint(dst, b.First)
	dst = binary.AppendUvarint(dst, uint64(len(b.Items)))
	if version == ResultsVersion {
		dst = append(dst, b.Digest[:]...)
	}
	prev := 0
	for i := range b.Items {
		it := &b.Items[i]
		dst = binary.AppendUvarint(dst, uint64(it.Line-prev))
		prev = it.Line
		if it.Kind == Solve {
			if version == ResultsVersion {
				panic("job: a Solve item in a results batch")
			}
			dst = appendPuzzle(dst, &it.Grid, version)
			continue
		}
		dst = append(dst, byte(it.Kind))
		switch it.Kind {
		case Repeat:
			dst = binary.AppendUvarint(dst, it.Back)
		case Known:
			dst = AppendOutcome(dst, &it.Outcome)
		default:
			panic(fmt.Sprintf("job: item of kind %d", it.Kind))
		}
	}
	return dst
}

// ErrDecode is matched (errors.Is) by every error the decoders return.
var ErrDecode = errors.New("job: undecodable message")

// DecodeError says where and why a body did not decode.
type DecodeError struct {
	Offset int    // byte offset in the body
	Reason string // what was wrong there
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("job: undecodable message at byte %d: %s", e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrDecode) true.
func (e *DecodeError) Is(target error) bool { return target == ErrDecode }

// DecodeWork decodes a work batch, of version WorkVersion or
// WorkVersionPacked. Every error is a *DecodeError.
func DecodeWork(data []byte) (Batch, error) { return decodeBatch(data, WorkVersion, nil) }

// DecodeWorkInto is DecodeWork with the items in items' memory when it
// has room for them (a worker reuses it batch after batch).
func DecodeWorkInto(data []byte, items []Item) (Batch, error) {
	return decodeBatch(data, WorkVersion, items)
}

// isText reports whether data's first bytes are text: no control
// character but line breaks and tabs. A batch starts with its format
// version, a byte below 32.
func isText(data []byte) bool {
	head := data[:min(len(data), 64)]
	for _, c := range head {
		if c < ' ' && c != '\n' && c != '\r' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return len(head) > 0 && head[0] >= ' '
}

// clipText is the start of a text body, for an error message.
func clipText(data []byte) string {
	if len(data) > 40 {
		return string(data[:40]) + "..."
	}
	return string(data)
}

// DecodeResults decodes a results batch. Every error is a *DecodeError.
func DecodeResults(data []byte) (Batch, error) { return decodeBatch(data, ResultsVersion, nil) }

func decodeBatch(data []byte, version byte, items []Item) (Batch, error) {
	var b Batch
	d := decoder{data: data}
	v := d.byte("format version")
	if version == WorkVersion && v == WorkVersionPacked {
		version = v
	}
	if d.err == nil && v != version {
		d.off = 0
		if isText(data) {
			// Someone published text on the subject ('nats pub'): say
			// so, not that its first letter is an unknown version.
			d.fail(fmt.Sprintf("the body is text (%q), not a binary batch (format version %d) as the producer publishes",
				clipText(data), version))
		} else {
			d.fail(fmt.Sprintf("format version %d, want %d", v, version))
		}
	}
	b.Flags = d.uvarint("flags")
	b.Job = d.str(MaxJobID, "job id")
	if d.err == nil && !ValidID(b.Job) {
		d.fail(fmt.Sprintf("job id %q is not one NewID makes", b.Job))
	}
	b.Index = d.uvarint("batch index")
	b.First = d.uvarint("first item index")
	n := d.uvarint("item count")
	if d.err == nil && (n == 0 || n > MaxBatch) {
		d.fail(fmt.Sprintf("%d items, want 1-%d", n, MaxBatch))
	}
	// Each item takes at least three bytes: bound the allocation by the
	// body's size.
	if d.err == nil && n > uint64(len(data)-d.off)/3 {
		d.fail(fmt.Sprintf("%d items cannot fit in the %d bytes left", n, len(data)-d.off))
	}
	if version == ResultsVersion {
		copy(b.Digest[:], d.bytes(DigestLen, "digest"))
	}
	if d.err != nil {
		return Batch{}, d.err
	}
	if uint64(cap(items)) >= n {
		b.Items = items[:n]
		clear(b.Items)
	} else {
		b.Items = make([]Item, n)
	}
	line := uint64(0)
	for i := range b.Items {
		it := &b.Items[i]
		line += d.uvarint("line delta")
		if d.err == nil && line > 1<<40 {
			d.fail("line number out of range")
		}
		it.Line = int(line)
		k := d.byte("item kind")
		it.Kind = Kind(k)
		switch {
		case d.err != nil:
		case k == solveSparse && version == WorkVersion:
			it.Kind = Solve
			it.Grid = d.sparseGrid("puzzle")
		case it.Kind == Solve && version == WorkVersion:
			it.Grid = d.grid("puzzle")
			if n := it.Grid.Givens(); d.err == nil && n <= MaxSparseGivens {
				d.off -= PackedLen
				d.fail(fmt.Sprintf("packed puzzle of %d givens, which the sparse form carries", n))
			}
		case it.Kind == Solve && version == WorkVersionPacked:
			it.Grid = d.grid("puzzle")
		case it.Kind == Repeat:
			it.Back = d.uvarint("repeat distance")
			if d.err == nil && (it.Back == 0 || it.Back > RepeatWindow || it.Back > b.First+uint64(i)) {
				d.fail(fmt.Sprintf("item %d repeats the item %d back", i, it.Back))
			}
		case it.Kind == Known:
			it.Outcome = d.outcome()
		default:
			d.fail(fmt.Sprintf("item %d of kind %d", i, it.Kind))
		}
		if d.err != nil {
			return Batch{}, d.err
		}
	}
	if d.off != len(data) {
		return Batch{}, &DecodeError{d.off, result.Plural(len(data)-d.off, "byte", "bytes") + " after the last item"}
	}
	return b, nil
}

// ComputeDigest returns the digest of b's items (see the package doc): the
// same for a work batch and the results batch that answers it.
func (b *Batch) ComputeDigest() Digest {
	h := sha256.New()
	bp := digestBufs.Get().(*[]byte)
	defer digestBufs.Put(bp)
	buf := (*bp)[:0]
	buf = appendString(buf, b.Job)
	buf = binary.AppendUvarint(buf, b.Index)
	buf = binary.AppendUvarint(buf, b.First)
	buf = binary.AppendUvarint(buf, uint64(len(b.Items)))
	buf = append(buf, byte(b.Flags&FlagFirstSolution)) // the mode is part of the question
	prev := 0
	for i := range b.Items {
		it := &b.Items[i]
		buf = binary.AppendUvarint(buf, uint64(it.Line-prev))
		prev = it.Line
		switch {
		case it.Kind == Solve:
			buf = append(buf, 'p')
			buf = AppendPacked(buf, &it.Grid)
		case it.Kind == Repeat:
			buf = append(buf, 'r')
			buf = binary.AppendUvarint(buf, it.Back)
		case it.Outcome.Status == result.StatusInvalid:
			buf = append(buf, 't')
			buf = appendString(buf, it.Outcome.Text)
		default:
			buf = append(buf, 'p')
			buf = AppendPacked(buf, &it.Outcome.Puzzle)
		}
		if len(buf) > digestChunk {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	*bp = buf
	var d Digest
	copy(d[:], h.Sum(nil))
	return d
}

// digestChunk is how much of a batch ComputeDigest hashes at a time, in
// buffers it reuses (digestBufs): a batch's digest allocates nothing
// that grows with it.
const digestChunk = 16 << 10

var digestBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, digestChunk+1024)
	return &b
}}

// decoder reads a body, keeping the first error.
type decoder struct {
	data  []byte
	off   int
	err   error
	dense bool // solutions may be dense: the cache's form
}

func (d *decoder) fail(reason string) {
	if d.err == nil {
		d.err = &DecodeError{d.off, reason}
	}
}

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.data) {
		d.fail("missing " + what)
		return 0
	}
	b := d.data[d.off]
	d.off++
	return b
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.data[d.off:])
	if n <= 0 {
		d.fail("bad or missing " + what)
		return 0
	}
	if n > 1 && d.data[d.off+n-1] == 0 { // one encoding per number
		d.fail("padded " + what)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes(n int, what string) []byte { return d.part(n, what, "") }

// part is bytes for a part of what, and the error names both ("puzzle
// digits"). The two are joined only for the error: joined for every read,
// they cost an allocation each.
func (d *decoder) part(n int, what, part string) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.data)-d.off {
		if part != "" {
			what += " " + part
		}
		d.fail(fmt.Sprintf("%s of %d bytes runs past the end", what, n))
		return nil
	}
	b := d.data[d.off : d.off+n]
	d.off += n
	return b
}

func (d *decoder) str(limit int, what string) string {
	n := d.uvarint(what + " length")
	if d.err == nil && n > uint64(limit) {
		d.fail(fmt.Sprintf("%s of %d bytes, at most %d", what, n, limit))
	}
	if d.err != nil {
		return ""
	}
	return string(d.bytes(int(n), what))
}

// appendPuzzle appends the kind byte and the puzzle of a Solve item in the
// form of the work version: in version 3, sparse (solveSparse, the givens
// mask, then each given's digit in a nibble, high nibble first, a spare
// low nibble 0) for up to MaxSparseGivens givens, else packed.
func appendPuzzle(dst []byte, g *solver.Grid, version byte) []byte {
	mask := givensMask(g)
	count := maskCount(mask[:])
	if version == WorkVersionPacked || count > MaxSparseGivens {
		dst = append(dst, byte(Solve))
		return AppendPacked(dst, g)
	}
	dst = append(dst, solveSparse)
	dst = append(dst, mask[:]...)
	// The givens' digits, two to a byte, written in place: dst grows once.
	n := len(dst)
	dst = slices.Grow(dst, (count+1)/2)
	digits := dst[n : n+(count+1)/2]
	clear(digits)
	k := 0
	for base, m := range maskWords(mask[:]) {
		for ; m != 0; m &= m - 1 {
			v := g[64*base+bits.TrailingZeros64(m)]
			digits[k>>1] |= v & 15 << (4 * (1 - k&1))
			k++
		}
	}
	return dst[:n+len(digits)]
}

// sparseGrid reads a puzzle in the sparse form (appendPuzzle), one
// encoding per puzzle: no mask bit past cell 81, at most MaxSparseGivens
// givens, no given of digit 0 and a spare nibble 0.
func (d *decoder) sparseGrid(what string) solver.Grid {
	var g solver.Grid
	start := d.off
	mask := d.part(maskLen, what, "givens mask")
	if d.err != nil {
		return g
	}
	if mask[maskLen-1]>>1 != 0 {
		d.off = start
		d.fail(what + ": givens mask with bits past cell 81")
		return g
	}
	n := maskCount(mask)
	if n > MaxSparseGivens {
		d.off = start
		d.fail(fmt.Sprintf("%s: sparse with %d givens, which the packed form carries", what, n))
		return g
	}
	digits := d.part((n+1)/2, what, "digits")
	if d.err != nil {
		return g
	}
	k := 0
	for base, m := range maskWords(mask) {
		for ; m != 0; m &= m - 1 {
			i := 64*base + bits.TrailingZeros64(m)
			v := digits[k>>1] >> (4 * (1 - k&1)) & 15
			if v == 0 {
				d.off = start
				d.fail(fmt.Sprintf("%s: given cell %d is 0", what, i+1))
				return g
			}
			g[i] = v
			k++
		}
	}
	if n&1 == 1 && digits[n>>1]&15 != 0 {
		d.off = start
		d.fail(what + ": sparse digits with a spare nibble set")
	}
	return g
}

func (d *decoder) grid(what string) solver.Grid {
	b := d.bytes(PackedLen, what)
	if d.err != nil {
		return solver.Grid{}
	}
	g, err := Unpack(b)
	if err != nil {
		d.off -= PackedLen
		d.fail(what + ": " + err.Error())
	}
	return g
}
