package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestSetupLeavesSharedSettingsAlone checks that a client with other
// settings uses the streams and consumer as they are, and that a worker
// (Update) brings them to its own.
func TestSetupLeavesSharedSettingsAlone(t *testing.T) {
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			ctx := context.Background()
			q := testenv.NewQueue(t, server, queue.Options{AckWait: 30 * time.Second, Retention: time.Hour, Update: true})
			o := q.Opts
			check := func(ackWait, maxAge time.Duration) {
				t.Helper()
				c, err := q.JS.Consumer(ctx, o.Stream, o.Consumer+"-bulk")
				if err != nil {
					t.Fatal(err)
				}
				s, err := q.JS.Stream(ctx, o.ResultsStream())
				if err != nil {
					t.Fatal(err)
				}
				if got := c.CachedInfo().Config.AckWait; got != ackWait {
					t.Errorf("ack wait %v, want %v", got, ackWait)
				}
				if got := s.CachedInfo().Config.MaxAge; got != maxAge {
					t.Errorf("results max age %v, want %v", got, maxAge)
				}
			}
			other := o
			other.AckWait, other.Retention, other.Update = 5*time.Second, time.Minute, false
			if _, err := queue.Setup(ctx, q.JS, other); err != nil {
				t.Fatal(err)
			}
			check(30*time.Second, time.Hour)
			other.Update = true
			if _, err := queue.Setup(ctx, q.JS, other); err != nil {
				t.Fatal(err)
			}
			check(5*time.Second, time.Minute)
			// A client creates what is missing.
			if err := q.JS.DeleteStream(ctx, o.DLQStream); err != nil {
				t.Fatal(err)
			}
			other.Update = false
			if _, err := queue.Setup(ctx, q.JS, other); err != nil {
				t.Fatal(err)
			}
			if _, err := q.JS.Stream(ctx, o.DLQStream); err != nil {
				t.Errorf("the dead-letter stream was not created again: %v", err)
			}
		})
	}
}
