//go:build unix && !linux

package nice

import "golang.org/x/sys/unix"

// lower sets n on the process, which its threads share.
func lower(n int) error { return unix.Setpriority(unix.PRIO_PROCESS, 0, n) }
