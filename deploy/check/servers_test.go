package check

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// These tests run what the chart renders through the real programs, on
// this machine: nats-server tests the NATS configuration, redis-server
// starts with the Redis arguments, and the sudoku binary (built from this
// repository, or $SUDOKU_BIN) parses each container's arguments and
// loads its configuration file and environment. Without nats-server or
// redis-server on PATH they skip, unless $CI is set.

// need returns the path of program, skipping the test (failing it under
// CI) when it is not on PATH.
func need(t *testing.T, program string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not on PATH (CI must run this test)", program)
		}
		t.Skipf("%s is not on PATH", program)
	}
	return p
}

var (
	sudokuOnce sync.Once
	sudokuPath string
	sudokuErr  error
	rolesPath  string
)

// sudoku returns the sudoku binary ($SUDOKU_BIN, or built from ../..) and
// a roles folder it made with `sudoku roles init` (the four roles' users
// and the servers' files).
func sudoku(t *testing.T) (bin, roles string) {
	t.Helper()
	sudokuOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sudoku-chart-check-")
		if err != nil {
			sudokuErr = err
			return
		}
		sudokuPath = os.Getenv("SUDOKU_BIN")
		if sudokuPath == "" {
			sudokuPath = filepath.Join(dir, "sudoku")
			cmd := exec.Command("go", "build", "-o", sudokuPath, "./cmd/sudoku")
			cmd.Dir = filepath.Join("..", "..")
			if out, err := cmd.CombinedOutput(); err != nil {
				sudokuErr = fmt.Errorf("go build ./cmd/sudoku: %v\n%s", err, out)
				return
			}
		}
		rolesPath = filepath.Join(dir, "roles")
		if out, err := exec.Command(sudokuPath, "roles", "init", rolesPath).CombinedOutput(); err != nil {
			sudokuErr = fmt.Errorf("sudoku roles init: %v\n%s", err, out)
		}
	})
	if sudokuErr != nil {
		t.Fatal(sudokuErr)
	}
	return sudokuPath, rolesPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if rolesPath != "" {
		os.RemoveAll(filepath.Dir(rolesPath))
	}
	os.Exit(code)
}

// TestNATSConfigLoads runs `nats-server -t` on the rendered nats.conf
// (and, with roles, the users of `sudoku roles init`): an unknown field,
// a bad size or a syntax error fails it.
func TestNATSConfigLoads(t *testing.T) {
	natsServer := need(t, "nats-server")
	for _, values := range []string{"", "roles: {enabled: true}", "nats: {replicas: 3}\nroles: {enabled: true}"} {
		r := render(t, values)
		dir := t.TempDir()
		write(t, filepath.Join(dir, "nats.conf"), natsConf(t, r))
		if strings.Contains(values, "roles") {
			_, roles := sudoku(t)
			users, err := os.ReadFile(filepath.Join(roles, "server", "nats-users.conf"))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "users", "nats-users.conf"), string(users))
		}
		cmd := exec.Command(natsServer, "-t", "-c", filepath.Join(dir, "nats.conf"))
		cmd.Env = append(os.Environ(), "POD_NAME=sq-sudoku-queue-nats-0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("values %q: nats-server -t: %v\n%s", values, err, out)
		}
	}
}

