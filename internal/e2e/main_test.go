package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// asCLI is the environment variable that makes the test binary run as the
// sudoku command.
const asCLI = "SUDOKU_TEST_AS_CLI"

// TestMain lets the test binary act as the sudoku command, so tests start
// real worker and producer processes without building anything.
func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Execute(ctx)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// lookBin finds a server binary: $envVar, else name on the PATH, else in
// /usr/sbin (where Debian puts nats-server, not always on a user's PATH).
func lookBin(t testing.TB, envVar, name string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		testenv.Unavailable(t, name+" binary", err)
	}
	return p
}

// env is the environment of the sudoku processes of one test: this
// process's environment without any SUDOKU_ setting (so a developer's own
// settings do not leak in), plus the test's settings.
type env []string

// baseEnv returns the settings common to every test: quiet logs.
func baseEnv(kv ...string) env {
	return append(env{"SUDOKU_LOG_LEVEL=warn"}, kv...)
}

// with returns e with more settings (later ones win).
func (e env) with(kv ...string) env { return append(slices.Clone(e), kv...) }

// environ returns the full environment of a process.
func (e env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUDOKU_") {
			out = append(out, kv)
		}
	}
	return append(append(out, asCLI+"=1"), e...)
}

// config loads the configuration the processes of e get.
func (e env) config(t testing.TB) *config.Config {
	t.Helper()
	m := map[string]string{}
	for _, kv := range e {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	cfg, err := config.Load(config.LoadOptions{Env: func(k string) (string, bool) { v, ok := m[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// queueEnv returns settings giving a test its own stream, subjects,
// consumers and key prefix, named after name.
func queueEnv(name string) env {
	return env{
		"SUDOKU_QUEUE_STREAM=" + name,
		"SUDOKU_QUEUE_DLQ_STREAM=" + name + "_DLQ",
		"SUDOKU_QUEUE_SUBJECT_PREFIX=" + name,
		"SUDOKU_QUEUE_CONSUMER=" + name,
		"SUDOKU_REDIS_KEY_PREFIX=" + name + ":",
	}
}

// syncBuffer is a bytes.Buffer safe for a process to write while a test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a sudoku process (this test binary as the CLI).
type proc struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{} // closed when the process has exited
	code   int           // exit status, once done
}

// start starts `sudoku args...` with the environment e. When the test
// ends, a process still running gets SIGTERM, then SIGKILL after 20s;
// when the test failed, its stderr is logged.
func start(t testing.TB, name string, e env, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = e.environ()
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		default:
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(20 * time.Second)
		if t.Failed() {
			t.Logf("%s (exit %d) stderr:\n%s", name, p.code, p.stderr.String())
		}
	})
	return p
}

// stop sends SIGTERM and waits up to d for the process to exit, then
// kills it. It returns the exit status.
func (p *proc) stop(d time.Duration) int {
	select {
	case <-p.done:
		return p.code
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("%s did not stop within %v of SIGTERM", p.name, d)
	}
	return p.code
}

// wait waits up to d for the process to exit by itself and returns its
// exit status; it fails the test (killing the process) after d.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		// SIGQUIT first: a Go process prints where every goroutine is.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(3 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.t.Fatalf("%s did not finish within %v; stderr:\n%s", p.name, d, p.stderr.String())
		return -1
	}
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

// run runs `sudoku args...` with e to its end (at most d) and returns its
// exit status and output.
func run(t testing.TB, d time.Duration, e env, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := start(t, "sudoku "+strings.Join(args, " "), e, args...)
	code = p.wait(d)
	return code, p.stdout.String(), p.stderr.String()
}

// localOut returns what `sudoku solve --local file` prints.
func localOut(t testing.TB, file string) string {
	t.Helper()
	_, out, stderr := run(t, time.Minute, baseEnv(), "solve", "--local", file)
	if out == "" {
		t.Fatalf("solve --local %s printed nothing: %s", file, stderr)
	}
	return out
}

// readLines returns the lines of a testdata file.
func readLines(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// manyPuzzles makes n distinct puzzles from the puzzles of a testdata
// file by Sudoku symmetries that keep a puzzle's number of solutions:
// relabelling the digits, and transposing. The output depends only on
// the file and n.
func manyPuzzles(t testing.TB, n int, file string) []string {
	t.Helper()
	base := readLines(t, file)
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 10*n {
			t.Fatalf("%s cannot make %d distinct puzzles", file, n)
		}
		p := base[tries%len(base)]
		perm := rng.Perm(9)
		transpose := rng.IntN(2) == 1
		var b [81]byte
		for i := range 81 {
			r, c := i/9, i%9
			if transpose {
				r, c = c, r
			}
			ch := p[i]
			if ch >= '1' && ch <= '9' {
				ch = byte('1' + perm[ch-'1'])
			} else {
				ch = '.'
			}
			b[r*9+c] = ch
		}
		if s := string(b[:]); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// writeFile writes lines to a new file in a temporary folder.
func writeFile(t testing.TB, lines []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "puzzles.txt")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// freeAddr returns 127.0.0.1:port with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
}

// waitUntil polls cond every 50ms until it is true, failing the test
// with what after d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// httpGet returns the status and body of a GET of url, or an error.
func httpGet(url string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metricValue returns the value of the sample named exactly series (as
// written in the text format, such as `sudoku_puzzles_total{status="unique"}`)
// in a /metrics page.
func metricValue(page, series string) (float64, error) {
	for line := range strings.Lines(page) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("no sample %s", series)
}

// jobStatus checks that `sudoku job status id` shows the job finished,
// with an exact count of n puzzles, all sent to the workers, all unique,
// every batch done, none failed: nothing was counted twice or lost.
func jobStatus(t testing.TB, e env, id string, n int) {
	t.Helper()
	code, status, stderr := run(t, time.Minute, e, "job", "status", id)
	if code != 0 {
		t.Fatalf("job status: exit %d: %s", code, stderr)
	}
	batches := regexp.MustCompile(`(?m)^done      \d+ of \d+ lines \(100\.0%\), (\d+) of (\d+) batches$`).FindStringSubmatch(status)
	if batches == nil || batches[1] != batches[2] {
		t.Errorf("job status does not show every batch done:\n%s", status)
	}
	for _, s := range []string{"state     finished\n",
		fmt.Sprintf("lines     %d: %d to the workers, 0 cached, 0 repeated, 0 invalid\n", n, n),
		fmt.Sprintf("done      %d of %d lines (100.0%%)", n, n),
		fmt.Sprintf("results   %d unique\n", n), "unsolved  0 "} {
		if !strings.Contains(status, s) {
			t.Errorf("job status lacks %q:\n%s", s, status)
		}
	}
}
