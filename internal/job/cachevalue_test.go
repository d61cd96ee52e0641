package job

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// cacheValues are outcomes in the cache's form: every status of outcomes,
// and a solution whose rows are not permutations (kept packed).
func cacheValues(t testing.TB) map[string]Outcome {
	m := outcomes(t)
	odd := m["unique"]
	odd.Solution[1] = odd.Solution[0] // row 1 repeats a digit
	m["rows not permutations"] = odd
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
			// Only a solution of permutations is in ranks, and the result
			// decoder (the results' wire form) never takes ranks.
			ranked := HasSolution(o.Status) && name != "rows not permutations"
			if v[0]&rankedBit != 0 != ranked {
				t.Errorf("status byte %#x: ranked %v, want %v", v[0], !ranked, ranked)
			}
			if _, err := DecodeOutcome(v); (err != nil) != ranked {
				t.Errorf("DecodeOutcome of the cache form: %v, want an error %v", err, ranked)
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
	// A solved puzzle with few guesses takes 35 bytes: within the 44 that
	// Redis keeps in one allocation with its object.
	o := outcomes(t)["unique"]
	if n := len(AppendCacheValue(nil, &o)); n != 1+1+maskLen+ranksLen || n > 44 {
		t.Errorf("cache value of %d bytes, want %d", n, 1+1+maskLen+ranksLen)
	}
}

func TestRowRanksEveryPermutation(t *testing.T) {
	// Every permutation of 1-9, in lexicographic order, has the next rank,
	// and decodes back, in every row.
	o := outcomes(t)["unique"]
	row := []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9}
	step := 1
	if testing.Short() {
		step = 97
	}
	for rank := 0; rank < perms; rank++ {
		if rank%step == 0 {
			r := (rank / step) % 9
			copy(o.Solution[9*r:], row)
			ranks, ok := rankRows(&o.Solution)
			if !ok {
				t.Fatalf("rank %d: %v is not a permutation", rank, row)
			}
			if got := rowRank(ranks, r); got != uint64(rank) {
				t.Fatalf("%v in row %d: rank %d, want %d", row, r+1, got, rank)
			}
			d := decoder{data: ranks[:], ranked: true}
			if back := d.ranks("solution"); d.err != nil || back != o.Solution {
				t.Fatalf("rank %d: decoded %v, %v; want %v", rank, back, d.err, o.Solution)
			}
		}
		nextPermutation(row)
	}
}

// rowRank reads row r's rank from ranks.
func rowRank(ranks [ranksLen]byte, r int) uint64 {
	var rank uint64
	for b := range rowRankBits {
		bit := r*rowRankBits + b
		rank |= uint64(ranks[bit/8]>>(bit%8)&1) << b
	}
	return rank
}

// nextPermutation makes p the next permutation in lexicographic order.
func nextPermutation(p []uint8) {
	i := len(p) - 2
	for i >= 0 && p[i] >= p[i+1] {
		i--
	}
	if i < 0 {
		return
	}
	j := len(p) - 1
	for p[j] <= p[i] {
		j--
	}
	p[i], p[j] = p[j], p[i]
	for a, b := i+1, len(p)-1; a < b; a, b = a+1, b-1 {
		p[a], p[b] = p[b], p[a]
	}
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
		{"rank past the last", "row 1 has rank 524287", with(func(b []byte) []byte {
			b[13], b[14], b[15] = 0xff, 0xff, b[15]|7
			return b
		})},
		{"spare bits", "spare bits", with(func(b []byte) []byte { b[len(b)-1] |= 0x80; return b })},
		{"short", "runs past the end", with(func(b []byte) []byte { return b[:len(b)-1] })},
		{"long", "1 bytes after the outcome", with(func(b []byte) []byte { return append(b, 0) })},
		{"ranks without a solution", "status none with a solution in ranks",
			func() []byte { b := EncodeOutcome(&none); b[0] |= rankedBit; return b }()},
		{"unknown status", "unknown status code 71", with(func(b []byte) []byte { b[0] = rankedBit | 7; return b })},
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
		if data[0]&rankedBit != 0 {
			if _, ok := rankRows(&o.Solution); !ok {
				t.Fatalf("% x: ranks decoded to rows that are not permutations", data)
			}
		}
	})
}
