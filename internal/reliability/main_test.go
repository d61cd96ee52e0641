package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/gen"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
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
	clue17  = "testdata/17_clue_200.txt" // ~0.1 ms each under -race: quick jobs
	hardest = "testdata/hardest_200.txt" // ~1 ms each under -race: jobs that last
)

// options describe the deployment a test gets.
type options struct {
	privateNATS  bool     // a nats-server of its own, which the test may stop
	privateRedis bool     // a redis-server of its own, which the test may stop
	redisArgs    []string // more redis-server arguments
	env          []string // more SUDOKU_* settings, after the defaults
}

// sys is the deployment under test: NATS and Redis (shared or private), a
// work stream, results stream, jobs bucket, dead-letter stream, consumer,
// subjects and Redis key prefix of its own, the settings every sudoku
// process of the test gets, and clients for the test to look with. Every
// sudoku command runs as a child process (this test binary as the CLI),
// so tests share nothing but the servers.
type sys struct {
	t           *testing.T
	name        string // streams, consumer and subject prefix
	prefix      string // Redis key prefix
	env         []string
	nats        *testenv.Server // nil for the shared server
	natsMonitor int             // the private server's monitoring port
	redis       *testenv.Server // nil for the shared server
	natsURL     string
	redisAddr   string
	rdb         *redis.Client
	nc          *nats.Conn
	q           *queue.Queue // set up with the very options the processes get
	batchSize   int
	bin         string // the sudoku command: this test binary unless set
}

