package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// Soak limits: peak resident memory of each process, in kB.
const (
	workerMaxKB   = 100 << 10
	producerMaxKB = 300 << 10
)

// soakSize returns the number of puzzles of the soak, $SUDOKU_SOAK; the
// soak is skipped without it (it builds a binary and runs for minutes: it
// is not for every CI run).
func soakSize(t *testing.T) int {
	v := os.Getenv("SUDOKU_SOAK")
	if v == "" {
		t.Skip("set SUDOKU_SOAK=N to push N puzzles through (1000000 for the full run)")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("SUDOKU_SOAK=%q: want a number of puzzles", v)
	}
	return n
}

// buildSudoku builds the sudoku command, without the race detector, so
// that the soak measures the memory and speed of what is deployed.
func buildSudoku(t *testing.T) string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to build the sudoku binary: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "sudoku")
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/sudoku-queue/sudoku-queue/cmd/sudoku")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built %s in %v", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// goroutines reads go_goroutines from a worker's /metrics.
func goroutines(addr string) (int, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no go_goroutines in %s/metrics", addr)
}

// idleGoroutines waits for a worker's goroutine count to settle (the same
// value three times, 100ms apart) and returns it.
func idleGoroutines(t *testing.T, addr string) int {
	t.Helper()
	last, same := -1, 0
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := goroutines(addr)
		if err == nil && n == last {
			if same++; same == 2 {
				return n
			}
		} else {
			same = 0
		}
		last = n
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the goroutines of the worker at %s did not settle (last %d)", addr, last)
	return 0
}

// peak keeps the largest peak resident memory (VmHWM) sampled of each
// process, and the largest file storage of the nats-server.
type peak struct {
	mu      sync.Mutex
	kb      map[*proc]int64
	storage int64
}

// sampleStorage samples the private nats-server's file storage.
func (pk *peak) sampleStorage(s *sys) {
	if n := s.storage(); n > 0 {
		pk.mu.Lock()
		pk.storage = max(pk.storage, n)
		pk.mu.Unlock()
	}
}

