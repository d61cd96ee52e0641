package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// natsServerBin returns the nats-server binary to start: $SUDOKU_TEST_NATS_SERVER,
// one on $PATH, or Debian's /usr/sbin/nats-server; the test skips (fails
// on CI) without one.
func natsServerBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SUDOKU_TEST_NATS_SERVER"); bin != "" {
		return bin
	}
	if bin, err := exec.LookPath("nats-server"); err == nil {
		return bin
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err != nil {
		testenv.Unavailable(t, "nats-server binary", err)
	}
	return "/usr/sbin/nats-server"
}

// getStatus returns the status and body of a GET of url (0 when it fails).
func getStatus(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// TestReadyzWhenJetStreamGoes: a worker's /readyz and serve's say not
// ready, and why, once their NATS server has lost JetStream: reloaded
// from a file without a jetstream block (issue 28's roles trap), while
// NATS itself stays up and answers pings.
func TestReadyzWhenJetStreamGoes(t *testing.T) {
	bin := natsServerBin(t)
	port := testenv.FreePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", port)
	conf := filepath.Join(t.TempDir(), "nats-server.conf")
	listen := fmt.Sprintf("listen: \"127.0.0.1:%d\"\n", port)
	withJS := listen + fmt.Sprintf("jetstream {\n  store_dir: %q\n}\n", t.TempDir())
	if err := os.WriteFile(conf, []byte(withJS), 0o644); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	ns := exec.Command(bin, "-c", conf)
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if jetStreamUp(natsURL) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server -c %s: JetStream not up after 10s: %v", conf, jetStreamUp(natsURL))
		}
	}
	newQueueEnv(t, "SUDOKU_NATS_URL="+natsURL)

	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	workerDone := make(chan int, 1)
	go func() {
		var out, errOut strings.Builder
		workerDone <- Run(ctx, []string{"worker", "--metrics-addr", metricsAddr}, strings.NewReader(""), &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-workerDone:
		case <-time.After(30 * time.Second):
			t.Error("the worker did not stop within 30s")
		}
	})
	serveURL := startServe(t)
	probes := []string{"http://" + metricsAddr + "/readyz", serveURL + "/readyz"}
	for _, url := range probes {
		waitStatus(t, url, http.StatusOK, "")
	}

	// Reloaded from a file without a jetstream block: JetStream stops.
	if err := os.WriteFile(conf, []byte(listen), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ns.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// (nats-server 2.9 then leaves JetStream's requests unanswered: the
	// reason is the time-out's, which says what it may be.)
	waitStatus(t, probes[0], http.StatusServiceUnavailable, "jetstream: JetStream ")
	waitStatus(t, probes[1], http.StatusServiceUnavailable, `"message":"not ready: JetStream `)
	// NATS itself is up: the nats check still passes.
	_, body := getStatus(probes[0])
	if !strings.Contains(body, "nats: ok\n") {
		t.Errorf("worker /readyz: %q, want nats: ok", body)
	}
	_, serveBody := getStatus(probes[1])
	t.Logf("worker /readyz: %s\nserve /readyz: %s", body, serveBody)
}

// jetStreamUp returns nil when JetStream answers an account info request
// on the server at url.
func jetStreamUp(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// waitStatus waits up to 20s until a GET of url answers status with a
// body holding want.
func waitStatus(t *testing.T, url string, status int, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := getStatus(url)
		if code == status && strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %q after 20s, want %d with %q", url, code, body, status, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