// newSys sets up a deployment for t.
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
	cfg := s.config()
	s.batchSize = cfg.Queue.BatchSize

	// The test's own clients reconnect for ever, as the services do.
	s.rdb = redis.NewClient(&redis.Options{Addr: s.redisAddr, DialTimeout: time.Second, MaxRetries: -1})
	var err error
	s.nc, err = nats.Connect(s.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to %s: %v", s.natsURL, err)
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The same options as the processes', or each Setup would change the
	// consumer back and forth.
	if s.q, err = queue.Setup(ctx, js, app.QueueOptions(cfg.Queue, cfg.Job.ResultTTL)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.nats == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.q.Delete(ctx); err != nil {
				t.Logf("delete the test's streams: %v", err)
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

// config returns the configuration the sudoku processes of s get.
func (s *sys) config() *config.Config {
	s.t.Helper()
	m := map[string]string{}
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	cfg, err := config.Load(config.LoadOptions{Env: func(k string) (string, bool) { v, ok := m[k]; return v, ok }})
	if err != nil {
		s.t.Fatal(err)
	}
	return cfg
}

// run runs the sudoku command line to its end (at most d), with stdin as
// its input, and returns its exit status and output.
func (s *sys) run(d time.Duration, stdin string, args ...string) (code int, stdout, stderr string) {
	s.t.Helper()
	p := s.startIn("sudoku "+strings.Join(args, " "), strings.NewReader(stdin), nil, args...)
	code = p.wait(d)
	return code, p.stdout.String(), p.stderr.String()
}

// mustRun runs a command that must end within 2 minutes with exit status
// want.
func (s *sys) mustRun(want int, args ...string) (stdout, stderr string) {
	s.t.Helper()
	code, stdout, stderr := s.run(2*time.Minute, "", args...)
	if code != want {
		s.t.Fatalf("sudoku %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, want, tail(stderr, 40))
	}
	return stdout, stderr
}

// submit submits file without waiting and returns the job id.
func (s *sys) submit(file string) string {
	s.t.Helper()
	out, _ := s.mustRun(cli.ExitOK, "submit", file)
	id := strings.TrimSpace(out)
	if !job.ValidID(id) {
		s.t.Fatalf("submit printed %q, not a job id", out)
	}
	return id
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
// from extraEnv).
func (s *sys) start(name string, extraEnv []string, args ...string) *proc {
	s.t.Helper()
	return s.startIn(name, nil, extraEnv, args...)
}

// startIn is start with stdin as the process's standard input (nil for
// none). When the test ends, a process still running gets SIGTERM, then
// SIGKILL after 20s; its stderr is logged when the test failed; and a data
// race it reported fails the test.
func (s *sys) startIn(name string, stdin io.Reader, extraEnv []string, args ...string) *proc {
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
	p.cmd.Stdin = stdin
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
			s.t.Errorf("%s reported a data race:\n%s", name, tail(p.stderr.String(), 60))
		}
		if s.t.Failed() {
			s.t.Logf("%s (exit %d) stderr:\n%s", name, p.code, logTail(p.stderr.String()))
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

// logTail is the end of a process's log, without the long start-up line
// that prints the configuration.
func logTail(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "config.nats.url=") {
			keep = append(keep, l)
		}
	}
	return tail(strings.Join(keep, "\n"), 40)
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
// exit status; after d it makes the process print its goroutines
// (SIGQUIT), kills it and fails the test.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(3 * time.Second):
			p.kill()
		}
		p.t.Fatalf("%s still running after %v; stderr:\n%s", p.name, d, tail(p.stderr.String(), 80))
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

// generator returns a generator of distinct puzzles made from fixture.
func generator(t *testing.T, fixture string, seed uint64) *gen.Generator {
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
	return g
}

// genFile writes n distinct puzzles made from fixture (internal/gen) to a
// file and returns its name and the puzzles.
func genFile(t *testing.T, fixture string, n int, seed uint64) (string, []string) {
	t.Helper()
	var b bytes.Buffer
	if err := gen.Write(context.Background(), &b, generator(t, fixture, seed), n); err != nil {
		t.Fatal(err)
	}
	puzzles := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	return writeLines(t, puzzles), puzzles
}

// mixedFile writes n distinct puzzles to a file, one in every hardEvery
// made from the hardest fixture and the others from the 17-clue one, and
// returns its name and the puzzles.
func mixedFile(t *testing.T, n, hardEvery int, seed uint64) (string, []string) {
	t.Helper()
	easy, hard := generator(t, clue17, seed), generator(t, hardest, seed)
	seen := make(map[solver.Grid]bool, n)
	puzzles := make([]string, 0, n)
	for len(puzzles) < n {
		g := easy
		if len(puzzles)%hardEvery == hardEvery-1 {
			g = hard
		}
		p, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !seen[p] {
			seen[p] = true
			puzzles = append(puzzles, p.String())
		}
	}
	return writeLines(t, puzzles), puzzles
}

// writeLines writes lines to a new file and returns its name.
func writeLines(t *testing.T, lines []string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "puzzles.txt")
	if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
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

// status returns producer.JobStatus of a job.
func (s *sys) status(id string) producer.Status {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := producer.JobStatus(ctx, s.q, id)
	if err != nil {
		s.t.Fatalf("job %s: %v", id, err)
	}
	return st
}

// batchesDone returns how many batches of a job have their results in the
// results stream, or -1 when JetStream does not answer now. It is cheap
// enough to poll: one stream info, filtered to the job's subjects.
func (s *sys) batchesDone(id string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := s.q.Results.Info(ctx, jetstream.WithSubjectFilter(s.q.Opts.ResultsFilter(id)))
	if err != nil {
		return -1
	}
	return len(info.State.Subjects)
}

// waitFor polls cond every 20ms until it is true, failing the test after d.
func (s *sys) waitFor(what string, d time.Duration, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not after %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tally reads the headers of every results message of job id: the batches
// that have results (each subject holds one message) and the sum of their
// counts.
func (s *sys) tally(id string) (batches map[uint64]bool, counts job.Counts) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batches, counts = map[uint64]bool{}, job.Counts{}
	c, err := s.q.Results.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.q.Opts.ResultsFilter(id)}, HeadersOnly: true})
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	for left := info.NumPending; left > 0; {
		fetched, err := c.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			s.t.Fatal(err)
		}
		got := 0
		for m := range fetched.Messages() {
			got++
			i := strings.LastIndexByte(m.Subject(), '.')
			index, err := strconv.ParseUint(m.Subject()[i+1:], 10, 64)
			if err != nil || batches[index] {
				s.t.Fatalf("results message on %s: %v, or a second one", m.Subject(), err)
			}
			batches[index] = true
			cs, err := job.ParseCounts(m.Headers().Get(queue.HdrCounts))
			if err != nil {
				s.t.Fatalf("results message on %s: %v", m.Subject(), err)
			}
			for st, n := range cs {
				counts[st] += n
			}
		}
		if err := fetched.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			s.t.Fatal(err)
		}
		if got == 0 {
			s.t.Fatalf("results of job %s: %d messages left that do not come", id, left)
		}
		left -= uint64(got)
	}
	return batches, counts
}

// want is what a job's record must say.
type want struct {
	// queued < 0: any number from the lines the workers answered to all
	// but the invalid and repeated ones (the producer stops looking the
	// cache up after a batch it finds nothing of, and the workers find
	// the rest; a finished record counts every puzzle from the cache).
	lines, queued, cached int64
	counts                job.Counts // results by status; nil: lines unique
}

