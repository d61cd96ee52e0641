package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// TestSettingsNeverRewriteTheStreams starts a worker whose settings
// differ from the streams' (issue 22, finding 1: such a worker rewrote
// them, dropping the queued work and every job's results): it refuses to
// start, naming each difference, and changes nothing. 'sudoku setup'
// shows the differences and changes nothing either; 'setup --apply'
// changes them.
func TestSettingsNeverRewriteTheStreams(t *testing.T) {
	e := newQueueEnv(t)
	q := e.queue()
	ctx := context.Background()
	info := func(s string) *jetstream.StreamInfo {
		t.Helper()
		st, err := q.JS.Stream(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo()
	}
	before := info(q.Opts.ResultsStream()).Config.MaxAge
	results := q.Opts.ResultSubject("alice.0123456789abcdefghijklmnop", 0)
	if _, err := q.JS.Publish(ctx, results, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.JS.Publish(ctx, q.Opts.WorkSubject("alice.0123456789abcdefghijklmnop", queue.Lane{Owner: "alice", Priority: job.PriorityNormal, Slot: queue.SlotSmall}), []byte("queued")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SUDOKU_QUEUE_MAX_AGE", "1s")
	t.Setenv("SUDOKU_JOB_RESULT_TTL", "2s")
	t.Setenv("SUDOKU_QUEUE_CONSUMER", e.prefix+"-rogue")

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	code, _, stderr := run(t, wctx, "", "worker")
	if code == ExitOK || wctx.Err() != nil {
		t.Fatalf("worker with other settings: exit %d (context %v), want a refusal to start; stderr:\n%s", code, wctx.Err(), stderr)
	}
	for _, want := range []string{"stream " + q.Opts.Stream + ": max_age", "stream " + q.Opts.ResultsStream() + ": max_age",
		"bucket " + q.Opts.JobsBucket() + ": max_age", "sudoku setup --apply"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, stderr)
		}
	}
	unchanged := func(step string) {
		t.Helper()
		for s, want := range map[string]time.Duration{q.Opts.Stream: 0, q.Opts.ResultsStream(): before} {
			if got := info(s); got.Config.MaxAge != want || got.State.Msgs != 1 {
				t.Errorf("after %s, stream %s has max age %v and %d messages; want %v and 1", step, s, got.Config.MaxAge, got.State.Msgs, want)
			}
		}
	}
	unchanged("the worker")

	code, out, stderr := run(t, ctx, "", "setup")
	if code != ExitOK {
		t.Fatalf("setup: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "differs stream "+q.Opts.ResultsStream()+": max_age "+before.String()+" -> 2s") || !strings.Contains(out, "nothing changed") {
		t.Errorf("setup does not show the differences:\n%s", out)
	}
	unchanged("setup")

	if code, out, stderr = run(t, ctx, "", "setup", "--apply"); code != ExitOK {
		t.Fatalf("setup --apply: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "changed stream "+q.Opts.ResultsStream()+": max_age "+before.String()+" -> 2s") {
		t.Errorf("setup --apply does not show what it changed:\n%s", out)
	}
	if got := info(q.Opts.ResultsStream()).Config.MaxAge; got != 2*time.Second {
		t.Errorf("after setup --apply the results' max age is %v, want 2s", got)
	}
	if code, out, _ = run(t, ctx, "", "setup"); code != ExitOK || !strings.Contains(out, "match") {
		t.Errorf("setup after --apply: exit %d:\n%s", code, out)
	}
}
