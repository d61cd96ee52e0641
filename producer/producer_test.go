package producer

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/embedded"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// hermetic runs a producer and a worker on an embedded NATS server and an
// in-memory store.
type hermetic struct {
	js    jetstream.JetStream
	q     *queue.Queue
	store *cache.Memory
}

func newHermetic(t *testing.T) *hermetic {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.Setup(context.Background(), js, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &hermetic{js: js, q: q, store: cache.NewMemory()}
	ctx, cancel := context.WithCancel(context.Background())
	w := worker.New(nc, q, h.store, worker.Options{})
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func fixture(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/17_clue_100.txt")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func (h *hermetic) submit(t *testing.T, lines []string, opts Options) (Submitted, []result.Result) {
	t.Helper()
	p := New(h.js, h.q.Opts, h.store, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := p.Submit(ctx, input.NewReader(strings.NewReader(strings.Join(lines, "\n"))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Wait(ctx, h.store, h.js.Conn(), h.q.Opts, sub.ID, nil); err != nil {
		t.Fatal(err)
	}
	var rs []result.Result
	if err := Results(ctx, h.store, sub.ID, func(r result.Result) error { rs = append(rs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return sub, rs
}

func TestSubmitCounts(t *testing.T) {
	h := newHermetic(t)
	ps := fixture(t)
	// Cache the first 30.
	if sub, _ := h.submit(t, ps[:30], Options{BatchSize: 7}); sub.Queued != 30 || sub.Batches != 5 {
		t.Fatalf("first job: %+v", sub)
	}
	lines := append([]string{}, ps[:50]...)         // 30 cached, 20 new
	lines = append(lines, ps[40], ps[40], ps[0])    // 3 repeated
	lines = append(lines, "", "# comment", "12345") // 1 invalid; 2 skipped
	sub, rs := h.submit(t, lines, Options{BatchSize: 7})
	want := Submitted{Lines: 54, Invalid: 1, Cached: 30, Repeated: 3, Queued: 20, Batches: 3}
	if sub.Lines != want.Lines || sub.Invalid != want.Invalid || sub.Cached != want.Cached ||
		sub.Repeated != want.Repeated || sub.Queued != want.Queued || sub.Batches != want.Batches {
		t.Errorf("submitted %+v, want %+v", sub, want)
	}
	if len(rs) != 54 {
		t.Fatalf("%d results, want 54", len(rs))
	}
	for i, r := range rs[:53] {
		if r.Status != result.StatusUnique || r.Line != i+1 {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if last := rs[53]; last.Status != result.StatusInvalid || last.Line != 56 || last.Key != "" ||
		!strings.Contains(last.Error, "5 cells") {
		t.Errorf("invalid line result: %+v", last)
	}
	if rs[50].Solution != rs[40].Solution || rs[52].Solution != rs[0].Solution {
		t.Errorf("repeated puzzles have different results")
	}
	// Force: everything is queued again.
	if sub, _ := h.submit(t, ps[:10], Options{Force: true}); sub.Queued != 10 || sub.Cached != 0 {
		t.Errorf("--force: %+v", sub)
	}
	// All cached: the job is finished as soon as it is sealed.
	if sub, _ := h.submit(t, ps[:10], Options{}); !sub.Finished || sub.Queued != 0 {
		t.Errorf("all cached: %+v", sub)
	}
}

func TestPlanRespectsLimits(t *testing.T) {
	p := &Producer{opts: Options{BatchSize: 100, MaxMessageBytes: 1000}}
	pb := newPublisher(p, "job")
	puzzles := make([]string, 250)
	for i := range puzzles {
		puzzles[i] = strings.Repeat("x", queue.PackedLen)
	}
	batches := pb.plan(puzzles)
	total := 0
	for i, b := range batches {
		if b.Index != uint64(i) {
			t.Errorf("batch %d has index %d", i, b.Index)
		}
		if n := len(b.Append(nil)); n > 1000 {
			t.Errorf("batch %d is %d bytes, over the 1000 limit", i, n)
		}
		for j, it := range b.Items {
			if it.Index != uint64(total+j) {
				t.Errorf("batch %d item %d has index %d", i, j, it.Index)
			}
		}
		total += len(b.Items)
	}
	if total != 250 {
		t.Errorf("%d puzzles planned, want 250", total)
	}
}

func TestNewJobID(t *testing.T) {
	a, b := NewJobID(), NewJobID()
	if a == b || len(a) != 26 || len(a) > queue.MaxJobID {
		t.Fatalf("job ids %q, %q", a, b)
	}
	time.Sleep(2 * time.Millisecond)
	if c := NewJobID(); c[:8] < a[:8] {
		t.Errorf("job ids do not sort by time: %q before %q", c, a)
	}
}
