//go:build linux

package nice

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestThread checks that Thread sets its value on the calling thread
// only, and that a value out of range is refused with its range, changing
// nothing. Each case runs on a goroutine locked to a thread of its own,
// which ends with it.
func TestThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	base, err := Of(0) // the test's own value, inherited by new threads
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n       int
		want    int
		wantErr string
	}{
		{n: 0, want: base},
		{n: 7, want: max(7, base)},
		{n: Max, want: Max},
		{n: -1, want: base, wantErr: "-1 is not between 0 and 19"},
		{n: 20, want: base, wantErr: "20 is not between 0 and 19"},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			if tc.n > 0 && tc.n < base {
				t.Skipf("the test runs at nice %d already", base)
			}
			type got struct {
				nice int
				err  error
			}
			ch := make(chan got)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread ends
				err := Thread(tc.n)
				n, _ := Of(0)
				ch <- got{n, err}
			}()
			g := <-ch
			if tc.wantErr != "" {
				if g.err == nil || !strings.Contains(g.err.Error(), tc.wantErr) {
					t.Fatalf("Thread(%d) = %v, want an error saying %q", tc.n, g.err, tc.wantErr)
				}
			} else if g.err != nil {
				t.Fatalf("Thread(%d): %v", tc.n, g.err)
			}
			if g.nice != tc.want {
				t.Errorf("after Thread(%d) the thread has nice %d, want %d", tc.n, g.nice, tc.want)
			}
			if n, _ := Of(0); n != base {
				t.Errorf("Thread(%d) on another thread changed this one's nice to %d", tc.n, n)
			}
		})
	}
}
