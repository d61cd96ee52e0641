package cli

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/bench"
)

// TestBenchJobsDeployment runs 'sudoku bench jobs --deployment' over each
// way to submit: every job ends finished, and the figures are there.
func TestBenchJobsDeployment(t *testing.T) {
	for _, p := range []string{"nats-server", "redis-server"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not on PATH", p)
		}
	}
	// The private deployment's processes are this test binary, as the
	// sudoku command (TestMain).
	t.Setenv("SUDOKU_TEST_AS_CLI", "1")
	for _, via := range []string{bench.ViaHTTP, bench.ViaMicro, bench.ViaCLI} {
		t.Run(via, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			code, stdout, stderr := run(t, ctx, "", "bench", "jobs", clue17, "--deployment", "--via", via,
				"--jobs", "6", "--puzzles", "3", "--clients", "2", "--owners", "2", "--workers", "1",
				"--settle", "0s", "--json")
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			var got bench.JobsResult
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("%v: %s", err, stdout)
			}
			if got.Jobs != 6 || got.Finished != 6 || got.Failed != 0 || got.Via != via || got.Owners != 2 || got.Workers != 1 {
				t.Errorf("figures %+v: want 6 jobs, 6 finished, via %s, 2 owners, 1 worker", got, via)
			}
			if got.NATSCPUPerJobMS == nil || got.FinishSeconds <= 0 || got.JobsPerSecond <= 0 || got.JobP90Seconds < got.JobP50Seconds {
				t.Errorf("figures %+v: want nats CPU, a finish time and job times", got)
			}
		})
	}
}

func TestBenchJobsUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--via", "grpc"}, `--via "grpc"`},
		{[]string{"--jobs", "0"}, "--jobs 0"},
		{[]string{"--clients", "-1"}, "--clients -1"},
		{[]string{"--owners", "0"}, "--owners 0"},
	}
	for _, tc := range tests {
		code, _, stderr := run(t, context.Background(), "", append([]string{"bench", "jobs", clue17}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("bench jobs %v: exit %d, %q; want %d naming %s", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}
}
