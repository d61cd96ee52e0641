package job

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// cacheValues are outcomes in the cache's form: every status of outcomes,
// and a solution whose rows and columns do not sum to 45 (kept packed).
func cacheValues(t testing.TB) map[string]Outcome {
	m := outcomes(t)
	odd := m["unique"]
	odd.Solution[1] = odd.Solution[0] // row 1 repeats a digit
	m["sums not 45"] = odd
	return m
}

func TestCacheValueRoundTrip(t *testing.T) {
	for name, o := range cacheValues(t) {
		t.Run(name, func(t *testing.T) {
			v := AppendCacheValue(nil, &o)
			got, err := DecodeCacheValue(v)
			if err != nil {
				t.Fatal(err)
			}
			want := o
			want.Cached = false
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
			}
			// Only a solution that sums to 45 is dense, and the results'
			// decoder (the wire form) never takes a dense one.
			dense := HasSolution(o.Status) && name != "sums not 45"
			if v[0]&denseBit != 0 != dense {
				t.Errorf("status byte %#x: dense %v, want %v", v[0], !dense, dense)
			}
			if _, err := DecodeOutcome(v); (err != nil) != dense {
				t.Errorf("DecodeOutcome of the cache form: %v, want an error %v", err, dense)
			}
			// The compact form is a cache value too (values cached before
			// the ranks).
			if back, err := DecodeCacheValue(EncodeOutcome(&want)); err != nil || !reflect.DeepEqual(back, want) {
				t.Errorf("DecodeCacheValue of the compact form = %+v, %v", back, err)
			}
		})
	}
}

func TestCacheValueIsSmall(t *testing.T) {
	// A solved puzzle with few guesses takes 41 bytes: within the 44 that
	// Redis keeps in one allocation with its object.
	o := outcomes(t)["unique"]
	if n := len(AppendCacheValue(nil, &o)); n != 1+1+maskLen+denseLen || n > 44 {
		t.Errorf("cache value of %d bytes, want %d", n, 1+1+maskLen+denseLen)
	}
}

func TestDenseSolutions(t *testing.T) {
	// Solutions made from one by relabelling digits and permuting rows
	// and columns within bands and stacks, and the bands and stacks: each
	// takes the dense form and decodes back.
	base := grid(t, solution)
	rng := rand.New(rand.NewPCG(1, 2))
	n := 2000
	if testing.Short() {
		n = 200
	}
	for range n {
		digits := rng.Perm(9)
		rows, cols := shuffled(rng), shuffled(rng)
		var g solver.Grid
		for r := range 9 {
			for c := range 9 {
				g[9*r+c] = uint8(digits[base[9*rows[r]+cols[c]]-1] + 1)
			}
		}
		if completed(&g) != g || !sums45(&g) {
			t.Fatalf("%s: does not complete to itself", g.String())
		}
		b := appendDense(nil, &g)
		if len(b) != denseLen {
			t.Fatalf("dense form of %d bytes, want %d", len(b), denseLen)
		}
		d := decoder{data: b, dense: true}
		if back := d.denseGrid("solution"); d.err != nil || back != g {
			t.Fatalf("%s: decoded %s, %v", g.String(), back.String(), d.err)
		}
	}
}

// shuffled returns an order of 9 rows (or columns) that keeps a Sudoku
// solution one: bands in any order, rows within each in any order.
func shuffled(rng *rand.Rand) []int {
	var order []int
	for _, band := range rng.Perm(3) {
		for _, r := range rng.Perm(3) {
			order = append(order, 3*band+r)
		}
	}
	return order
}

// badCacheValues are values DecodeCacheValue refuses, with what its error
// says.
func badCacheValues(t testing.TB) []struct {
	name, want string
	data       []byte
} {
	o := outcomes(t)["unique"]
	good := AppendCacheValue(nil, &o)
	with := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	none := outcomes(t)["none"]
	return []struct {
		name, want string
		data       []byte
	}{
		{"pair past 80", "pair 1 has value 127, past 80", with(func(b []byte) []byte { b[13] |= 127; return b })},
		{"sums not 45", "do not sum to 45", with(func(b []byte) []byte {
			b[13] = b[13]&^127 | 80 // the first two cells 9 and 9
			return b
		})},
		{"short", "runs past the end", with(func(b []byte) []byte { return b[:len(b)-1] })},
		{"long", "1 bytes after the outcome", with(func(b []byte) []byte { return append(b, 0) })},
		{"dense without a solution", "status none with a dense solution",
			func() []byte { b := EncodeOutcome(&none); b[0] |= denseBit; return b }()},
		{"unknown status", "unknown status code 71", with(func(b []byte) []byte { b[0] = denseBit | 7; return b })},
	}
}

func TestDecodeCacheValueErrors(t *testing.T) {
	for _, tc := range badCacheValues(t) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCacheValue(tc.data)
			var de *DecodeError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeCacheValue(% x) = %v, want a *DecodeError saying %q", tc.data, err, tc.want)
			}
		})
	}
}

func FuzzDecodeCacheValue(f *testing.F) {
	for _, o := range cacheValues(f) {
		f.Add(AppendCacheValue(nil, &o))
		f.Add(EncodeOutcome(&o))
	}
	for _, tc := range badCacheValues(f) {
		f.Add(tc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := DecodeCacheValue(data)
		if err != nil {
			return
		}
		// What decodes encodes to a value that decodes the same.
		back, err := DecodeCacheValue(AppendCacheValue(nil, &o))
		o.Cached = false
		if err != nil || !reflect.DeepEqual(back, o) {
			t.Fatalf("% x: decoded %+v; again %+v, %v", data, o, back, err)
		}
		if data[0]&denseBit != 0 && (completed(&o.Solution) != o.Solution || !sums45(&o.Solution)) {
			t.Fatalf("% x: a dense solution decoded to one that does not complete to itself", data)
		}
	})
}

func BenchmarkCacheValue(b *testing.B) {
	o := outcomes(b)["unique"]
	v := AppendCacheValue(nil, &o)
	b.Run("append", func(b *testing.B) {
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf = AppendCacheValue(buf[:0], &o)
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeCacheValue(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	c := EncodeOutcome(&o)
	b.Run("decode-compact", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeOutcome(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append-compact", func(b *testing.B) {
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf = AppendOutcome(buf[:0], &o)
		}
	})
}
