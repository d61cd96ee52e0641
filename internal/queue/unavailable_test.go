package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"no response from stream (jetstream)", fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), true},
		{"no response from stream (nats)", fmt.Errorf("publish: %w", nats.ErrNoStreamResponse), true},
		{"a request out of time", fmt.Errorf("update record: %w", context.DeadlineExceeded), true},
		{"no responders", nats.ErrNoResponders, true},
		{"disconnected", nats.ErrDisconnected, true},
		{"a 503 from the API", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{"a 400 from the API", &jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence"}, false},
		{"cancelled", context.Canceled, false},
		{"anything else", errors.New("results do not answer the batch"), false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