// TestRedisArgs starts redis-server with the rendered arguments on a free
// loopback port and checks that it is the cache the chart means: no
// snapshots, no append-only file, maxmemory with allkeys-lru, the
// readiness probe's PING answered, and with roles each user held to its
// role.
func TestRedisArgs(t *testing.T) {
	redisServer := need(t, "redis-server")
	for _, roles := range []bool{false, true} {
		t.Run(fmt.Sprint("roles=", roles), func(t *testing.T) {
			r := render(t, fmt.Sprintf("roles: {enabled: %v}", roles))
			c := deployment(t, r, "sq-sudoku-queue-redis").Spec.Template.Spec.Containers[0]
			if c.Args[0] != "redis-server" {
				t.Fatalf("args %q do not start redis-server", c.Args)
			}
			args := append([]string(nil), c.Args[1:]...)
			var rolesDir string
			if roles {
				_, rolesDir = sudoku(t)
				for i, a := range args {
					if a == "/etc/redis-roles/redis-users.acl" {
						args[i] = filepath.Join(rolesDir, "server", "redis-users.acl")
					}
				}
			}
			port := freePort(t)
			dir := t.TempDir()
			args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--logfile", filepath.Join(dir, "log"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv := exec.CommandContext(ctx, redisServer, args...)
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
			conn := dialRetry(t, port, srv, filepath.Join(dir, "log"))
			defer conn.Close()
			rd := bufio.NewReader(conn)
			do := func(args ...string) string { return redisDo(t, conn, rd, args...) }
			if got := do("PING"); got != "PONG" {
				t.Errorf("the probe's PING: %q", got)
			}
			if roles {
				pw := func(user string) string {
					b, err := os.ReadFile(filepath.Join(rolesDir, user, "redis_password"))
					if err != nil {
						t.Fatal(err)
					}
					return strings.TrimSpace(string(b))
				}
				if got := do("GET", "sudoku:s2:x"); !strings.HasPrefix(got, "-NOPERM") {
					t.Errorf("the default user may GET: %q", got)
				}
				if got := do("AUTH", "worker", pw("worker")); got != "OK" {
					t.Fatalf("AUTH worker: %q", got)
				}
				if got := do("SET", "sudoku:s2:x", "1"); got != "OK" {
					t.Errorf("worker SET a cache key: %q", got)
				}
				if got := do("FLUSHALL"); !strings.HasPrefix(got, "-NOPERM") {
					t.Errorf("worker FLUSHALL: %q", got)
				}
				if got := do("AUTH", "admin", pw("admin")); got != "OK" {
					t.Fatalf("AUTH admin: %q", got)
				}
			}
			for k, want := range map[string]string{"save": "save ", "appendonly": "appendonly no", "maxmemory-policy": "maxmemory-policy allkeys-lru", "maxmemory": "maxmemory 536870912", "protected-mode": "protected-mode no"} {
				if got := do("CONFIG", "GET", k); got != want {
					t.Errorf("CONFIG GET %s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestSudokuTakesPods runs each rendered sudoku container's command line
// with --help (the sudoku CLI refuses an unknown command or flag, exit 2)
// and `sudoku solve --local` with the container's environment and
// configuration file, its Secrets' files in place (the CLI checks every
// key of the file and the environment, and that every *_file exists).
func TestSudokuTakesPods(t *testing.T) {
	bin, roles := sudoku(t)
	puzzle := ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.values)
			dir := t.TempDir()
			var cm corev1.ConfigMap
			decodeAs(t, r, "ConfigMap", "sq-sudoku-queue-config", &cm)
			write(t, filepath.Join(dir, "etc", "sudoku.yaml"), cm.Data["sudoku.yaml"])
			write(t, filepath.Join(dir, "api", "token"), "t0ken\n")
			for _, c := range sudokuContainers(t, r) {
				user := env(c.c, "SUDOKU_NATS_USER")
				paths := strings.NewReplacer(
					"/etc/sudoku-chart/", filepath.Join(dir, "etc")+"/",
					"/run/secrets/sudoku/", filepath.Join(roles, user)+"/",
					"/run/secrets/sudoku-api/", filepath.Join(dir, "api")+"/",
				)
				environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
				for _, e := range c.c.Env {
					v := paths.Replace(e.Value)
					if e.ValueFrom != nil {
						v = "from-a-secret"
					}
					environ = append(environ, e.Name+"="+v)
				}
				help := exec.Command(bin, append(append([]string(nil), c.c.Args...), "--help")...)
				help.Env = environ
				if out, err := help.CombinedOutput(); err != nil {
					t.Errorf("%s: sudoku %s --help: %v\n%s", c.where, strings.Join(c.c.Args, " "), err, out)
				}
				solve := exec.Command(bin, "solve", "--local", "-")
				solve.Env = environ
				solve.Stdin = strings.NewReader(puzzle + "\n")
				var stderr bytes.Buffer
				solve.Stderr = &stderr
				out, err := solve.Output()
				if err != nil || len(strings.TrimSpace(string(out))) != 81 {
					t.Errorf("%s: its configuration does not load: %v\n%s%s", c.where, err, out, stderr.String())
				}
			}
		})
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// dialRetry connects to the server on port, for up to 10 s; failing, it
// shows the server's log.
func dialRetry(t *testing.T, port int, srv *exec.Cmd, logFile string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			return conn
		}
		if time.Now().After(deadline) || srv.ProcessState != nil {
			log, _ := os.ReadFile(logFile)
			t.Fatalf("redis-server did not answer on %d: %v\n%s", port, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// redisDo sends one command and returns its reply: a status or error line
// (errors keep their "-"), a bulk string, or an array's elements joined by
// spaces.
func redisDo(t *testing.T, conn net.Conn, rd *bufio.Reader, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	reply, err := readReply(rd)
	if err != nil {
		t.Fatalf("redis %s: %v", args[0], err)
	}
	return reply
}

func readReply(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return line, nil
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		parts := make([]string, 0, n)
		for range n {
			p, err := readReply(rd)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, " "), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
