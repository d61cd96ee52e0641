package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/gen"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// asCLI makes the test binary run as the sudoku command.
const asCLI = "SUDOKU_TEST_AS_CLI"

// TestMain lets the test binary act as the sudoku command, so that tests
// start real worker and producer processes without building anything.
func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Execute(ctx)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

const (
	clue17  = "testdata/17_clue_200.txt"
	hardest = "testdata/hardest_200.txt" // ~0.1 ms each: jobs that last
)

// options describe the deployment a test gets.
type options struct {
	privateNATS  bool     // a nats-server of its own, which the test may stop
	privateRedis bool     // a redis-server of its own, which the test may stop
	redisArgs    []string // more redis-server arguments
	env          []string // more SUDOKU_* settings, after the defaults
}

// sys is the deployment under test: NATS and Redis (shared or private), a
// stream, consumers, subjects and key prefix of its own, the settings
// every sudoku process of the test gets, and clients for the test to look
// with.
type sys struct {
	t           *testing.T
	name        string // stream, consumer and subject prefix
	prefix      string // Redis key prefix
	env         []string
	nats        *testenv.Server // nil for the shared server
	natsMonitor int             // the private server's monitoring port
	redis       *testenv.Server // nil for the shared server
	natsURL     string
	redisAddr   string
	rdb         *redis.Client
	store       *cache.Redis
	nc          *nats.Conn
	js          jetstream.JetStream
	bin         string // the sudoku command: this test binary unless set
}

// newSys sets up a deployment for t. Its settings are also set in this
// process's environment, for the commands a test runs in-process (run).
func newSys(t *testing.T, o options) *sys {
	t.Helper()
	s := &sys{t: t, name: testenv.Name("rel"), bin: os.Args[0]}
	s.prefix = s.name + ":"
	if o.privateNATS {
		s.natsMonitor = testenv.FreePort(t)
		s.nats = testenv.NATSServer(t, "-m", strconv.Itoa(s.natsMonitor))
		s.natsURL = s.nats.URL()
	} else {
		testenv.NATS(t) // skips, or fails on CI, without the shared server
		s.natsURL = testenv.NATSURL()
	}
	if o.privateRedis {
		s.redis = testenv.RedisServer(t, o.redisArgs...)
		s.redisAddr = s.redis.Addr
	} else {
		testenv.Redis(t)
		s.redisAddr = testenv.RedisAddr()
	}
	s.env = append([]string{
		"SUDOKU_NATS_URL=" + s.natsURL,
		"SUDOKU_REDIS_ADDRS=" + s.redisAddr,
		"SUDOKU_QUEUE_STREAM=" + s.name,
		"SUDOKU_QUEUE_DLQ_STREAM=" + s.name + "_DLQ",
		"SUDOKU_QUEUE_SUBJECT_PREFIX=" + s.name,
		"SUDOKU_QUEUE_CONSUMER=" + s.name,
		"SUDOKU_REDIS_KEY_PREFIX=" + s.prefix,
		"SUDOKU_QUEUE_BATCH_SIZE=20",
		// Redeliveries in seconds, not minutes, so that tests are short.
		"SUDOKU_QUEUE_ACK_WAIT=2s",
		"SUDOKU_QUEUE_BACKOFF=200ms,500ms,1s",
		"SUDOKU_WORKER_SHUTDOWN_TIMEOUT=5s",
		"SUDOKU_LOG_LEVEL=info",
	}, o.env...)
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}

	// The test's own clients reconnect for ever, as the services do.
	s.rdb = redis.NewClient(&redis.Options{Addr: s.redisAddr, DialTimeout: time.Second, MaxRetries: -1})
	s.store = cache.NewRedis(s.rdb, cache.RedisOptions{Prefix: s.prefix})
	var err error
	s.nc, err = nats.Connect(s.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to %s: %v", s.natsURL, err)
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.nats == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, st := range []string{s.name, s.name + "_DLQ"} {
				_ = s.js.DeleteStream(ctx, st)
			}
		}
		s.nc.Close()
		_ = s.rdb.Close()
	})
	if s.redis == nil {
		testenv.CleanupPrefix(t, s.rdb, s.prefix) // runs before the cleanup above
	}
	return s
}

