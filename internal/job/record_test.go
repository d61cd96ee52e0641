package job

import (
	"crypto/sha256"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

func TestKeyOfIsGridKey(t *testing.T) {
	for _, p := range []string{puzzle, solution, strings.Repeat(".", 81)} {
		g := grid(t, p)
		k := KeyOf(&g)
		if k.String() != g.Key() {
			t.Errorf("KeyOf(%s) = %s, Grid.Key = %s", p, k, g.Key())
		}
		back, err := ParseKey(g.Key())
		if err != nil || back != k {
			t.Errorf("ParseKey(%s) = %s, %v", g.Key(), back, err)
		}
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("A", 64), strings.Repeat("0", 63)} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted it", bad)
		}
	}
	if n := testing.AllocsPerRun(100, func() { g := grid(t, puzzle); _ = KeyOf(&g) }); n > 0 {
		t.Errorf("KeyOf allocates %.0f times", n)
	}
}

func TestNewIDSortsByTime(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	a := NewID("alice")
	time.Sleep(3 * time.Millisecond)
	b := NewID("alice")
	after := time.Now()
	for _, id := range []string{a, b} {
		if !ValidID(id) || len(id) != len("alice.")+26 || OwnerOf(id) != "alice" {
			t.Fatalf("NewID(alice) = %q: not a valid id of alice's with a serial of 26 characters", id)
		}
	}
	ta, err := IDTime(a)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := IDTime(b)
	if err != nil {
		t.Fatal(err)
	}
	if ta.Before(before) || tb.After(after) || !tb.After(ta) {
		t.Errorf("ids made at %v..%v carry %v and %v", before, after, ta, tb)
	}
	if a >= b {
		t.Errorf("ids do not sort by time: %s then %s", a, b)
	}
	if a == NewID("alice") {
		t.Error("two ids are equal")
	}
	for _, bad := range []string{"not-an-id", "06h436ut63lo4bmi9rl1oeo4t8", "alice.xyz", "a.b.c", ".06h436ut63lo4bmi9rl1oeo4t8"} {
		if _, err := IDTime(bad); err == nil {
			t.Errorf("IDTime(%q) did not fail", bad)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{ID: NewID("alice"), State: Finished, Options: Options{FirstSolution: true, BatchSize: 256},
		Counts:  map[result.Status]int64{result.StatusUnique: 8, result.StatusInvalid: 1, result.StatusGaveUp: 1},
		Created: time.Now().UTC().Truncate(time.Millisecond), Finished: time.Now().UTC(), ResultsFrom: 1207, Tally: Tally{Lines: 10, Invalid: 1, Cached: 2, Repeated: 3, Queued: 4, Batches: 1}}
	got, err := DecodeRecord(r.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
	}
	if f := got.Unsolved(); f != 2 {
		t.Errorf("Unsolved = %d, want 2", f)
	}
	for _, bad := range []string{`{`, `{"v":2,"id":"a"}`, `{"v":1,"id":"a.b.c"}`, `{"v":1,"id":"06h436ut63lo4bmi9rl1oeo4t8"}`} {
		if _, err := DecodeRecord([]byte(bad)); err == nil {
			t.Errorf("DecodeRecord(%s) accepted it", bad)
		}
	}
}

func TestManifest(t *testing.T) {
	m := Manifest{Chunk: 2}
	for i := range ManifestSpan - 1 {
		var d Digest
		d[0], d[15] = byte(i), 0xee
		m.Digests = append(m.Digests, d)
	}
	got, err := DecodeManifest(2, m.Encode())
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if d, ok := got.Lookup(2*ManifestSpan + 5); !ok || d[0] != 5 {
		t.Errorf("Lookup(batch 133) = %x, %v", d, ok)
	}
	for _, index := range []uint64{0, ManifestSpan*2 - 1, 3*ManifestSpan - 1, 3 * ManifestSpan} {
		if _, ok := got.Lookup(index); ok {
			t.Errorf("Lookup(%d) found a digest outside the manifest", index)
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1, 1, 2}, append([]byte{1}, make([]byte, DigestLen*(ManifestSpan+1))...)} {
		if _, err := DecodeManifest(0, bad); err == nil {
			t.Errorf("DecodeManifest(%x) accepted it", bad)
		}
	}
	if k := ManifestKey("abc", 7); k != "abc.m.7" {
		t.Errorf("ManifestKey = %q", k)
	}
}

func TestCounts(t *testing.T) {
	os := outcomes(t)
	// A repeat of an item of the batch counts as that item; one of an
	// item before the batch as a repeat.
	items := []Item{{Kind: Known, Outcome: os["unique"]}, {Kind: Known, Outcome: os["unique"]},
		{Kind: Known, Outcome: os["invalid"]}, {Kind: Repeat, Back: 2}, {Kind: Repeat, Back: 9}}
	c := CountItems(items)
	if s := c.String(); s != "invalid=1 repeat=1 unique=3" {
		t.Errorf("String = %q", s)
	}
	back, err := ParseCounts(c.String())
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("ParseCounts = %v, %v", back, err)
	}
	for _, bad := range []string{"unique", "unique=x", "nope=1", "unique=-1"} {
		if _, err := ParseCounts(bad); err == nil {
			t.Errorf("ParseCounts(%q) accepted it", bad)
		}
	}
}

func TestPacked(t *testing.T) {
	g := grid(t, puzzle)
	p := AppendPacked(nil, &g)
	if len(p) != PackedLen {
		t.Fatalf("packed into %d bytes", len(p))
	}
	back, err := Unpack(p)
	if err != nil || back != g {
		t.Errorf("Unpack = %v, %v", back, err)
	}
	if _, err := Unpack(p[:40]); err == nil {
		t.Error("Unpack of 40 bytes accepted it")
	}
	var hi solver.Grid
	hi[3] = 15
	back, err = Unpack(AppendPacked(nil, &hi))
	if err != nil || back != hi {
		t.Errorf("a cell of 15 did not round trip: %v, %v", back, err)
	}
}

// sampleGrids are grids for the word-wise codecs: every cell alone with
// every value below 16, and random grids of every density.
func sampleGrids() []solver.Grid {
	var grids []solver.Grid
	for i := range 81 {
		for v := byte(1); v < 16; v++ {
			var g solver.Grid
			g[i] = v
			grids = append(grids, g)
		}
	}
	rng := uint64(7)
	for n := range 200 {
		var g solver.Grid
		for i := range g {
			rng = rng*6364136223846793005 + 1442695040888963407
			if int(rng>>57)%100 < n/2 {
				g[i] = byte(rng>>40)%15 + 1
			}
		}
		grids = append(grids, g)
	}
	return grids
}

// TestGivensMask checks the word-wise mask against the cells one by one.
func TestGivensMask(t *testing.T) {
	naive := func(g *solver.Grid) (m [maskLen]byte) {
		for i, v := range g {
			if v != 0 {
				m[i/8] |= 1 << (i % 8)
			}
		}
		return m
	}
	for _, g := range sampleGrids() {
		if got, want := givensMask(&g), naive(&g); got != want {
			t.Fatalf("givensMask(%v) = %x, want %x", g, got, want)
		}
	}
}

// TestPackWordwise checks the word-wise Pack and Unpack against the cells
// one by one, and that every packed grid unpacks to itself.
func TestPackWordwise(t *testing.T) {
	naive := func(g *solver.Grid) (p [PackedLen]byte) {
		for i, v := range g {
			p[i/2] |= v << (4 * (1 - i%2))
		}
		return p
	}
	for _, g := range sampleGrids() {
		p := Pack(&g)
		if want := naive(&g); p != want {
			t.Fatalf("Pack(%v) = %x, want %x", g, p, want)
		}
		back, err := Unpack(p[:])
		if err != nil || back != g {
			t.Fatalf("Unpack(%x) = %v, %v; want %v", p, back, err, g)
		}
	}
	// Every byte value in every place unpacks to its two nibbles.
	for i := range PackedLen - 1 {
		for v := range 256 {
			var p [PackedLen]byte
			p[i] = byte(v)
			g, err := Unpack(p[:])
			var want solver.Grid
			want[2*i], want[2*i+1] = byte(v)>>4, byte(v)&15
			if err != nil || g != want {
				t.Fatalf("Unpack of %#x at byte %d = %v, %v", v, i, g, err)
			}
		}
	}
}

// TestKeyOfEveryByte checks that KeyOf hashes the canonical form
// (solver.Grid.String) of any grid, valid or not, one byte changed at a
// time.
func TestKeyOfEveryByte(t *testing.T) {
	base := grid(t, puzzle)
	for p := range 81 {
		for b := range 256 {
			g := base
			g[p] = uint8(b)
			if got, want := KeyOf(&g), Key(sha256.Sum256([]byte(g.String()))); got != want {
				t.Fatalf("byte %#x at cell %d: KeyOf %s, want %s", b, p+1, got, want)
			}
		}
	}
}
