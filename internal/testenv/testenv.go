// Package testenv gives tests the real services they run against: the
// shared NATS JetStream and Redis on 127.0.0.1 (skipping when they are not
// there, failing when CI is set), private server processes on free ports
// for tests that stop or restart them, and unique names so tests never
// meet each other's streams or keys.
package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// Default addresses of the shared services; SUDOKU_TEST_NATS_URL and
// SUDOKU_TEST_REDIS_ADDR override them.
const (
	DefaultNATSURL   = "nats://127.0.0.1:4222"
	DefaultRedisAddr = "127.0.0.1:6379"
)

// ConfigHome is the user's configuration directory ($XDG_CONFIG_HOME)
// of every test binary that imports testenv and of the processes its
// tests start: a directory under os.TempDir, shared by the test binaries
// of this machine, so that no test writes the default proof key
// (proof.default) into the real user's configuration, nor trusts a key
// found there. A test that needs one of its own sets XDG_CONFIG_HOME to
// a t.TempDir (one under os.TempDir is left as it is, so that the
// processes a test starts, this binary again, keep it).
var ConfigHome = filepath.Join(os.TempDir(), "sudoku-queue-test-config")

func init() {
	// os.UserConfigDir reads it on Linux and the BSDs.
	if !strings.HasPrefix(os.Getenv("XDG_CONFIG_HOME"), os.TempDir()+string(filepath.Separator)) {
		_ = os.Setenv("XDG_CONFIG_HOME", ConfigHome)
	}
}

// NATSURL returns the URL of the shared NATS server.
func NATSURL() string { return envOr("SUDOKU_TEST_NATS_URL", DefaultNATSURL) }

// RedisAddr returns the address of the shared Redis.
func RedisAddr() string { return envOr("SUDOKU_TEST_REDIS_ADDR", DefaultRedisAddr) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Unavailable skips the test, or fails it when CI is set: on CI the
// services and server binaries must be there.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s unreachable and CI is set: %v", what, err)
	}
	t.Skipf("%s unreachable, skipping (start it, see README): %v", what, err)
}

