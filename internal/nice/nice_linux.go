package nice

import "golang.org/x/sys/unix"

// thread sets n on the calling thread: on Linux a nice value belongs to a
// thread (setpriority's PRIO_PROCESS with a thread id).
func thread(n int) error { return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), n) }

// Of returns the nice value of thread tid (0: the calling thread).
func Of(tid int) (int, error) {
	if tid == 0 {
		tid = unix.Gettid()
	}
	p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	return 20 - p, err // getpriority returns 20 - nice
}