// checkJob checks a finished job against JetStream: its record (state
// finished, the counts of its lines exactly, results by status exactly,
// every batch done) and its results messages read independently of the
// record (one per batch published, their Sudoku-Counts headers adding up
// to the same counts, no result for a batch it does not have).
func (s *sys) checkJob(id string, w want) producer.Status {
	s.t.Helper()
	if w.counts == nil {
		w.counts = job.Counts{result.StatusUnique: w.lines}
	}
	st := s.status(id)
	r := &st
	if w.queued < 0 {
		w.queued = r.Queued
		answered := r.Lines - r.Invalid - r.Repeated // by the producer from the cache, or by the workers
		if r.Queued < answered-r.Cached || r.Queued > answered {
			s.t.Fatalf("job %s: %d queued of %d lines (%d invalid, %d repeated), %d cached", id, r.Queued, r.Lines,
				r.Invalid, r.Repeated, r.Cached)
		}
	}
	got := fmt.Sprintf("state %s, %d lines: %d queued, %d cached, %d repeated, %d invalid; counts %v; %d of %d batches, %d lines done",
		r.State, r.Lines, r.Queued, r.Cached, r.Repeated, r.Invalid, r.Counts, st.BatchesDone, r.Batches, st.Done)
	wantRec := fmt.Sprintf("state finished, %d lines: %d queued, %d cached, 0 repeated, %d invalid; counts %v; %d of %d batches, %d lines done",
		w.lines, w.queued, w.cached, w.counts[result.StatusInvalid], w.counts, r.Batches, r.Batches, w.lines)
	if got != wantRec {
		s.t.Fatalf("job %s:\n got %s\nwant %s", id, got, wantRec)
	}
	if min := (w.lines + int64(s.batchSize) - 1) / int64(s.batchSize); r.Batches < min || r.Batches > w.lines {
		s.t.Fatalf("job %s: %d batches for %d lines in batches of at most %d", id, r.Batches, w.lines, s.batchSize)
	}
	batches, counts := s.tally(id)
	for i := range uint64(r.Batches) {
		if !batches[i] {
			s.t.Fatalf("job %s: no results message for batch %d", id, i)
		}
	}
	if len(batches) != int(r.Batches) || counts.String() != w.counts.String() {
		s.t.Fatalf("job %s: %d results messages (want %d), their headers count %v (want %v)", id, len(batches), r.Batches, counts, w.counts)
	}
	return st
}

// describe says where job id stands, for a test that failed waiting for
// it: its record, the batches without results (the first ones), its
// lane's consumer and the work stream.
func (s *sys) describe(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	rec, _, err := job.NewStore(s.q.JS, s.q.Jobs).Get(ctx, id)
	fmt.Fprintf(&b, "job %s: state %s, %d lines, %d batches (%v)\n", id, rec.State, rec.Lines, rec.Batches, err)
	var missing []uint64
	for i := range uint64(rec.Batches) {
		if _, err := s.q.Results.GetLastMsgForSubject(ctx, s.q.Opts.ResultSubject(id, i)); err != nil {
			if missing = append(missing, i); len(missing) == 10 {
				break
			}
		}
	}
	fmt.Fprintf(&b, "%d batches with results; the first without: %v\n", s.batchesDone(id), missing)
	name, err := s.q.JobConsumer(ctx, id)
	if err == nil {
		var c jetstream.Consumer
		if c, err = s.q.JS.Consumer(ctx, s.q.Opts.Stream, name); err == nil {
			ci := c.CachedInfo()
			fmt.Fprintf(&b, "its lane's consumer %s: %d pending, %d unacknowledged, %d redelivered, %d waiting, ack floor %d, delivered %d\n",
				name, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.AckFloor.Stream, ci.Delivered.Stream)
		}
	}
	if err != nil {
		fmt.Fprintf(&b, "its lane's consumer: %v\n", err)
	}
	if str, err := s.q.JS.Stream(ctx, s.q.Opts.Stream); err == nil {
		st := str.CachedInfo().State
		fmt.Fprintf(&b, "work stream: %d messages, sequences %d-%d\n", st.Msgs, st.FirstSeq, st.LastSeq)
	}
	if str, err := s.q.JS.Stream(ctx, s.q.Opts.ResultsStream()); err == nil {
		st := str.CachedInfo().State
		fmt.Fprintf(&b, "results stream: %d messages, sequences %d-%d, %d consumers\n", st.Msgs, st.FirstSeq, st.LastSeq, st.Consumers)
	}
	return b.String()
}

// lane returns the lane of job id, read from its record.
func (s *sys) lane(id string) queue.Lane {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := s.q.JobLane(ctx, id)
	if err != nil {
		s.t.Fatal(err)
	}
	return l
}

