package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// TestReadyzWithoutJetStream: on a NATS server without JetStream (which
// answers pings while every submit fails), /readyz is 503
// queue_unavailable and says why.
func TestReadyzWithoutJetStream(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A queue as Setup would have returned before JetStream went away.
	q := &queue.Queue{JS: js, Opts: queue.Options{Stream: "SUDOKU", Prefix: "sudoku"}}
	srv, err := New(q, nil, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })
	res, err := ts.Client().Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("/readyz: %d %s", res.StatusCode, data)
	wantError(t, res, data, http.StatusServiceUnavailable, CodeQueueUnavailable, "not ready: JetStream is not enabled on the NATS server")
}

// TestTimedOutRequestLeavesConnectionUsable: a request that outlives its
// time bound does not spoil its keep-alive connection: the next request
// on it is served as usual. (The read deadline that bounds a request used
// to fire while net/http watched the connection for the client going
// away, which cancelled the context of every later request on it: /readyz
// then said "context canceled" for ever, as did every other route.)
func TestTimedOutRequestLeavesConnectionUsable(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true, opts: Options{RequestTimeout: 300 * time.Millisecond}})
	// A handler that finishes its work a little after its time is up, as
	// one that cleans up does.
	e.srv.handle("POST /v1/test-slow", apiRoute, func(w http.ResponseWriter, r *http.Request) error {
		if _, err := io.ReadAll(r.Body); err != nil {
			return err
		}
		<-r.Context().Done()
		time.Sleep(100 * time.Millisecond)
		return r.Context().Err()
	})
	for i, body := range []string{"", "a body, read to its end", ""} {
		res, data := e.post("/v1/test-slow", body)
		if res.StatusCode != http.StatusInternalServerError {
			t.Fatalf("the slow route: %d %s", res.StatusCode, data)
		}
		if res, data := e.get("/readyz"); res.StatusCode != http.StatusOK {
			t.Fatalf("round %d: /readyz after a timed-out request: %d %s", i, res.StatusCode, data)
		}
	}
}
