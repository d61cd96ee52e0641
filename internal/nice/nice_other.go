//go:build !linux

package nice

func thread(int) error { return ErrUnsupported }

// Of returns the nice value of thread tid: unknown here.
func Of(int) (int, error) { return 0, ErrUnsupported }
