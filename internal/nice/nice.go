// Package nice lowers the CPU priority of this process, so that a worker's
// solving yields the cores to whatever shares its machine: the NATS and
// Redis servers, the HTTP API, and the clients submitting and waiting.
// On a machine of its own a process at a lower priority runs as fast as
// at the default one; it only gives way when something else wants the
// same core.
package nice

import "fmt"

// Max is the lowest priority: nice values run from 0 (the default) to 19.
const Max = 19

// Lower sets the nice value of every thread of this process to n (1 to
// Max), and so of every thread it starts later. It can only lower the
// priority, which needs no privilege; n = 0 does nothing.
func Lower(n int) error {
	if n == 0 {
		return nil
	}
	if n < 0 || n > Max {
		return fmt.Errorf("nice: %d is not between 0 and %d", n, Max)
	}
	if err := lower(n); err != nil {
		return fmt.Errorf("nice: set %d: %w", n, err)
	}
	return nil
}
