package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// printedCommand returns the arguments of the command line that out (the
// output of roles init) prints starting with name ("nats-server",
// "redis-server").
func printedCommand(t *testing.T, out, name string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f[1:]
		}
	}
	t.Fatalf("roles init does not say how to start %s:\n%s", name, out)
	return nil
}

// secret returns the content of a password file.
func secret(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// jetStreamAs returns nil when user can connect to url and JetStream
// answers it an account info request (the admin's), else why not.
func jetStreamAs(url, user, password string) error {
	nc, err := nats.Connect(url, nats.UserInfo(user, password), nats.Timeout(10*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// TestRolesInitServersRunAJob follows 'roles init --help' to the letter:
// roles init (only the port and the JetStream folder given, by its
// flags), nats-server started with exactly the command it prints and so
// the files it wrote, Redis with its ACL file; a producer added with
// roles init --user and the server reloaded as it says (nats-server
// --signal reload): the new user connects and JetStream is still on (a
// reload used to turn it off, issue 28); then a job runs end to end, the
// admin setting up (setup --apply), a worker solving and the new producer
// submitting, as docs/deployment.md says.
func TestRolesInitServersRunAJob(t *testing.T) {
	bin := natsServerBin(t)
	dir := filepath.Join(t.TempDir(), "roles")
	port := testenv.FreePort(t)
	store := t.TempDir()
	code, out, stderr := run(t, context.Background(), "", "roles", "init",
		"--nats-listen", fmt.Sprintf("127.0.0.1:%d", port), "--nats-store-dir", store, dir)
	if code != ExitOK {
		t.Fatalf("roles init: exit %d: %s", code, stderr)
	}
	t.Logf("roles init:\n%s", out)

	// nats-server, as printed.
	var log syncBuffer
	ns := exec.Command(bin, printedCommand(t, out, "nats-server")...)
	ns.Stdout, ns.Stderr = &log, &log
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ns.Process.Kill()
		_ = ns.Wait()
		if t.Failed() {
			t.Logf("nats-server log:\n%s", log.String())
		}
	})
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", port)
	admin := secret(t, filepath.Join(dir, "admin", roles.NATSPasswordFile))
	waitFor(t, 20*time.Second, "JetStream for the admin", &log, func() bool { return jetStreamAs(natsURL, "admin", admin) == nil })

	// Redis with the ACL file it names (on a port of its own).
	redisArgs := printedCommand(t, out, "redis-server")
	acl := ""
	for i, a := range redisArgs {
		if a == "--aclfile" && i+1 < len(redisArgs) {
			acl = redisArgs[i+1]
		}
	}
	if acl != filepath.Join(dir, roles.ServerDir, roles.RedisACLFile) {
		t.Fatalf("roles init prints redis-server %v, want --aclfile %s", redisArgs, filepath.Join(dir, roles.ServerDir, roles.RedisACLFile))
	}
	rds := testenv.RedisServer(t, "--aclfile", acl)

	// A producer added, the server reloaded as the help says.
	code, out2, stderr := run(t, context.Background(), "", "roles", "init", "--user", "producer-berlin", dir)
	if code != ExitOK || !strings.Contains(out2, "nats-server.conf (kept)") {
		t.Fatalf("roles init --user producer-berlin: exit %d: %s%s", code, out2, stderr)
	}
	berlin := secret(t, filepath.Join(dir, "producer-berlin", roles.NATSPasswordFile))
	if err := jetStreamAs(natsURL, "producer-berlin", berlin); err == nil {
		t.Fatal("producer-berlin connects before the reload")
	}
	if reload, err := exec.Command(bin, "--signal", "reload="+strconv.Itoa(ns.Process.Pid)).CombinedOutput(); err != nil {
		t.Fatalf("nats-server --signal reload: %v: %s", err, reload)
	}
	waitFor(t, 20*time.Second, "the reload (producer-berlin connecting)", &log, func() bool {
		nc, err := nats.Connect(natsURL, nats.UserInfo("producer-berlin", berlin))
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	if !strings.Contains(log.String(), "Reloaded server configuration") {
		t.Errorf("no reload in the server's log")
	}
	if err := jetStreamAs(natsURL, "admin", admin); err != nil {
		t.Fatalf("JetStream after the reload: %v", err)
	}
	// Redis too, as the admin (redis-cli --user admin ACL LOAD).
	rdb := redis.NewClient(&redis.Options{Addr: rds.Addr, Username: "admin",
		Password: secret(t, filepath.Join(dir, "admin", roles.RedisPasswordFile))})
	defer rdb.Close()
	if err := rdb.Do(context.Background(), "ACL", "LOAD").Err(); err != nil {
		t.Fatalf("ACL LOAD as admin: %v", err)
	}

	// A job, each process as its user: the admin sets up, a worker
	// solves, producer-berlin submits and waits.
	as := func(user string) []string {
		conf := filepath.Join(t.TempDir(), user+".yaml")
		yaml := fmt.Sprintf("nats:\n  url: %q\n  user: %q\n  password_file: %q\nredis:\n  addrs: [%q]\n  username: %q\n  password_file: %q\nlog:\n  level: warn\n",
			natsURL, user, filepath.Join(dir, user, roles.NATSPasswordFile), rds.Addr, user, filepath.Join(dir, user, roles.RedisPasswordFile))
		if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"--config", conf}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if code, _, stderr := run(t, ctx, "", append(as("admin"), "setup", "--apply")...); code != ExitOK {
		t.Fatalf("admin: setup --apply: exit %d: %s", code, stderr)
	}
	workerCtx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan string, 1)
	go func() {
		code, _, stderr := run(t, workerCtx, "", append(as("worker"), "worker")...)
		workerDone <- fmt.Sprintf("exit %d: %s", code, stderr)
	}()
	defer func() {
		stopWorker()
		if w := <-workerDone; !strings.HasPrefix(w, "exit 0") || strings.Contains(w, "refused") {
			t.Errorf("worker: %s", w)
		}
	}()
	file := writeFile(t, manyPuzzles(t, 300))
	code, got, stderr := run(t, ctx, "", append(as("producer-berlin"), "submit", "--wait", file)...)
	if code != ExitOK {
		t.Fatalf("producer-berlin: submit --wait: exit %d: %s", code, stderr)
	}
	if want := localOut(t, file); got != want {
		t.Errorf("the job's results differ from solve --local's (%d vs %d bytes)", len(got), len(want))
	}
}
