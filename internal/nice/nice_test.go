//go:build linux

package nice

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary the helper process of TestLower: it
// calls Lower with the value the variable holds, starts threads, and
// prints the nice value of every thread it then has.
const helperEnv = "NICE_TEST_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(helper(v))
	}
	os.Exit(m.Run())
}

func helper(v string) int {
	n, _ := strconv.Atoi(v)
	if err := Lower(n); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	// Threads started after Lower: goroutines locked to threads of their
	// own, all alive while the threads are listed.
	var started, done sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			started.Done()
			<-stop
		}()
	}
	started.Wait()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	var out []string
	for _, t := range tasks {
		tid, _ := strconv.Atoi(t.Name())
		p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if err != nil {
			continue // the thread ended
		}
		out = append(out, strconv.Itoa(20-p))
	}
	close(stop)
	done.Wait()
	os.Stdout.WriteString(strings.Join(out, " ") + "\n")
	return 0
}

// TestLower checks that Lower sets its value on every thread of the
// process, those it had and those it starts after, and that a value out
// of range is refused with its range, changing nothing.
func TestLower(t *testing.T) {
	self, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := 20 - self // the test's own nice value, inherited
	tests := []struct {
		n       int
		want    int
		wantErr string
	}{
		{n: 0, want: base},
		{n: 7, want: max(7, base)},
		{n: Max, want: Max},
		{n: -1, wantErr: "-1 is not between 0 and 19"},
		{n: 20, wantErr: "20 is not between 0 and 19"},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			if tc.wantErr != "" {
				err := Lower(tc.n)
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Lower(%d) = %v, want an error saying %q", tc.n, err, tc.wantErr)
				}
				if p, _ := unix.Getpriority(unix.PRIO_PROCESS, 0); p != self {
					t.Fatalf("a refused Lower(%d) changed this thread's priority", tc.n)
				}
				return
			}
			if tc.n > 0 && tc.n < base {
				t.Skipf("the test runs at nice %d already", base)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+strconv.Itoa(tc.n))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helper: %v %s", err, out)
			}
			fields := strings.Fields(string(out))
			if len(fields) < 5 { // the main thread and the 4 started
				t.Fatalf("helper listed %d threads, want at least 5: %q", len(fields), out)
			}
			for i, f := range fields {
				if f != strconv.Itoa(tc.want) {
					t.Errorf("thread %d of %d has nice %s, want %d", i+1, len(fields), f, tc.want)
				}
			}
		})
	}
}
