package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// refusedWithin bounds how long a refused command may take, process
// start included (the 2 s, with room for the race detector on a
// loaded machine): a refusal is final at once, never a timeout or a retry
// loop (they took 5 to 202 s).
const refusedWithin = 5 * time.Second

// TestOwnersCLI runs, with roles on, two producers and a reader against
// one job: producer-alice's. Bob's cancel, status and rm of it are refused
// at once, naming him, his role and what; so are the reader's cancel and
// submit; none changes the job, which alice then collects whole and
// removes herself. A quota refuses alice's next job at once, naming the
// quota and its value.
func TestOwnersCLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "roles")
	if code, _, stderr := run(t, 30*time.Second, baseEnv(), "roles", "init",
		"--user", "producer-alice", "--user", "producer-bob", dir); code != 0 {
		t.Fatalf("roles init: exit %d: %s", code, stderr)
	}
	port := testenv.FreePort(t)
	main := filepath.Join(dir, roles.ServerDir, "main.conf")
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n}\ninclude %q\n",
		port, t.TempDir(), roles.NATSConfFile)
	if err := os.WriteFile(main, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := startNATS(t, main, fmt.Sprintf("nats://127.0.0.1:%d", port), readSecret(t, filepath.Join(dir, "admin", roles.NATSPasswordFile)))
	rds := testenv.RedisServer(t, "--aclfile", filepath.Join(dir, roles.ServerDir, roles.RedisACLFile))
	as := func(user string) env {
		return baseEnv(
			"SUDOKU_NATS_URL="+ns.url,
			"SUDOKU_NATS_USER="+user,
			"SUDOKU_NATS_PASSWORD_FILE="+filepath.Join(dir, user, roles.NATSPasswordFile),
			"SUDOKU_REDIS_ADDRS="+rds.Addr,
			"SUDOKU_REDIS_USERNAME="+user,
			"SUDOKU_REDIS_PASSWORD_FILE="+filepath.Join(dir, user, roles.RedisPasswordFile),
		)
	}
	if code, _, stderr := run(t, time.Minute, as("admin"), "job", "list"); code != 0 {
		t.Fatalf("admin: job list (sets the streams up): exit %d: %s", code, stderr)
	}

	// Alice's job, queued while no worker runs: open throughout.
	lines := manyPuzzles(t, 600, "17_clue_200.txt")
	puzzles := writeFile(t, lines)
	code, out, stderr := run(t, time.Minute, as("producer-alice"), "submit", puzzles)
	if code != 0 {
		t.Fatalf("alice: submit: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	if !strings.HasPrefix(id, "producer-alice.") {
		t.Fatalf("alice's job id %q does not name her", id)
	}

	refusedAs := func(e env, user string, want *regexp.Regexp, args ...string) {
		t.Helper()
		start := time.Now()
		code, out, stderr := run(t, time.Minute, e, args...)
		took := time.Since(start)
		if code == 0 || !want.MatchString(stderr) {
			t.Errorf("%s: %s: exit %d, stdout %q, stderr:\n%s\nwant a refusal matching %s", user, strings.Join(args, " "),
				code, out, stderr, want)
		}
		if took > refusedWithin {
			t.Errorf("%s: %s: refused after %v, want at once (under %v)", user, strings.Join(args, " "), took, refusedWithin)
		}
	}
	refused := func(user string, want *regexp.Regexp, args ...string) {
		t.Helper()
		refusedAs(as(user), user, want, args...)
	}
	notHers := regexp.MustCompile(regexp.QuoteMeta(`producer-bob (role producer) may not change job ` + id + `: it is producer-alice's`))
	refused("producer-bob", notHers, "job", "cancel", id)
	refused("producer-bob", notHers, "job", "rm", id)
	refused("producer-bob", regexp.MustCompile(regexp.QuoteMeta(`producer-bob (role producer) may not read job `+id)), "job", "status", id)
	refused("reader", regexp.MustCompile(regexp.QuoteMeta(`reader (role reader) may not change job `+id+`: it is producer-alice's`)),
		"job", "cancel", id)
	// (A large job's record comes first: that is what is refused.)
	refused("reader", regexp.MustCompile(`NATS refused user "reader" \(role reader\): publish to "\$KV\.[A-Z_]+\.reader\.`),
		"submit", puzzles)
	// Bob lists his own jobs only: none.
	if code, out, stderr := run(t, time.Minute, as("producer-bob"), "job", "list"); code != 0 || strings.Contains(out, id) {
		t.Errorf("bob: job list: exit %d, %q: %s", code, out, stderr)
	}
	// Even asked for every owner's: the servers give him none of hers.
	refused("producer-bob", regexp.MustCompile(`NATS refused user "producer-bob" \(role producer\)`), "job", "list", "--all")

	// Nothing refused changed her job: it runs to its end, whole.
	w := start(t, "worker", as("worker"), "worker")
	code, out, stderr = run(t, 2*time.Minute, as("producer-alice"), "job", "wait", id)
	if code != 0 || out != localOut(t, puzzles) {
		t.Fatalf("alice: job wait: exit %d, %d bytes: %s", code, len(out), stderr)
	}
	if code, out, stderr := run(t, time.Minute, as("reader"), "job", "status", id); code != 0 || !strings.Contains(out, "finished") {
		t.Errorf("reader: job status: exit %d, %q: %s", code, out, stderr)
	}

	// A quota: one open job. Her next job, while another is open (no
	// worker runs; puzzles the cache does not know), is refused before
	// anything is stored; the error names the quota and its value.
	w.stop(20 * time.Second)
	quota := as("producer-alice").with("SUDOKU_QUOTA_JOBS_OPEN=1")
	fresh := writeFile(t, manyPuzzles(t, 50, "hardest_200.txt"))
	if code, _, stderr := run(t, time.Minute, quota, "submit", fresh); code != 0 {
		t.Fatalf("alice: submit (first open job): exit %d: %s", code, stderr)
	}
	refusedAs(quota, "producer-alice", regexp.MustCompile(`over its quota quota\.jobs_open = 1 \(it has or asks 2\)`),
		"submit", fresh)

	// Alice removes her finished job herself.
	if code, _, stderr := run(t, time.Minute, as("producer-alice"), "job", "rm", id); code != 0 {
		t.Errorf("alice: job rm: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run(t, time.Minute, as("producer-alice"), "job", "status", id); code == 0 || !strings.Contains(stderr, "no job "+id) {
		t.Errorf("alice: job status after rm: exit %d: %s", code, stderr)
	}
}
