// Package queue holds what sudoku-queue keeps in NATS JetStream: the work
// stream and its consumers, the dead-letter stream, the subjects, and the
// encoding of the messages that carry batches of puzzles.
//
// # Message format, version 1
//
// A message on <prefix>.jobs.bulk or <prefix>.jobs.interactive carries one
// batch of puzzles of one job. The body is binary, all integers unsigned
// varints (encoding/binary.AppendUvarint):
//
//	byte     version (1)
//	uvarint  flags: bit 0 FlagCacheChecked (the producer looked the keys up
//	         already; the worker need not), bit 1 FlagFirstSolution, bit 2
//	         FlagPacked (every puzzle is a packed grid, see PackGrid)
//	uvarint  length of the job id, then the job id (at most 64 bytes)
//	uvarint  batch index within the job
//	uvarint  number of puzzles n (at most MaxBatch)
//	n times: uvarint item index within the job, uvarint length (at most
//	         solver.MaxInputLen), then the puzzle: with FlagPacked, a
//	         41-byte packed grid; else text in any format solver.Parse
//	         takes
//
// The header Nats-Msg-Id is "<job id>.<batch index>", so that JetStream
// drops a batch published twice within the stream's duplicate window.
// A body that does not decode is never retried: the worker moves it to the
// dead-letter stream.
package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Version is the message format version this package writes.
const Version = 1

// Flags of a batch.
const (
	// FlagCacheChecked: the producer has looked every key up in the cache
	// and found none, so the worker goes straight to solving.
	FlagCacheChecked uint64 = 1 << iota
	// FlagFirstSolution: stop at the first solution instead of proving
	// uniqueness.
	FlagFirstSolution
	// FlagPacked: every puzzle is a packed grid (PackGrid), half the size
	// of the text and with nothing to parse.
	FlagPacked
)

// PackedLen is the length of a packed grid.
const PackedLen = 41

// PackGrid appends g packed to dst: two cells a byte, the first cell in
// the high nibble, 0 for a blank; the last byte's low nibble is 0.
func PackGrid(dst []byte, g *solver.Grid) []byte {
	for i := 0; i < 80; i += 2 {
		dst = append(dst, g[i]<<4|g[i+1])
	}
	return append(dst, g[80]<<4)
}

// UnpackGrid reverses PackGrid. It checks the length only: a cell above 9
// is left for solver's validation to report.
func UnpackGrid(p string) (solver.Grid, error) {
	var g solver.Grid
	if len(p) != PackedLen {
		return g, fmt.Errorf("queue: packed grid of %d bytes, want %d", len(p), PackedLen)
	}
	for i := 0; i < 40; i++ {
		g[2*i], g[2*i+1] = p[i]>>4, p[i]&15
	}
	g[80] = p[40] >> 4
	return g, nil
}

// MaxBatch is the most puzzles one message may carry.
const MaxBatch = 100_000

// MaxJobID is the longest job id, in bytes.
const MaxJobID = 64

// Batch is the content of one message: some puzzles of one job.
type Batch struct {
	JobID string
	Index uint64 // batch index within the job, from 0
	Flags uint64
	Items []Item
}

// Item is one puzzle of a batch.
type Item struct {
	Index  uint64 // the puzzle's index within the job
	Puzzle string
}

// MsgID returns the Nats-Msg-Id of the batch: "<job id>.<batch index>".
func (b *Batch) MsgID() string { return b.JobID + "." + strconv.FormatUint(b.Index, 10) }

// Append appends the encoding of b to dst.
func (b *Batch) Append(dst []byte) []byte {
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, b.Flags)
	dst = binary.AppendUvarint(dst, uint64(len(b.JobID)))
	dst = append(dst, b.JobID...)
	dst = binary.AppendUvarint(dst, b.Index)
	dst = binary.AppendUvarint(dst, uint64(len(b.Items)))
	for _, it := range b.Items {
		dst = binary.AppendUvarint(dst, it.Index)
		dst = binary.AppendUvarint(dst, uint64(len(it.Puzzle)))
		dst = append(dst, it.Puzzle...)
	}
	return dst
}

// ErrDecode is matched (errors.Is) by every error Decode returns.
var ErrDecode = errors.New("queue: undecodable message")

// DecodeError says where and why a message body did not decode.
type DecodeError struct {
	Offset int    // byte offset in the body
	Reason string // what was wrong there
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("queue: undecodable message at byte %d: %s", e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrDecode) true.
func (e *DecodeError) Is(target error) bool { return target == ErrDecode }

// Decode decodes a message body. The batch's strings share no memory with
// data. Every error is a *DecodeError.
func Decode(data []byte) (Batch, error) {
	d := decoder{data: data}
	var b Batch
	if len(data) == 0 {
		return b, &DecodeError{0, "empty body"}
	}
	if v := data[0]; v != Version {
		return b, &DecodeError{0, fmt.Sprintf("format version %d, want %d", v, Version)}
	}
	d.off = 1
	b.Flags = d.uvarint("flags")
	idLen := d.uvarint("job id length")
	if d.err == nil && (idLen == 0 || idLen > MaxJobID) {
		d.fail(fmt.Sprintf("job id length %d, want 1-%d", idLen, MaxJobID))
	}
	b.JobID = d.str(idLen, "job id")
	b.Index = d.uvarint("batch index")
	n := d.uvarint("puzzle count")
	if d.err == nil && n > MaxBatch {
		d.fail(fmt.Sprintf("%d puzzles, at most %d", n, MaxBatch))
	}
	// Each item takes at least two bytes: bound the allocation by the body.
	if d.err == nil && n > uint64(len(data)-d.off)/2 {
		d.fail(fmt.Sprintf("%d puzzles cannot fit in the %d bytes left", n, len(data)-d.off))
	}
	if d.err != nil {
		return Batch{}, d.err
	}
	b.Items = make([]Item, n)
	for i := range b.Items {
		b.Items[i].Index = d.uvarint("puzzle index")
		l := d.uvarint("puzzle length")
		if d.err == nil && l > solver.MaxInputLen {
			d.fail(fmt.Sprintf("puzzle %d is %d bytes, at most %d", i, l, solver.MaxInputLen))
		}
		b.Items[i].Puzzle = d.str(l, "puzzle")
		if d.err != nil {
			return Batch{}, d.err
		}
	}
	if d.off != len(data) {
		return Batch{}, &DecodeError{d.off, fmt.Sprintf("%d bytes after the last puzzle", len(data)-d.off)}
	}
	return b, nil
}

// decoder reads a body, keeping the first error.
type decoder struct {
	data []byte
	off  int
	err  error
}

func (d *decoder) fail(reason string) {
	if d.err == nil {
		d.err = &DecodeError{d.off, reason}
	}
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

func (d *decoder) str(n uint64, what string) string {
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.data)-d.off) {
		d.fail(fmt.Sprintf("%s of %d bytes runs past the end", what, n))
		return ""
	}
	s := string(d.data[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}
