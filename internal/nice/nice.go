// Package nice lowers the CPU priority of a thread, so that a worker's
// bulk solving yields the cores to whatever shares its machine: the NATS
// and Redis servers, the HTTP API, the worker's own endpoints, and the
// clients submitting and waiting. A thread at a lower priority runs as
// fast as at the default one when nothing else wants its core; it only
// gives way when something does.
package nice

import (
	"errors"
	"fmt"
)

// Max is the lowest priority: nice values run from 0 (the default) to 19.
const Max = 19

// ErrUnsupported is returned where a thread's priority cannot be set
// apart from its process's (every system but Linux).
var ErrUnsupported = errors.New("nice: a thread's own priority is not supported on this system")

// Thread sets the nice value of the calling thread to n (1 to Max); n = 0
// does nothing. Lock the goroutine to its thread first
// (runtime.LockOSThread) and never unlock it: the thread then ends with
// the goroutine instead of running others at the lower priority. Lowering
// a priority needs no privilege; raising it again would.
func Thread(n int) error {
	if n == 0 {
		return nil
	}
	if n < 0 || n > Max {
		return fmt.Errorf("nice: %d is not between 0 and %d", n, Max)
	}
	if err := thread(n); err != nil {
		return fmt.Errorf("nice: set %d: %w", n, err)
	}
	return nil
}
