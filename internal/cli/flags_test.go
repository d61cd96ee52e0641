package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// settingFlags are the flags named after configuration keys that some
// command defines, and the global ones.
var settingFlags = []string{"config", "log-level", "log-format", "nats-url", "redis-addrs", "queue-batch-size",
	"worker-concurrency", "metrics-addr", "job-wait-timeout"}

// helpFlags returns the flags that a command's help lists (its own and the
// global ones) among settingFlags, sorted.
func helpFlags(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, stderr := run(t, context.Background(), "", append(args, "--help")...)
	if code != ExitOK {
		t.Fatalf("%v --help: exit %d: %s", args, code, stderr)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z-]+)`).FindAllStringSubmatch(out, -1) {
		if slices.Contains(settingFlags, m[1]) {
			got = append(got, m[1])
		}
	}
	slices.Sort(got)
	return got
}

// TestHelpListsTheFlagsThatApply: each command's help lists the flags of
// the settings it uses, and no other; --config, --log-level and
// --log-format are everywhere.
func TestHelpListsTheFlagsThatApply(t *testing.T) {
	global := []string{"config", "log-level", "log-format"}
	tests := []struct {
		cmd  string
		more []string
	}{
		{"gen", nil},
		{"version", nil},
		{"job", []string{"nats-url"}},
		{"job list", []string{"nats-url"}},
		{"job status", []string{"nats-url"}},
		{"job rm", []string{"nats-url"}},
		{"job wait", []string{"nats-url", "job-wait-timeout"}},
		{"dlq list", []string{"nats-url"}},
		{"dlq replay", []string{"nats-url"}},
		{"worker", []string{"nats-url", "redis-addrs", "worker-concurrency", "metrics-addr"}},
		{"worker health", []string{"metrics-addr"}},
		{"get", []string{"redis-addrs", "nats-url"}},
		{"submit", []string{"nats-url", "redis-addrs", "queue-batch-size", "job-wait-timeout"}},
		{"solve", []string{"redis-addrs", "queue-batch-size"}},
		{"serve", []string{"nats-url", "redis-addrs", "queue-batch-size", "worker-concurrency"}},
		{"bench", []string{"nats-url", "redis-addrs"}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			want := slices.Sorted(slices.Values(append(slices.Clone(global), tt.more...)))
			if got := helpFlags(t, strings.Fields(tt.cmd)...); !slices.Equal(got, want) {
				t.Errorf("sudoku %s --help lists %v, want %v", tt.cmd, got, want)
			}
		})
	}
}

// TestFlagThatDoesNotApply: a command refuses the flag of a setting it
// does not use, saying so, before or after its name.
func TestFlagThatDoesNotApply(t *testing.T) {
	for _, args := range [][]string{
		{"gen", "--nats-url", "nats://x:4222", "--from", clue17, "-n", "1"},
		{"--nats-url", "nats://x:4222", "version"},
		{"worker", "health", "--worker-concurrency", "2"},
		{"job", "list", "--redis-addrs", "x:1"},
	} {
		code, _, stderr := run(t, context.Background(), "", args...)
		if code != ExitUsage || !strings.Contains(stderr, "unknown flag") || !strings.Contains(stderr, "does not use") {
			t.Errorf("%v: exit %d, %q; want 2, unknown flag, does not use", args, code, stderr)
		}
	}
}

// TestFlagsAreHonoured: a flag that applies wins over the environment,
// placed after the command or before it.
func TestFlagsAreHonoured(t *testing.T) {
	noServices(t)
	dead := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))

	t.Run("job list --nats-url", func(t *testing.T) {
		for _, args := range [][]string{{"job", "list", "--nats-url", "nats://" + dead}, {"--nats-url", "nats://" + dead, "job", "list"},
			{"job", "--nats-url", "nats://" + dead, "list"}} {
			code, _, stderr := run(t, context.Background(), "", args...)
			if code != ExitFailure || !strings.Contains(stderr, "NATS at nats://"+dead) {
				t.Errorf("%v: exit %d, %q; want 1 naming the flag's server", args, code, stderr)
			}
		}
	})

	t.Run("get --redis-addrs", func(t *testing.T) {
		code, _, stderr := run(t, context.Background(), "", "get", "--redis-addrs", dead, unique)
		if code != ExitFailure || !strings.Contains(stderr, "Redis at "+dead) {
			t.Errorf("exit %d, %q; want 1 naming the flag's Redis", code, stderr)
		}
	})

	t.Run("worker health --metrics-addr", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "ok %s\n", r.URL.Path)
		}))
		defer srv.Close()
		t.Setenv("SUDOKU_METRICS_ADDR", dead)
		addr := strings.TrimPrefix(srv.URL, "http://")
		code, out, stderr := run(t, context.Background(), "", "worker", "health", "--ready", "--metrics-addr", addr)
		if code != ExitOK || out != "ok /readyz\n" {
			t.Errorf("exit %d, out %q, stderr %q; want the flag's endpoint asked", code, out, stderr)
		}
	})

	t.Run("submit --queue-batch-size", func(t *testing.T) {
		// An embedded server: no NATS needed to count the batches.
		t.Setenv("SUDOKU_NATS_EMBEDDED", "true")
		t.Setenv("SUDOKU_QUEUE_BATCH_SIZE", "50")
		file := writeFile(t, puzzles(t, 20))
		code, _, stderr := run(t, context.Background(), "", "submit", "--queue-batch-size", "7", file)
		if code != ExitOK || !strings.Contains(stderr, "20 queued in 3 batches") {
			t.Errorf("exit %d, %q; want 20 lines in 3 batches of at most 7", code, stderr)
		}
	})
}

// TestMessagesForPeople: what the commands print when something is wrong
// names what a user knows (the setting, the file, NATS, Redis, the
// worker, the job), once, with the exit status for it; not a Go package
// or call.
func TestMessagesForPeople(t *testing.T) {
	noServices(t)
	dead := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	badConfig := tempFile(t, "bad.yaml", "nats:\n  urll: x\nqueue:\n  batch_size: abc\n")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	embedded := []string{"SUDOKU_NATS_EMBEDDED=true"}
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string // a line of stderr, whole
	}{
		{"settings", nil, []string{"job", "list", "--config", badConfig}, ExitUsage, "sudoku job list: configuration: 2 problems:\n" +
			"  nats.urll (from " + badConfig + "): unknown key (did you mean nats.url?)\n" +
			"  queue.batch_size = \"abc\" (from " + badConfig + "): must be an integer\n"},
		{"a setting", []string{"SUDOKU_WORKER_CONCURRENCY=-1"}, []string{"gen", "--from", clue17, "-n", "1"}, ExitUsage,
			"sudoku gen: configuration: worker.concurrency = -1 (from $SUDOKU_WORKER_CONCURRENCY): must be >= 0\n"},
		{"config file", nil, []string{"--config", missing, "job", "list"}, ExitUsage,
			"sudoku job list: config file " + missing + ": no such file or directory\n"},
		{"input file", nil, []string{"submit", missing}, ExitUsage, "sudoku submit: input file " + missing + ": no such file or directory\n"},
		{"format", nil, []string{"get", "--format", "xml", unique}, ExitUsage, "sudoku get: --format \"xml\": want text or jsonl\n"},
		{"NATS down", nil, []string{"job", "list", "--nats-url", "nats://" + dead}, ExitFailure, "sudoku job list: cannot connect to NATS at nats://" + dead},
		{"Redis down", nil, []string{"get", "--redis-addrs", dead, unique}, ExitFailure, "sudoku get: Redis at " + dead},
		{"unknown job", embedded, []string{"job", "status", "anonymous.06h2n0000000000000000nojob"}, ExitFailure,
			"sudoku job status: no job anonymous.06h2n0000000000000000nojob (never submitted, removed, or expired)\n"},
		{"not a job id", nil, []string{"job", "status", "06h2n0000000000000000nojob"}, ExitUsage,
			"sudoku job status: \"06h2n0000000000000000nojob\" is not a job id: " + job.IDForm + "; 'sudoku job list' lists the jobs\n"},
		{"no worker", embedded, []string{"get", "--solve", unique}, ExitFailure, "sudoku get: no worker is running on this queue (none serves sudoku.solve)\n"},
		{"not cached", embedded, []string{"get", "--solve=false", "--redis-addrs", testenv.RedisAddr(), strings.Repeat("0", 64)}, ExitFailure,
			"sudoku get: key " + strings.Repeat("0", 64) + " is not in the cache\n"},
		{"metrics address busy", embedded, []string{"worker", "--metrics-addr", busy.Addr().String()}, ExitFailure,
			"sudoku worker: cannot listen on metrics.addr " + busy.Addr().String() + ": address already in use\n"},
		{"no worker endpoint", nil, []string{"worker", "health", "--metrics-addr", dead}, ExitFailure,
			"sudoku worker health: no worker answers on metrics.addr " + dead + " (GET http://" + dead + "/healthz: connection refused)\n"},
	}
	// "cache: Redis lookups failing" is about the cache, not a package.
	pkg := regexp.MustCompile(`\b(app|producer|queue|job|config|cli|worker|input|result|metrics|embedded|gen|local|solver): `)
	command := regexp.MustCompile(`(?m)^sudoku( [a-z]+)*: `)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, kv := range tt.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			if tt.name == "not cached" {
				testenv.Redis(t) // skip when there is no Redis
			}
			code, _, stderr := run(t, context.Background(), "", tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %d and:\n%s", code, stderr, tt.code, tt.want)
			}
			if m := pkg.FindString(command.ReplaceAllString(stderr, "")); m != "" {
				t.Errorf("stderr names the Go package %q:\n%s", m, stderr)
			}
		})
	}
}

// TestConfigsREADMEFlags: the table of configs/README.md names, for each
// setting's flag, the commands that define it.
func TestConfigsREADMEFlags(t *testing.T) {
	data, err := os.ReadFile("../../configs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	row := regexp.MustCompile("`--([a-z-]+)`: ([^|]+)")
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range row.FindAllStringSubmatch(line, -1) {
			if strings.Contains(m[2], "every command") {
				continue
			}
			for _, c := range strings.Split(m[2], ",") {
				documented[m[1]] = append(documented[m[1]], strings.Trim(strings.TrimSpace(c), "`"))
			}
		}
	}
	defined := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if slices.Contains(settingFlags, f.Name) && c.HasParent() {
				path := strings.TrimPrefix(c.CommandPath(), "sudoku ")
				defined[f.Name] = append(defined[f.Name], path)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCmd())
	for _, name := range []string{"nats-url", "redis-addrs", "queue-batch-size", "worker-concurrency", "metrics-addr", "job-wait-timeout"} {
		got, want := slices.Sorted(slices.Values(documented[name])), slices.Sorted(slices.Values(defined[name]))
		if !slices.Equal(got, want) {
			t.Errorf("configs/README.md: --%s on %q; the commands define it on %q", name, got, want)
		}
	}
}
