package metrics

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// natsWithoutJetStream starts a private NATS server without JetStream on
// a free port and returns its URL: "module", the nats-server module in
// this process; "binary", the nats-server binary (Debian's, or
// $SUDOKU_TEST_NATS_SERVER) started without -js.
func natsWithoutJetStream(t *testing.T, kind string) string {
	t.Helper()
	switch kind {
	case "module":
		ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server module not ready")
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		return ns.ClientURL()
	case "binary":
		bin := os.Getenv("SUDOKU_TEST_NATS_SERVER")
		if bin == "" {
			bin = "/usr/sbin/nats-server"
			if p, err := exec.LookPath("nats-server"); err == nil {
				bin = p
			}
		}
		if _, err := os.Stat(bin); err != nil {
			testenv.Unavailable(t, "nats-server binary", err)
		}
		port := testenv.FreePort(t)
		cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		url := fmt.Sprintf("nats://127.0.0.1:%d", port)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			nc, err := nats.Connect(url)
			if err == nil {
				nc.Close()
				return url
			}
			if time.Now().After(deadline) {
				t.Fatalf("nats-server on %s: %v", url, err)
			}
		}
	}
	t.Fatalf("no kind %q", kind)
	return ""
}

// TestReadyzWithoutJetStream: on a NATS server without JetStream, which
// answers pings, the nats check passes but the jetstream check fails and
// /readyz is 503 with the reason.
func TestReadyzWithoutJetStream(t *testing.T) {
	for _, kind := range []string{"module", "binary"} {
		t.Run(kind, func(t *testing.T) {
			nc, err := nats.Connect(natsWithoutJetStream(t, kind))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(Handler(NewWorker().Registry(), NATSCheck(nc), JetStreamCheck(js, "SUDOKU")))
			defer srv.Close()
			start := time.Now()
			code, body := get(t, srv.URL+"/readyz")
			t.Logf("/readyz: %d %s", code, body)
			if code != 503 || !strings.HasPrefix(body, "nats: ok\njetstream: JetStream is not enabled on the NATS server") {
				t.Errorf("/readyz without JetStream: %d %q, want 503 with nats ok and jetstream not enabled", code, body)
			}
			if d := time.Since(start); d > JetStreamProbeTimeout+500*time.Millisecond {
				t.Errorf("/readyz took %v", d)
			}
		})
	}
}

// TestJetStreamCheck: ready with the stream; not ready, naming it, when
// the stream is missing; one request a second at most, however many
// checks.
func TestJetStreamCheck(t *testing.T) {
	q := testenv.NewQueue(t, "embedded", queue.Options{})
	p := NewJetStreamProbe(q.JS, q.Opts.Stream)
	ctx := context.Background()
	if err := p.Check(ctx); err != nil {
		t.Fatalf("with the stream: %v", err)
	}
	before := q.NC.Stats().OutMsgs
	for range 20 {
		if err := p.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.NC.Stats().OutMsgs - before; n != 0 {
		t.Errorf("%d requests for 20 checks within a second, want 0 (the answer reused)", n)
	}

	missing := NewJetStreamProbe(q.JS, "NO_SUCH_STREAM")
	err := missing.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "the work stream NO_SUCH_STREAM does not exist") {
		t.Errorf("a missing stream: %v", err)
	}
	// A caller that gave up does not leave its failure for the next one.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	fresh := NewJetStreamProbe(q.JS, q.Opts.Stream)
	if err := fresh.Check(cancelled); err == nil {
		t.Error("a cancelled check passed")
	}
	if err := fresh.Check(ctx); err != nil {
		t.Errorf("the check after a cancelled one: %v", err)
	}
}
