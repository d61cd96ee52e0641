// Package testenv gives tests the real services they run against: the
// shared NATS JetStream and Redis on 127.0.0.1 (skipping when they are not
// there, failing when CI is set), private server processes on free ports
// for tests that stop or restart them, and unique names so tests never
// meet each other's streams or keys.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
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
	t    testing.TB
	Port int
	Addr string // 127.0.0.1:port
	argv []string
	cmd  *exec.Cmd
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
// test ends.
func NATSServer(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	bin := os.Getenv("SUDOKU_TEST_NATS_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats-server"); err != nil {
			Unavailable(t, "nats-server binary", err)
		}
	}
	port := FreePort(t)
	dir := t.TempDir()
	argv := append([]string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir}, extraArgs...)
	s := &Server{t: t, Port: port, Addr: fmt.Sprintf("127.0.0.1:%d", port), argv: argv}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL returns nats://addr for a NATS server.
func (s *Server) URL() string { return "nats://" + s.Addr }

// Start starts the server (again) and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	logf, err := os.Create(filepath.Join(s.t.TempDir(), filepath.Base(s.argv[0])+".log"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", strings.Join(s.argv, " "), err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			// nats-server accepts before JetStream is ready; give it a moment.
			time.Sleep(100 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not listen on %s within 10s", s.argv[0], s.Addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
