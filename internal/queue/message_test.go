package queue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

const puzzle = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."

// roundTrips are batches that encode and decode back to themselves.
var roundTrips = []struct {
	name string
	b    Batch
}{
	{"one puzzle", Batch{JobID: "06h2mh1cqjj76oiu2cdedqhn68", Index: 3, Items: []Item{{Index: 768, Puzzle: puzzle}}}},
	{"no puzzles", Batch{JobID: "j", Items: []Item{}}},
	{"both flags", Batch{JobID: "j", Flags: FlagCacheChecked | FlagFirstSolution, Items: []Item{{Puzzle: puzzle}}}},
	{"unknown flags kept", Batch{JobID: "j", Flags: 1 << 40, Items: []Item{}}},
	{"longest job id", Batch{JobID: strings.Repeat("x", MaxJobID), Items: []Item{{Puzzle: puzzle}}}},
	{"largest numbers", Batch{JobID: "j", Index: 1<<64 - 1, Items: []Item{{Index: 1<<64 - 1, Puzzle: puzzle}}}},
	{"empty puzzle", Batch{JobID: "j", Items: []Item{{Index: 1, Puzzle: ""}}}},
	{"longest puzzle", Batch{JobID: "j", Items: []Item{{Puzzle: strings.Repeat(".", solver.MaxInputLen)}}}},
	{"any bytes", Batch{JobID: "a b\x00\xff.*>", Items: []Item{{Puzzle: "\x00\r\n\xef\xbc\x91<b>"}}}},
	{"grid format", Batch{JobID: "j", Items: []Item{{Puzzle: strings.Repeat("..3 .2. ...\n", 9)}}}},
	{"many puzzles", Batch{JobID: "j", Index: 7, Items: manyItems(1000)}},
	{"packed", Batch{JobID: "j", Flags: FlagPacked | FlagCacheChecked, Items: []Item{{Puzzle: packed(puzzle)}, {Index: 1, Puzzle: packed(puzzle)}}}},
}

// packed returns the packed form of a valid puzzle.
func packed(p string) string {
	g, err := solver.Parse(p)
	if err != nil {
		panic(err)
	}
	return string(PackGrid(nil, &g))
}

func manyItems(n int) []Item {
	its := make([]Item, n)
	for i := range its {
		its[i] = Item{Index: uint64(1000 + i), Puzzle: puzzle}
	}
	return its
}

// head returns the encoding of a batch header: version 1, flags 0, job id
// "j", batch index 0, then count (when >= 0).
func head(count int) []byte {
	b := []byte{Version, 0, 1, 'j', 0}
	if count >= 0 {
		b = binary.AppendUvarint(b, uint64(count))
	}
	return b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// decodeErrors has a body for every reason Decode gives, with the offset
// it names.
var decodeErrors = []struct {
	name   string
	in     []byte
	offset int
	reason string // the start of DecodeError.Reason
}{
	{"empty body", nil, 0, "empty body"},
	{"version 0", []byte{0}, 0, "format version 0, want 1"},
	{"version 2", cat([]byte{2}, head(0)[1:]), 0, "format version 2, want 1"},
	{"no flags", []byte{Version}, 1, "bad or missing flags"},
	{"flags overflow", cat([]byte{Version}, bytes.Repeat([]byte{0xff}, 10), []byte{1}), 1, "bad or missing flags"},
	{"no job id length", []byte{Version, 0}, 2, "bad or missing job id length"},
	{"empty job id", []byte{Version, 0, 0, 0, 0}, 3, "job id length 0, want 1-64"},
	{"job id too long", cat([]byte{Version, 0, 65}, bytes.Repeat([]byte{'x'}, 65), []byte{0, 0}), 3, "job id length 65, want 1-64"},
	{"job id cut short", []byte{Version, 0, 3, 'a', 'b'}, 3, "job id of 3 bytes runs past the end"},
	{"no batch index", []byte{Version, 0, 1, 'j'}, 4, "bad or missing batch index"},
	{"no puzzle count", head(-1), 5, "bad or missing puzzle count"},
	{"too many puzzles", cat(head(MaxBatch+1), make([]byte, 2*(MaxBatch+1))), 8, "100001 puzzles, at most 100000"},
	{"count past the body", cat(head(5), []byte{0, 0, 0}), 6, "5 puzzles cannot fit in the 3 bytes left"},
	{"huge count", cat(head(-1), binary.AppendUvarint(nil, 1<<62)), 14, "4611686018427387904 puzzles, at most 100000"},
	{"no puzzle index", cat(head(1), []byte{0x80, 0x80}), 6, "bad or missing puzzle index"},
	{"no puzzle length", cat(head(1), []byte{0, 0x80}), 7, "bad or missing puzzle length"},
	{"puzzle too long", cat(head(1), []byte{0}, binary.AppendUvarint(nil, solver.MaxInputLen+1)), 9, "puzzle 0 is 4097 bytes, at most 4096"},
	{"puzzle cut short", cat(head(1), []byte{0, 5, 'a', 'b'}), 8, "puzzle of 5 bytes runs past the end"},
	{"second puzzle cut short", cat(head(2), []byte{0, 1, 'a', 1, 3, 'b'}), 11, "puzzle of 3 bytes runs past the end"},
	{"bytes after the last puzzle", cat(head(1), []byte{0, 1, 'a', 0, 0}), 9, "2 bytes after the last puzzle"},
	{"bytes after no puzzles", cat(head(0), []byte{7}), 6, "1 bytes after the last puzzle"},
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range roundTrips {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.b.Append(nil)
			got, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.b) {
				t.Fatalf("decoded %+v, want %+v", got, tc.b)
			}
			// The batch owns its strings: changing the body changes nothing.
			for i := range data {
				data[i] ^= 0xff
			}
			if !reflect.DeepEqual(got, tc.b) {
				t.Fatal("the decoded batch shares memory with the body")
			}
			// Append appends.
			if pre := tc.b.Append([]byte("xy")); !bytes.Equal(pre[2:], tc.b.Append(nil)) || string(pre[:2]) != "xy" {
				t.Fatal("Append does not append to dst")
			}
		})
	}
}

