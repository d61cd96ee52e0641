//go:build !unix

package nice

import "errors"

func lower(int) error { return errors.New("not supported on this system") }
