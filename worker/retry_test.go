package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRetryUnavailable checks that a step is tried again while JetStream
// does not answer, and only then: not after another error, nor past its
// bound, nor once its context ends.
func TestRetryUnavailable(t *testing.T) {
	down := fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse)
	other := errors.New("results do not answer the batch")
	for _, tc := range []struct {
		name      string
		fails     []error // the errors of the first calls, then nil
		d         time.Duration
		cancelled bool
		wantCalls int
		wantErr   error
	}{
		{"at once", nil, time.Minute, false, 1, nil},
		{"after an outage", []error{down, down, down}, time.Minute, false, 4, nil},
		{"another error is not tried again", []error{other, nil}, time.Minute, false, 1, other},
		{"unavailable then another error", []error{down, other}, time.Minute, false, 2, other},
		// 100 ms, then 200 ms: the second wait would pass the bound (a
		// slow machine may stop after the first call: 0 means "fewer than
		// the failures").
		{"past its bound", []error{down, down, down, down, down, down, down}, 250 * time.Millisecond, false, 0, down},
		{"its context ended", []error{down, down}, time.Minute, true, 1, down},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			calls := 0
			err := retryUnavailable(ctx, tc.d, func() error {
				calls++
				if calls <= len(tc.fails) {
					return tc.fails[calls-1]
				}
				return nil
			})
			callsOK := calls == tc.wantCalls || tc.wantCalls == 0 && calls < len(tc.fails)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || !callsOK {
				t.Errorf("retryUnavailable: %v after %d calls, want %v after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}