func TestPackGrid(t *testing.T) {
	for _, p := range []string{puzzle, strings.Repeat(".", 81), "123456789456789123789123456214365897365897214897214365531642978642978531978531642"} {
		g, err := solver.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		b := PackGrid([]byte("x"), &g)
		if len(b) != 1+PackedLen || b[0] != 'x' || b[PackedLen]&15 != 0 {
			t.Fatalf("PackGrid(%s) = %x", p, b)
		}
		back, err := UnpackGrid(string(b[1:]))
		if err != nil || back != g {
			t.Fatalf("UnpackGrid(PackGrid(%s)) = %s, %v", p, back.String(), err)
		}
	}
	for _, n := range []int{0, PackedLen - 1, PackedLen + 1, 81} {
		if _, err := UnpackGrid(strings.Repeat("\x11", n)); err == nil {
			t.Errorf("UnpackGrid of %d bytes: no error", n)
		}
	}
	// A nibble above 9 is not UnpackGrid's to judge: validation reports it.
	g, err := UnpackGrid(strings.Repeat("\xff", PackedLen))
	if err != nil {
		t.Fatal(err)
	}
	if g.Validate() == nil {
		t.Fatal("a grid of 15s validates")
	}
}

func TestMsgID(t *testing.T) {
	b := Batch{JobID: "06h2mh1cqjj76oiu2cdedqhn68", Index: 12}
	if got := b.MsgID(); got != "06h2mh1cqjj76oiu2cdedqhn68.12" {
		t.Fatalf("MsgID %q", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range decodeErrors {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Decode(tc.in)
			if err == nil {
				t.Fatalf("Decode(%x) = %+v, want an error", tc.in, b)
			}
			if !errors.Is(err, ErrDecode) {
				t.Errorf("%v does not match ErrDecode", err)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("%T is not a *DecodeError", err)
			}
			if de.Offset != tc.offset || !strings.HasPrefix(de.Reason, tc.reason) {
				t.Errorf("offset %d reason %q, want %d %q", de.Offset, de.Reason, tc.offset, tc.reason)
			}
			if want := "queue: undecodable message at byte "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%q does not start with %q", err.Error(), want)
			}
			if !reflect.DeepEqual(b, Batch{}) {
				t.Errorf("a failed Decode returned %+v, want the zero Batch", b)
			}
		})
	}
}

func TestDecodeErrorText(t *testing.T) {
	_, err := Decode([]byte{Version, 0, 3, 'a'})
	if got, want := err.Error(), "queue: undecodable message at byte 3: job id of 3 bytes runs past the end"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// minimalVarints reports whether every number in a body that Decode
// accepts is written in as few bytes as it takes. Decode also accepts
// longer forms (0x80 0x00 for 0), which Append never writes.
func minimalVarints(data []byte) bool {
	off, ok := 1, true
	num := func() uint64 {
		v, n := binary.Uvarint(data[off:])
		if n != len(binary.AppendUvarint(nil, v)) {
			ok = false
		}
		off += n
		return v
	}
	num() // flags
	off += int(num())
	num() // batch index
	for n := num(); n > 0; n-- {
		num() // puzzle index
		off += int(num())
	}
	return ok
}

// FuzzDecode checks that no body makes Decode panic or allocate beyond the
// body's size, that every error is a *DecodeError pointing into the body,
// and that a decoded batch encodes back to the same bytes (or, for a body
// with numbers written longer than needed, to a shorter body that decodes
// to the same batch).
func FuzzDecode(f *testing.F) {
	for _, tc := range roundTrips {
		if len(tc.b.Items) < 100 {
			f.Add(tc.b.Append(nil))
		}
	}
	for _, tc := range decodeErrors {
		if len(tc.in) < 1000 {
			f.Add(tc.in)
		}
	}
	f.Add([]byte{Version, 0x80, 0x00, 1, 'j', 0, 0}) // flags 0 in two bytes
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Decode(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
			}
			if de.Offset < 0 || de.Offset > len(data) {
				t.Fatalf("offset %d outside a body of %d bytes", de.Offset, len(data))
			}
			return
		}
		if len(b.JobID) < 1 || len(b.JobID) > MaxJobID || len(b.Items) > MaxBatch {
			t.Fatalf("decoded a batch out of bounds: job id %d bytes, %d puzzles", len(b.JobID), len(b.Items))
		}
		for _, it := range b.Items {
			if len(it.Puzzle) > solver.MaxInputLen {
				t.Fatalf("decoded a puzzle of %d bytes", len(it.Puzzle))
			}
		}
		if b.Flags&FlagPacked != 0 {
			for _, it := range b.Items {
				if g, err := UnpackGrid(it.Puzzle); err == nil {
					_ = g.Validate()
				}
			}
		}
		enc := b.Append(nil)
		if minimalVarints(data) {
			if !bytes.Equal(enc, data) {
				t.Fatalf("%x decodes to %+v, which encodes to %x", data, b, enc)
			}
			return
		}
		if len(enc) >= len(data) {
			t.Fatalf("%x has long numbers but encodes back to %d bytes", data, len(enc))
		}
		again, err := Decode(enc)
		if err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("re-encoded %x decodes to %+v, %v; want %+v", enc, again, err, b)
		}
	})
}