// Name returns a unique name for a stream, consumer or key prefix,
// starting with prefix: letters, digits and '_' only.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// NATS connects to the shared NATS server; the connection closes when the
// test ends.
func NATS(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(NATSURL(), nats.Timeout(2*time.Second))
	if err != nil {
		Unavailable(t, "NATS at "+NATSURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Redis connects to the shared Redis; the client closes when the test
// ends. Tests must use a unique key prefix (Name) and delete their keys
// (CleanupPrefix).
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr(), DialTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		Unavailable(t, "Redis at "+RedisAddr(), err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// CleanupPrefix deletes every key starting with prefix when the test ends.
func CleanupPrefix(t testing.TB, rdb redis.UniversalClient, prefix string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				rdb.Del(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Server is a private server process a test may stop and start again.
type Server struct {
	t       testing.TB
	Port    int
	Addr    string // 127.0.0.1:port
	argv    []string
	monitor int // a nats-server's monitoring port; 0 for redis-server
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
}

// RedisServer starts a private redis-server on a free port, without
// persistence, skipping the test when redis-server is not installed (and
// failing under CI). It is killed when the test ends.
func RedisServer(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server binary", err)
	}
	port := FreePort(t)
	argv := append([]string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir()}, extraArgs...)
	s := &Server{t: t, Port: port, Addr: fmt.Sprintf("127.0.0.1:%d", port), argv: argv}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// NATSServer starts a private nats-server (the Debian binary, or
// $SUDOKU_TEST_NATS_SERVER) with JetStream on a free port, storing in a
// folder that outlives restarts within the test. It is killed when the
// test ends. Its monitoring endpoint (-m) is on a free port too, unless
// extraArgs give one, and tells Start when JetStream is ready.
func NATSServer(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	bin := os.Getenv("SUDOKU_TEST_NATS_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats-server"); err != nil {
			// Debian's package puts it in /usr/sbin, not on every PATH.
			if _, statErr := os.Stat("/usr/sbin/nats-server"); statErr != nil {
				Unavailable(t, "nats-server binary", err)
			}
			bin = "/usr/sbin/nats-server"
		}
	}
	port := FreePort(t)
	argv := []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", t.TempDir()}
	monitor := monitorPort(extraArgs)
	if monitor == 0 {
		monitor = FreePort(t)
		argv = append(argv, "-m", strconv.Itoa(monitor))
	}
	argv = append(argv, extraArgs...)
	s := &Server{t: t, Port: port, Addr: fmt.Sprintf("127.0.0.1:%d", port), argv: argv, monitor: monitor}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// monitorPort returns the HTTP monitoring port that nats-server
// arguments set (-m N, --http_port=N, ...), or 0.
func monitorPort(args []string) int {
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != "m" && name != "http_port") {
			continue
		}
		if !hasVal && i+1 < len(args) {
			val = args[i+1]
		}
		if n, err := strconv.Atoi(val); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// URL returns nats://addr for a NATS server.
func (s *Server) URL() string { return "nats://" + s.Addr }

// readyTimeout bounds how long Start waits for a server to be ready.
const readyTimeout = 10 * time.Second

// Start starts the server (again) and waits until it is ready, failing
// the test with the end of the server's log when it exits first or is
// not ready within 10s: a nats-server once it accepts connections and its
// monitoring endpoint says JetStream is enabled; a redis-server once it
// answers PING other than -LOADING (it may ask for a password). When the
// test fails, the end of each log is in the test's output.
func (s *Server) Start() {
	s.t.Helper()
	name := filepath.Base(s.argv[0])
	logPath := filepath.Join(s.t.TempDir(), name+".log")
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	if logf, err := os.Create(logPath); err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close() // the process has its own descriptor
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", strings.Join(s.argv, " "), err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	s.t.Cleanup(func() {
		if s.t.Failed() {
			s.t.Logf("%s on %s, end of its log:\n%s", name, s.Addr, logTail(logPath))
		}
	})

	ready := s.redisReady
	if s.monitor != 0 {
		ready = s.natsReady
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		err := ready()
		if err == nil {
			return
		}
		select {
		case <-exited:
			s.t.Fatalf("%s exited before it was ready (%v): %s", name, err, strings.Join(s.argv, " "))
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s on %s not ready within %v: %v", name, s.Addr, readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// natsReady returns nil once JetStream is enabled and the nats-server
// accepts connections: its monitoring endpoint's /healthz, asked about
// JetStream only, answers 200 (not while JetStream is still starting),
// /jsz does not say JetStream is disabled (healthz is fine without it),
// and the client port accepts a TCP connection (dialled last, so that a
// TLS port logs one aborted handshake, not one per poll).
func (s *Server) natsReady() error {
	base := fmt.Sprintf("http://127.0.0.1:%d", s.monitor)
	status, body, err := httpGet(base + "/healthz?js-enabled-only=true")
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("/healthz?js-enabled-only=true: %d %s", status, body)
	}
	if status, body, err = httpGet(base + "/jsz"); err != nil {
		return err
	}
	var jsz struct {
		Disabled bool `json:"disabled"`
	}
	if err := json.Unmarshal([]byte(body), &jsz); status != http.StatusOK || err != nil {
		return fmt.Errorf("/jsz: %d %.200s", status, body)
	}
	if jsz.Disabled {
		return errors.New("/jsz: JetStream is disabled")
	}
	c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// httpGet returns the status and body of a GET of url.
func httpGet(url string) (int, string, error) {
	client := http.Client{Timeout: 500 * time.Millisecond}
	res, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	return res.StatusCode, strings.TrimSpace(string(body)), err
}

// redisReady returns nil once the redis-server answers PING with
// anything but -LOADING (it answers -LOADING while it reads its data
// from disk, and -NOAUTH when it wants a password first).
func (s *Server) redisReady() error {
	c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	if line = strings.TrimSpace(line); strings.HasPrefix(line, "-LOADING") {
		return fmt.Errorf("PING: %s", line)
	}
	return nil
}

// logTail returns the end of the log file at path.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 3000
	if len(data) > max {
		data = append([]byte("..."), data[len(data)-max:]...)
	}
	return string(data)
}

// Stop kills the server (SIGKILL) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}
