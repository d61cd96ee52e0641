package nice

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// lower sets n on each thread: on Linux a nice value belongs to a thread
// (setpriority's PRIO_PROCESS with a thread id), and a new thread takes
// the value of the thread that starts it. The runtime may start a thread
// while the list is walked, so it is walked again until every thread
// seen has n.
func lower(n int) error {
	for range 10 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			// No /proc: the calling thread, which starts the others.
			return unix.Setpriority(unix.PRIO_PROCESS, 0, n)
		}
		changed := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			// Getpriority returns 20 - nice.
			if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil && 20-p == n {
				continue
			}
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil && err != unix.ESRCH {
				return err
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return nil
}