// run runs the sudoku command line in this process, with the deployment's
// settings, and returns its exit status and output.
func (s *sys) run(ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = cli.Run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustRun is run that fails the test unless the exit status is want.
func (s *sys) mustRun(want int, args ...string) (stdout, stderr string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, stdout, stderr := s.run(ctx, "", args...)
	if code != want {
		s.t.Fatalf("sudoku %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, want, stderr)
	}
	return stdout, stderr
}

// submit submits file without waiting and returns the job id.
func (s *sys) submit(file string) string {
	s.t.Helper()
	out, _ := s.mustRun(cli.ExitOK, "submit", file)
	return strings.TrimSpace(out)
}

// syncBuffer is a bytes.Buffer that a process may write while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// proc is a sudoku process.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{} // closed when it has exited
	code   int           // exit status, once done; -1 when killed by a signal
}

// start starts `sudoku args...` with the deployment's settings (and more,
// from extraEnv). When the test ends, a process still running gets
// SIGTERM, then SIGKILL after 20s; its stderr is logged when the test
// failed; and a data race it reported fails the test.
func (s *sys) start(name string, extraEnv []string, args ...string) *proc {
	s.t.Helper()
	p := &proc{t: s.t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(s.bin, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUDOKU_") {
			env = append(env, kv)
		}
	}
	p.cmd.Env = append(append(append(env, asCLI+"=1"), s.env...), extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		default:
			p.code = -2
		}
		close(p.done)
	}()
	s.t.Cleanup(func() {
		p.stop(20 * time.Second)
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			s.t.Errorf("%s reported a data race", name)
		}
		if s.t.Failed() {
			s.t.Logf("%s (exit %d) stderr:\n%s", name, p.code, tail(p.stderr.String(), 100))
		}
	})
	return p
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines before]\n", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}

// startWorker starts a worker process.
func (s *sys) startWorker(name string, extraEnv ...string) *proc {
	s.t.Helper()
	return s.start(name, extraEnv, "worker")
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop sends SIGTERM and waits up to d for the process to exit, then
// kills it. It returns the exit status.
func (p *proc) stop(d time.Duration) int {
	if p.exited() {
		return p.code
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Errorf("%s did not stop within %v of SIGTERM; killing it", p.name, d)
		p.kill()
	}
	return p.code
}

// wait waits up to d for the process to exit by itself and returns its
// exit status; it fails the test when it does not.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		p.t.Fatalf("%s still running after %v; stderr:\n%s", p.name, d, tail(p.stderr.String(), 50))
		return 0
	}
}

// count returns the number of lines of the process's stderr containing
// sub.
func (p *proc) count(sub string) int {
	return strings.Count(p.stderr.String(), sub)
}

// vmHWM returns the process's peak resident memory so far, in kB, from
// /proc/PID/status (0 when it cannot be read). (Not the rusage of wait4:
// Linux counts in a child's maxrss the memory of the process it was
// forked from, here the test binary, as it was at exec.)
func (p *proc) vmHWM() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// rng returns a random source for the points at which a test strikes,
// logging its seed; SUDOKU_RELIABILITY_SEED sets it, to replay a run.
func rng(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SUDOKU_RELIABILITY_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SUDOKU_RELIABILITY_SEED=%q: %v", v, err)
		}
	}
	t.Logf("random seed %d (set SUDOKU_RELIABILITY_SEED=%d to replay)", seed, seed)
	return rngFrom(seed)
}

