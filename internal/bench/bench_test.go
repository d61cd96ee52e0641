package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRelabel checks that a relabelling keeps everything but the digits,
// maps each digit to one digit, and differs from run to run.
func TestRelabel(t *testing.T) {
	in := []byte("123456789.# x\n987654321\n")
	for _, r := range []int{0, 1, 2, 7} {
		out := relabel(in, r)
		if len(out) != len(in) {
			t.Fatalf("run %d: %d bytes, want %d", r, len(out), len(in))
		}
		seen := map[byte]byte{}
		for i, c := range in {
			o := out[i]
			isDigit := c >= '1' && c <= '9'
			switch {
			case !isDigit && o != c:
				t.Errorf("run %d: byte %d %q became %q", r, i, c, o)
			case isDigit && (o < '1' || o > '9'):
				t.Errorf("run %d: digit %q became %q", r, c, o)
			case isDigit && seen[c] != 0 && seen[c] != o:
				t.Errorf("run %d: digit %q became %q and %q", r, c, seen[c], o)
			}
			seen[c] = o
		}
	}
	if bytes.Equal(relabel(in, 0), relabel(in, 1)) {
		t.Errorf("runs 0 and 1 relabel alike")
	}
}

func TestQuantileAndMedian(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tt := range []struct {
		name      string
		got, want float64
	}{
		{"median", median(xs), 3},
		{"p50", quantile(xs, 0.5), 3},
		{"p99", quantile(xs, 0.99), 5},
		{"p0", quantile(xs, 0), 1},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if xs[0] != 5 {
		t.Errorf("the input was sorted in place: %v", xs)
	}
}

// TestJobEnds checks that the ends of jobs count once they are both seen
// ending and expected, in either order, and that wait returns then.
func TestJobEnds(t *testing.T) {
	e := newJobEnds()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.mu.Lock()
	e.ended["a.1"] = jobEnd{state: "finished", at: at}
	e.mu.Unlock()
	e.expect("a.1") // ended before it was expected
	e.expect("a.2")
	if n := e.count(); n != 1 {
		t.Fatalf("count %d, want 1", n)
	}
	e.mu.Lock()
	e.ended["a.2"] = jobEnd{state: "failed", at: at.Add(time.Second)}
	e.grewLocked(at.Add(time.Second))
	e.mu.Unlock()
	if err := e.wait(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if got := e.last(); !got.Equal(at.Add(time.Second)) {
		t.Errorf("last end %v, want %v", got, at.Add(time.Second))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.wait(ctx, 3); err == nil {
		t.Errorf("wait for 3 of 2 jobs returned nil")
	}
}

func TestJobBodies(t *testing.T) {
	data, err := os.ReadFile("../cli/testdata/17_clue_200.txt")
	if err != nil {
		t.Skip(err)
	}
	bodies, err := jobBodies(bytes.NewReader(data), "17_clue_200.txt", JobsOptions{Jobs: 3, Puzzles: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 3 {
		t.Fatalf("%d bodies, want 3", len(bodies))
	}
	for i, b := range bodies {
		if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(lines) != 4 || len(lines[0]) != 81 {
			t.Errorf("body %d: %q: want 4 lines of 81 characters", i, b)
		}
	}
	if _, err := jobBodies(strings.NewReader("not a puzzle\n"), "bad.txt", JobsOptions{Jobs: 1, Puzzles: 1, Seed: 1}); err == nil ||
		!strings.Contains(err.Error(), "bad.txt") {
		t.Errorf("a file without puzzles: %v, want an error naming it", err)
	}
}

func TestProcCPU(t *testing.T) {
	if procCPU(0) != 0 {
		t.Errorf("procCPU(0) is not 0")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if procCPU(os.Getpid()) < 0 {
		t.Errorf("negative CPU time")
	}
}