// storage returns the bytes of file storage the private nats-server's
// JetStream uses (its /jsz), or -1.
func (s *sys) storage() int64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", s.natsMonitor))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var jsz struct {
		Storage int64 `json:"storage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return -1
	}
	return jsz.Storage
}

// streamBytes describes the bytes and messages of each of the test's
// streams.
func (s *sys) streamBytes() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var parts []string
	for _, name := range []string{s.q.Opts.Stream, s.q.Opts.ResultsStream(), "KV_" + s.q.Opts.JobsBucket(), s.q.Opts.DLQStream} {
		str, err := s.q.JS.Stream(ctx, name)
		if err != nil {
			parts = append(parts, name+": "+err.Error())
			continue
		}
		st := str.CachedInfo().State
		parts = append(parts, fmt.Sprintf("%s %.1f MB in %d messages", name, float64(st.Bytes)/(1<<20), st.Msgs))
	}
	return strings.Join(parts, ", ")
}

func (pk *peak) sample(ps ...*proc) {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	for _, p := range ps {
		if kb := p.vmHWM(); kb > pk.kb[p] {
			pk.kb[p] = kb
		}
	}
}

// of returns the peak of p: the largest VmHWM sampled (every 50ms while
// it runs, so a peak in its last 50ms may be missed).
func (pk *peak) of(p *proc) int64 {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	return pk.kb[p]
}

// TestSoak pushes SUDOKU_SOAK puzzles (made by `sudoku gen` from the
// 17-clue fixture) through the pipeline, with real worker and producer
// processes built without the race detector, on private servers: every
// result is there and right, memory stays within bounds, and the workers
// end with the goroutines they started with. It reports throughput, peak
// memory and goroutines.
func TestSoak(t *testing.T) {
	n := soakSize(t)
	bin := buildSudoku(t)
	const workers = 2
	addrs := make([]string, workers)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	}
	s := newSys(t, options{privateNATS: true, privateRedis: true, env: []string{
		// Production settings, not the short ones of the fault tests.
		"SUDOKU_QUEUE_BATCH_SIZE=256", "SUDOKU_QUEUE_ACK_WAIT=30s", "SUDOKU_LOG_LEVEL=warn",
	}})
	s.bin = bin
	dir := t.TempDir()
	in, out := filepath.Join(dir, "puzzles.txt"), filepath.Join(dir, "solutions.txt")
	if _, stderr := s.mustRun(0, "gen", "--from", clue17, "-n", strconv.Itoa(n), "--seed", "1", "--out", in); !strings.Contains(stderr, "gen: ") {
		t.Fatalf("gen: %s", stderr)
	}

	var ws []*proc
	for i := range workers {
		ws = append(ws, s.startWorker(fmt.Sprintf("worker-%d", i), "SUDOKU_METRICS_ADDR="+addrs[i],
			"SUDOKU_WORKER_CONCURRENCY=1"))
	}
	before := make([]int, workers)
	for i, a := range addrs {
		before[i] = idleGoroutines(t, a)
	}

	pk := &peak{kb: map[*proc]int64{}}
	start := time.Now()
	p := s.start("producer", nil, "submit", "--wait", "--out", out, in)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			pk.sample(append([]*proc{p}, ws...)...)
			pk.sampleStorage(s)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	limit := 2*time.Minute + time.Duration(n/1000)*time.Second // ~1 ms per 1000 puzzles at worst
	code := p.wait(limit)
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	if code != 0 {
		t.Fatalf("submit --wait: exit %d:\n%s", code, tail(p.stderr.String(), 20))
	}
	id := jobIDRe.FindStringSubmatch(p.stderr.String())
	if id == nil {
		t.Fatalf("no job id in:\n%s", p.stderr.String())
	}
	j := s.checkJob(id[1], want{lines: int64(n), queued: int64(n)})
	checkSummary(t, p.stderr.String(), id[1], fmt.Sprintf("%d unique", n))
	checkSolutionFiles(t, in, out, n)
	streams := s.streamBytes()

	after := make([]int, workers)
	for i, a := range addrs {
		after[i] = idleGoroutines(t, a)
	}
	pk.sample(ws...)
	for _, w := range ws {
		if code := w.stop(20 * time.Second); code != 0 {
			t.Errorf("%s: exit %d", w.name, code)
		}
	}
	s.checkDrained()

	rate := float64(n) / elapsed.Seconds()
	t.Logf("soak: %d puzzles in %v: %.0f puzzles/s (submit --wait, from start to the last result written); job %v from creation to finish",
		n, elapsed.Round(time.Millisecond), rate, j.Finished.Sub(j.Created).Round(time.Millisecond))
	t.Logf("soak: nats-server file storage: peak %.1f MB during the job, %.1f MB after it (%s)",
		float64(pk.storage)/(1<<20), float64(s.storage())/(1<<20), streams)
	t.Logf("soak: producer peak RSS %.1f MB (limit %d MB)", float64(pk.of(p))/1024, producerMaxKB>>10)
	for i, w := range ws {
		t.Logf("soak: %s peak RSS %.1f MB (limit %d MB); goroutines %d before, %d after", w.name,
			float64(pk.of(w))/1024, workerMaxKB>>10, before[i], after[i])
	}
	if kb := pk.of(p); kb > producerMaxKB {
		t.Errorf("producer peak RSS %d kB, over %d kB", kb, producerMaxKB)
	}
	for i, w := range ws {
		if kb := pk.of(w); kb > workerMaxKB {
			t.Errorf("%s peak RSS %d kB, over %d kB", w.name, kb, workerMaxKB)
		}
		// Idle again, a worker runs what it ran idle before: a few more
		// would be the runtime's or a connection's, not a leak per batch.
		if after[i] > before[i]+5 {
			t.Errorf("%s: %d goroutines after the job, %d before", w.name, after[i], before[i])
		}
	}
}

// checkSolutionFiles checks, reading both files line by line, that out
// has exactly n lines, each the solution of the puzzle on the same line
// of in.
func checkSolutionFiles(t *testing.T, in, out string, n int) {
	t.Helper()
	fi, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()
	fo, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fo.Close()
	si, so := bufio.NewScanner(fi), bufio.NewScanner(fo)
	lines, bad := 0, 0
	for si.Scan() {
		if !so.Scan() {
			t.Fatalf("%d results for %d puzzles", lines, n)
		}
		lines++
		if err := isSolution(si.Text(), so.Text()); err != nil {
			if bad++; bad <= 5 {
				t.Errorf("line %d: %v", lines, err)
			}
		}
	}
	if so.Scan() {
		t.Fatalf("more results than the %d puzzles", lines)
	}
	if lines != n || bad > 0 {
		t.Fatalf("%d lines, %d not solutions; want %d solutions", lines, bad, n)
	}
}