// rngFrom returns a random source seeded with seed.
func rngFrom(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// genFile writes n distinct puzzles made from fixture (internal/gen) to a
// file and returns its name and the puzzles.
func genFile(t *testing.T, fixture string, n int, seed uint64) (string, []string) {
	t.Helper()
	f, err := os.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	bases, err := gen.ReadBases(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gen.New(bases, seed)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := gen.Write(context.Background(), &b, g, n); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "puzzles.txt")
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return name, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// checkSolutions checks that out holds exactly one line per puzzle, in
// order, each a solution of its puzzle: a complete valid grid that keeps
// every given. (The puzzles come from sets with unique solutions, so a
// solution is the solution.)
func checkSolutions(t *testing.T, puzzles []string, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(puzzles) {
		t.Fatalf("%d result lines for %d puzzles", len(lines), len(puzzles))
	}
	bad := 0
	for i, l := range lines {
		if err := isSolution(puzzles[i], l); err != nil {
			if bad++; bad <= 5 {
				t.Errorf("line %d: %v", i+1, err)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d lines are not the solution of their puzzle", bad, len(puzzles))
	}
}

// isSolution says why sol is not a solution of puzzle, or returns nil.
func isSolution(puzzle, sol string) error {
	if len(sol) != 81 {
		return fmt.Errorf("%.100q is not a solution", sol)
	}
	g, err := solver.Parse(sol)
	if err != nil {
		return fmt.Errorf("%s: %v", sol, err)
	}
	if g.Givens() != 81 {
		return fmt.Errorf("%s is not complete", sol)
	}
	for i := range 81 {
		if c := puzzle[i]; c != '.' && c != '0' && c != sol[i] {
			return fmt.Errorf("%s does not keep the givens of %s", sol, puzzle)
		}
	}
	return nil
}

// job returns the record of a job.
func (s *sys) job(id string) cache.Job {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	j, err := s.store.Job(ctx, id)
	if err != nil {
		s.t.Fatalf("job %s: %v", id, err)
	}
	return j
}

// done returns how many puzzles of a job are done, or -1 when its record
// cannot be read now (the store may be down).
func (s *sys) done(id string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	j, err := s.store.Job(ctx, id)
	if err != nil {
		return -1
	}
	return j.Done
}

// waitFor polls cond every 5ms until it is true, failing the test after d.
func (s *sys) waitFor(what string, d time.Duration, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not after %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkJob checks a finished job's record: n lines, n distinct puzzles
// each counted once, all with a unique solution, and Done == Queued
// exactly (a batch counted twice would make Done larger).
func (s *sys) checkJob(id string, n int64) cache.Job {
	s.t.Helper()
	j := s.job(id)
	var sum int64
	for _, c := range j.Counts {
		sum += c
	}
	if !j.IsFinished() || !j.Sealed || j.Total != n || j.Done != j.Queued || sum != n || j.Counts[result.StatusUnique] != n {
		s.t.Fatalf("job %s: finished %v sealed %v, %d lines, %d of %d queued done, counts %v (sum %d); want %d lines, every one unique",
			id, j.IsFinished(), j.Sealed, j.Total, j.Done, j.Queued, j.Counts, sum, n)
	}
	return j
}

// checkDrained checks that nothing is left to do: no message pending or
// unacknowledged for either consumer, none dead-lettered, and no message
// in the work stream but orphans of batches already done. (A nats-server
// killed with SIGKILL may come back with messages that its consumer had
// seen acknowledged but that the stream had not yet removed: they are
// never delivered again, and their batches are done, so nothing is lost;
// they only take room. The test logs how many.)
func (s *sys) checkDrained() {
	s.t.Helper()
	// Acks are asynchronous, and a redelivered duplicate may still be in
	// work: give them a moment.
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	first := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		left, orphans := s.queueState(ctx)
		cancel()
		if left == "" {
			if first != "" {
				s.t.Logf("the queue drained in %v after the job finished; left at first: %s", time.Since(start).Round(time.Millisecond), first)
			}
			if orphans > 0 {
				s.t.Logf("%d messages left in the work stream, each of a batch already done and acknowledged (the server lost their removal)", orphans)
			}
			return
		}
		if first == "" {
			first = left
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the queue is not drained after 30s: %s", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queueState describes what is left in the queue, or returns "" when
// nothing is, and the number of orphan messages in the work stream.
func (s *sys) queueState(ctx context.Context) (string, int) {
	var left []string
	for _, c := range []string{s.name + "-bulk", s.name + "-interactive"} {
		ci, err := s.js.Consumer(ctx, s.name, c)
		if err != nil {
			return fmt.Sprintf("consumer %s: %v", c, err), 0
		}
		info := ci.CachedInfo()
		if info.NumPending > 0 || info.NumAckPending > 0 {
			left = append(left, fmt.Sprintf("consumer %s: %d pending, %d unacknowledged", c, info.NumPending, info.NumAckPending))
		}
	}
	dlq, err := s.js.Stream(ctx, s.name+"_DLQ")
	if err != nil {
		return fmt.Sprintf("stream %s_DLQ: %v", s.name, err), 0
	}
	if n := dlq.CachedInfo().State.Msgs; n > 0 {
		left = append(left, fmt.Sprintf("%d dead letters", n))
	}
	if len(left) > 0 {
		return strings.Join(left, "; "), 0
	}
	work, err := s.js.Stream(ctx, s.name)
	if err != nil {
		return fmt.Sprintf("stream %s: %v", s.name, err), 0
	}
	st := work.CachedInfo().State
	if st.Msgs == 0 {
		return "", 0
	}
	orphans := 0
	for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
		m, err := work.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Sprintf("stream %s message %d: %v", s.name, seq, err), 0
		}
		b, err := queue.Decode(m.Data)
		if err != nil {
			return fmt.Sprintf("stream %s message %d: %v", s.name, seq, err), 0
		}
		done, err := s.rdb.GetBit(ctx, s.prefix+"job:{"+b.JobID+"}:batches", int64(b.Index)).Result()
		if err != nil || done != 1 {
			return fmt.Sprintf("stream %s message %d: batch %d of job %s is left undone (%v)", s.name, seq, b.Index, b.JobID, err), 0
		}
		orphans++
	}
	return "", orphans
}

// lines returns the lines of s containing every one of subs.
func lines(s string, subs ...string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		ok := l != ""
		for _, sub := range subs {
			ok = ok && strings.Contains(l, sub)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}
