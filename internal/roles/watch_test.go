package roles_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/roles"
)

// TestRefusalsWatch checks that a watched request's context ends at once
// when a publish to its subject is refused, with the refusal as its
// cause, and not for another subject, a subscription refused or another
// error; and that a stopped watch is not cancelled by a later refusal.
func TestRefusalsWatch(t *testing.T) {
	const subject = "$JS.API.STREAM.MSG.DELETE.SUDOKU_RESULTS"
	publish := func(s string) error {
		return fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Publish to "`+s+`"`)
	}
	for _, tc := range []struct {
		name    string
		noted   error
		stopped bool // the watch stopped before the refusal
		ends    bool
	}{
		{"its subject refused", publish(subject), false, true},
		{"another subject refused", publish("$JS.API.STREAM.PURGE.SUDOKU"), false, false},
		{"a subscription refused", fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Subscription to "`+subject+`"`), false, false},
		{"another error", errors.New("nats: slow consumer"), false, false},
		{"refused after the watch stopped", publish(subject), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := roles.NewRefusals("worker")
			ctx, stop := ref.Watch(context.Background(), subject)
			defer stop()
			if tc.stopped {
				stop()
			}
			ref.Note(tc.noted)
			var pe *roles.PermissionError
			gotPE := errors.As(context.Cause(ctx), &pe)
			if gotPE != tc.ends {
				t.Fatalf("cause %v; want a refusal: %v", context.Cause(ctx), tc.ends)
			}
			if tc.ends && ctx.Err() == nil {
				t.Error("the context did not end")
			}
		})
	}
	var none *roles.Refusals
	ctx, stop := none.Watch(context.Background(), subject)
	stop()
	if ctx.Err() == nil {
		t.Error("a nil Refusals' watch does not stop")
	}
}