// waitJob waits up to d for p, a process waiting for job id, to exit and
// returns its exit status; when it does not exit, it says where the job
// stands before failing the test.
func (s *sys) waitJob(p *proc, id string, d time.Duration) int {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for !p.exited() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !p.exited() {
		s.t.Logf("%s still running after %v:\n%s", p.name, d, s.describe(id))
	}
	return p.wait(time.Second)
}

// checkDrained checks that nothing is left to do: no message pending or
// unacknowledged on the lanes' consumers, none dead-lettered, and no
// message in the work stream but orphans of batches whose results are
// stored. (A nats-server killed with SIGKILL may come back with messages
// that their consumer had seen acknowledged but that the stream had not
// yet removed: they are never delivered again, and their batches are
// done, so nothing is lost; they only take room. The test logs how many.)
func (s *sys) checkDrained() {
	s.t.Helper()
	// Acks are asynchronous, and a redelivered duplicate may still be in
	// work: give them a moment.
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	first := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		left, orphans := s.queueState(ctx)
		cancel()
		if left == "" {
			if first != "" {
				s.t.Logf("the queue drained in %v after the job finished; left at first: %s", time.Since(start).Round(time.Millisecond), first)
			}
			if orphans > 0 {
				s.t.Logf("%d messages left in the work stream, each of a batch whose results are stored (the server lost their removal)", orphans)
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
	b, err := s.q.Backlog(ctx)
	if err != nil {
		return "consumers: " + err.Error(), 0
	}
	if b.Pending > 0 || b.AckPending > 0 {
		left = append(left, fmt.Sprintf("jobs' consumers: %d pending, %d unacknowledged", b.Pending, b.AckPending))
	}
	dlq, err := s.q.JS.Stream(ctx, s.q.Opts.DLQStream)
	if err != nil {
		return fmt.Sprintf("stream %s: %v", s.q.Opts.DLQStream, err), 0
	}
	if n := dlq.CachedInfo().State.Msgs; n > 0 {
		left = append(left, fmt.Sprintf("%d dead letters", n))
	}
	if len(left) > 0 {
		return strings.Join(left, "; "), 0
	}
	work, err := s.q.JS.Stream(ctx, s.q.Opts.Stream)
	if err != nil {
		return fmt.Sprintf("stream %s: %v", s.q.Opts.Stream, err), 0
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
			return fmt.Sprintf("stream %s message %d: %v", s.q.Opts.Stream, seq, err), 0
		}
		b, err := job.DecodeWork(m.Data)
		if err != nil {
			return fmt.Sprintf("stream %s message %d: %v", s.q.Opts.Stream, seq, err), 0
		}
		rm, err := s.q.Results.GetLastMsgForSubject(ctx, s.q.Opts.ResultSubject(b.Job, b.Index))
		if err != nil {
			return fmt.Sprintf("stream %s message %d: batch %d of job %s is left undone (%v)", s.q.Opts.Stream, seq, b.Index, b.Job, err), 0
		}
		if r, err := job.DecodeResults(rm.Data); err != nil || r.Digest != b.ComputeDigest() {
			return fmt.Sprintf("stream %s message %d: batch %d of job %s has results that do not answer it (%v)", s.q.Opts.Stream, seq, b.Index, b.Job, err), 0
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

// jobIDRe finds the job id in what submit reports on stderr.
var jobIDRe = regexp.MustCompile(`(?m)^job ([A-Za-z0-9_-]+\.[0-9a-v]{26}): \d+ lines`)

// waitJobID waits for a submitting process to report its job id.
func waitJobID(t *testing.T, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if m := jobIDRe.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1]
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s reported no job id (exit %d):\n%s", p.name, p.code, tail(p.stderr.String(), 20))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// summaryRe finds the summary line of a waiter (submit --wait, job wait):
// the job, its number of puzzles and its counts by status.
var summaryRe = regexp.MustCompile(`(?m)^job ([A-Za-z0-9_-]+\.[0-9a-v]{26}): (\d+) puzzles?(?: in \S+ \(\d+/s\))?: (.*)$`)

// checkSummary checks that a waiter's stderr sums its job up with counts
// (such as "8000 unique", or "100 unique (60 from the workers, 40 from
// the cache)").
func checkSummary(t *testing.T, stderr, id, counts string) {
	t.Helper()
	m := summaryRe.FindStringSubmatch(stderr)
	if m == nil || m[1] != id || m[3] != counts {
		t.Fatalf("summary of job %s: want counts %q; stderr:\n%s", id, counts, tail(stderr, 10))
	}
}
