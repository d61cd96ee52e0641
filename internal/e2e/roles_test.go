package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestRolesCLI runs a deployment as docker-compose.yml sets it up, with
// the roles on: `sudoku roles init` writes the users, a private
// nats-server and Redis read its files, and each command runs as the user
// of its role: the admin sets the streams up, a worker works, a producer
// submits and waits, a reader looks. A producer on another machine is
// added as docs/deployment.md says (roles init --user, the servers
// reloaded). A reader's `job rm` is refused, and says by whom and what.
func TestRolesCLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "roles")
	if code, _, stderr := run(t, 30*time.Second, baseEnv(), "roles", "init", dir); code != 0 {
		t.Fatalf("roles init: exit %d: %s", code, stderr)
	}
	// The server's own file enables JetStream and includes the users'
	// (as configs/nats-server.conf does in docker-compose.yml): nats-server
	// reloads neither a store directory nor JetStream given by flags.
	port := testenv.FreePort(t)
	main := filepath.Join(dir, roles.ServerDir, "main.conf")
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\npid_file: %q\njetstream {\n  store_dir: %q\n}\ninclude %q\n",
		port, filepath.Join(t.TempDir(), "nats.pid"), t.TempDir(), roles.NATSConfFile)
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

	// The admin sets the streams up (any command of the admin's creates
	// what is missing).
	if code, _, stderr := run(t, time.Minute, as("admin"), "job", "list"); code != 0 {
		t.Fatalf("admin: job list: exit %d: %s", code, stderr)
	}
	w := start(t, "worker", as("worker").with("SUDOKU_LOG_LEVEL=info"), "worker")

	// A producer on another machine: its own user, added to the running
	// servers.
	if code, _, stderr := run(t, 30*time.Second, baseEnv(), "roles", "init", "--user", "producer-berlin", dir); code != 0 {
		t.Fatalf("roles init --user producer-berlin: exit %d: %s", code, stderr)
	}
	reloadNATS(t, ns, "producer-berlin", readSecret(t, filepath.Join(dir, "producer-berlin", roles.NATSPasswordFile)))
	admin := redis.NewClient(&redis.Options{Addr: rds.Addr, Username: "admin", Password: readSecret(t, filepath.Join(dir, "admin", roles.RedisPasswordFile))})
	defer admin.Close()
	if err := admin.Do(context.Background(), "ACL", "LOAD").Err(); err != nil {
		t.Fatalf("ACL LOAD: %v", err)
	}

	lines := manyPuzzles(t, 100, "17_clue_200.txt")
	puzzles := writeFile(t, lines)
	want := localOut(t, puzzles)
	code, out, stderr := run(t, time.Minute, as("producer-berlin"), "submit", "--wait", puzzles)
	if code != 0 {
		t.Fatalf("producer-berlin: submit --wait: exit %d: %s", code, stderr)
	}
	if out != want {
		t.Error("submit --wait: the results differ from solve --local")
	}
	m := regexp.MustCompile(`job (\S+): \d+ lines`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no job id in submit's output:\n%s", stderr)
	}
	id := m[1]

	reader := as("reader")
	jobStatus(t, reader, id, 100)
	if code, out, stderr := run(t, time.Minute, reader, "job", "list"); code != 0 || !strings.Contains(out, id) {
		t.Errorf("reader: job list: exit %d, %q: %s", code, out, stderr)
	}
	if code, out, stderr := run(t, time.Minute, reader, "get", lines[0]); code != 0 || out == "" {
		t.Errorf("reader: get (from the cache): exit %d, %q: %s", code, out, stderr)
	}

	// What a reader may not do is refused, and the error says who and what
	// (the service refuses it before NATS would: the job is another
	// owner's).
	code, _, stderr = run(t, time.Minute, reader, "job", "rm", id)
	if code != 1 || !strings.Contains(stderr, `reader (role reader) may not change job `+id+`: it is producer-berlin's`) {
		t.Errorf("reader: job rm: exit %d, want 1 and the refusal named:\n%s", code, stderr)
	}
	if code, _, stderr := run(t, time.Minute, as("admin"), "job", "rm", id); code != 0 {
		t.Errorf("admin: job rm: exit %d: %s", code, stderr)
	}

	if code := w.stop(20 * time.Second); code != 0 {
		t.Errorf("worker: exit %d after SIGTERM", code)
	}
	if log := w.stderr.String(); strings.Contains(log, "permission refused") {
		t.Errorf("the worker was refused something:\n%s", log)
	}
}

// natsProc is a nats-server started from a configuration file.
type natsProc struct {
	url string
	cmd *exec.Cmd
}

// startNATS starts nats-server -c conf (the Debian binary, or
// $SUDOKU_TEST_NATS_SERVER), waits until the admin can connect at url,
// and kills it when the test ends.
func startNATS(t *testing.T, conf, url, adminPassword string) *natsProc {
	t.Helper()
	bin := cmp.Or(os.Getenv("SUDOKU_TEST_NATS_SERVER"), "/usr/sbin/nats-server")
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "nats-server binary", err)
	}
	var log syncBuffer
	cmd := exec.Command(bin, "-c", conf)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			out := log.String()
			t.Logf("nats-server log (end):\n%s", out[max(0, len(out)-3000):])
		}
	})
	n := &natsProc{url: url, cmd: cmd}
	n.waitUser(t, "admin", adminPassword)
	return n
}

// waitUser waits until user can connect with password and JetStream
// answers it.
func (n *natsProc) waitUser(t *testing.T, user, password string) {
	t.Helper()
	waitUntil(t, 10*time.Second, user+" can connect to nats-server", func() bool {
		nc, err := nats.Connect(n.url, nats.UserInfo(user, password))
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = js.Stream(ctx, "SUDOKU")
		return err == nil || errors.Is(err, jetstream.ErrStreamNotFound)
	})
}

// reloadNATS makes n read its configuration again (SIGHUP, as
// nats-server --signal reload does) and waits until user can connect with
// password.
func reloadNATS(t *testing.T, n *natsProc, user, password string) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	n.waitUser(t, user, password)
}

// readSecret returns the content of a secret file.
func readSecret(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
