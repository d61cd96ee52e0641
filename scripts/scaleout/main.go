// Command scaleout measures the throughput of one job with 1, 2, 4, ...
// worker processes on this machine, with their CPU use, and writes a
// Markdown table and an SVG plot. scripts/scaleout.sh runs it; see the
// README's deployment section for the figures and how to read them.
//
// It builds the sudoku binary, makes -n distinct puzzles by relabelling
// the digits of the 17-clue set (every relabelling of a puzzle with a
// unique solution has one too), and for each worker count starts that
// many `sudoku worker` processes on the NATS and Redis given (a stream,
// subjects and key prefix of their own, so nothing is cached from an
// earlier run), and times `sudoku submit --wait` of the file from its
// start to its exit (publishing, solving, and every result read back and
// written), checking the job with `sudoku job status`. CPU comes from /proc: each worker's user+system
// time over the job, and the whole machine's busy time (NATS, Redis and
// the producer included). Everything it creates is deleted at the end.
//
//	go run ./scripts/scaleout -n 200000 -workers 1,2,4 -svg docs/scaleout.svg
package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("scaleout: ")
	var (
		n           = flag.Int("n", 200_000, "puzzles in the job")
		workersFlag = flag.String("workers", "1,2,4", "comma-separated worker process counts")
		conc        = flag.Int("concurrency", 1, "solving goroutines per worker process (SUDOKU_WORKER_CONCURRENCY; 0: GOMAXPROCS)")
		data        = flag.String("data", "", "file of base puzzles (default: the 17-clue set in shared/data)")
		natsURL     = flag.String("nats", "nats://127.0.0.1:4222", "NATS URL")
		redisAddr   = flag.String("redis", "127.0.0.1:6379", "Redis address")
		svgPath     = flag.String("svg", "", "write the plot to this SVG file")
		mdPath      = flag.String("md", "", "write the Markdown table to this file (as well as to stdout)")
		timeout     = flag.Duration("timeout", 3*time.Minute, "bound on the whole run")
		label       = flag.String("label", "17-clue", "what the puzzles are, for the plot's title")
		repeat      = flag.Int("repeat", 3, "runs per worker count; the table shows the median by job time")
	)
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	counts, err := parseCounts(*workersFlag)
	if err != nil {
		log.Fatal(err)
	}
	if *data == "" {
		*data = findData()
	}
	if _, err := os.Stat(*data); err != nil {
		fmt.Printf("scaleout: skipped: no base puzzles (%v); pass -data FILE\n", err)
		return
	}
	cfg := config{n: *n, concurrency: *conc, natsURL: *natsURL, redisAddr: *redisAddr, label: *label, repeat: max(1, *repeat)}
	rows, err := run(ctx, cfg, *data, counts)
	if err != nil {
		log.Fatal(err)
	}
	table := markdown(cfg, rows)
	fmt.Print(table)
	if *mdPath != "" {
		if err := os.WriteFile(*mdPath, []byte(table), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if *svgPath != "" {
		if err := os.WriteFile(*svgPath, []byte(plot(cfg, rows)), 0o644); err != nil {
			log.Fatal(err)
		}
		log.Printf("wrote %s", *svgPath)
	}
}

// config is what every run shares.
type config struct {
	n           int
	concurrency int
	natsURL     string
	redisAddr   string
	bin         string // the sudoku binary
	file        string // the puzzles
	label       string // what the puzzles are
	repeat      int    // runs per worker count
}

// row is the measurement of one worker count.
type row struct {
	workers    int
	elapsed    time.Duration // submit --wait, start to exit
	workerCPU  time.Duration // user+system of every worker over the job
	producer   time.Duration // user+system of the producer process
	machineCPU float64       // busy fraction of all cores over the job, 0..1
	perWorker  []float64     // puzzles each worker solved (its metrics)
	runs       []float64     // puzzles/s of every run of this count
	services   time.Duration // CPU of the nats-server and redis-server processes
	otherCPU   time.Duration // CPU of everything else (not the workers, producer, NATS or Redis)
}

func (r row) throughput(n int) float64 { return float64(n) / r.elapsed.Seconds() }

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || k > 64 {
			return nil, fmt.Errorf("-workers: bad count %q", f)
		}
		out = append(out, k)
	}
	return out, nil
}

// findData looks for shared/data/17_clue.txt above the working folder.
func findData() string {
	dir, _ := os.Getwd()
	for range 5 {
		p := filepath.Join(dir, "shared", "data", "17_clue.txt")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		p = filepath.Join(dir, "..", "shared", "data", "17_clue.txt")
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p)
		}
		dir = filepath.Dir(dir)
	}
	return "/work/shared/data/17_clue.txt"
}

func run(ctx context.Context, cfg config, data string, counts []int) ([]row, error) {
	tmp, err := os.MkdirTemp("", "scaleout")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cfg.bin = filepath.Join(tmp, "sudoku")
	log.Printf("building the sudoku binary")
	build := exec.CommandContext(ctx, "go", "build", "-o", cfg.bin, "./cmd/sudoku")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("go build (run from the module's root): %w", err)
	}
	cfg.file = filepath.Join(tmp, "puzzles.txt")
	if err := makePuzzles(data, cfg.file, cfg.n); err != nil {
		return nil, err
	}

	nc, err := nats.Connect(cfg.natsURL, nats.Timeout(2*time.Second))
	if err != nil {
		return nil, fmt.Errorf("NATS at %s: %w", cfg.natsURL, err)
	}
	defer nc.Close()
	rdb := redis.NewClient(&redis.Options{Addr: cfg.redisAddr, DialTimeout: 2 * time.Second})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis at %s: %w", cfg.redisAddr, err)
	}

	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	var rows []row
	for _, k := range counts {
		var runs, noisy []row
		for i := 0; len(runs) < cfg.repeat && i < 3*cfg.repeat; i++ {
			name := fmt.Sprintf("scaleout_%s_w%d_%d", id, k, i)
			r, err := measure(ctx, cfg, name, k)
			cleanup(nc, rdb, name)
			if err != nil {
				return rows, fmt.Errorf("%d workers: %w", k, err)
			}
			log.Printf("%d workers: %v, %.0f puzzles/s, workers' CPU %v, machine %.0f%%, other processes %v",
				k, r.elapsed.Round(time.Millisecond), r.throughput(cfg.n), r.workerCPU.Round(10*time.Millisecond),
				100*r.machineCPU, r.otherCPU.Round(10*time.Millisecond))
			// On a shared machine, a run during which other processes took
			// more than a tenth of a core is measured again.
			if r.otherCPU > r.elapsed/10 {
				log.Printf("  discarded: other processes used %.0f%% of a core", 100*r.otherCPU.Seconds()/r.elapsed.Seconds())
				noisy = append(noisy, r)
				continue
			}
			runs = append(runs, r)
		}
		if len(runs) == 0 {
			log.Printf("%d workers: every run was disturbed by other processes; keeping them", k)
			runs = noisy
		}
		// The median by job time: a run slowed by another process on a
		// shared machine does not move it.
		slices.SortFunc(runs, func(a, b row) int { return cmp.Compare(a.elapsed, b.elapsed) })
		med := runs[len(runs)/2]
		for _, r := range runs {
			med.runs = append(med.runs, r.throughput(cfg.n))
		}
		rows = append(rows, med)
	}
	return rows, nil
}

// makePuzzles writes n distinct puzzles to out: the base puzzles as they
// are, then with every digit d relabelled d+1 (9 as 1), then d+2, ...
func makePuzzles(data, out string, n int) error {
	f, err := os.Open(data)
	if err != nil {
		return err
	}
	defer f.Close()
	var base []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); len(l) == 81 {
			base = append(base, l)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(base) == 0 || n > 9*len(base) {
		return fmt.Errorf("%s: %d puzzles cannot make %d", data, len(base), n)
	}
	w, err := os.Create(out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	buf := make([]byte, 82)
	for i := range n {
		p, shift := base[i%len(base)], i/len(base)
		for j := range 81 {
			c := p[j]
			if c >= '1' && c <= '9' {
				c = '1' + (c-'1'+byte(shift))%9
			}
			buf[j] = c
		}
		buf[81] = '\n'
		bw.Write(buf)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return w.Close()
}

// measure runs the job once with k worker processes.
func measure(ctx context.Context, cfg config, name string, k int) (row, error) {
	env := append(os.Environ(),
		"SUDOKU_NATS_URL="+cfg.natsURL,
		"SUDOKU_REDIS_ADDRS="+cfg.redisAddr,
		"SUDOKU_QUEUE_STREAM="+name,
		"SUDOKU_QUEUE_DLQ_STREAM="+name+"_DLQ",
		"SUDOKU_QUEUE_SUBJECT_PREFIX="+name,
		"SUDOKU_QUEUE_CONSUMER="+name,
		"SUDOKU_REDIS_KEY_PREFIX="+name+":",
		"SUDOKU_WORKER_CONCURRENCY="+strconv.Itoa(cfg.concurrency),
		"SUDOKU_LOG_LEVEL=warn",
	)
	r := row{workers: k}
	var workers []*exec.Cmd
	var addrs []string
	defer func() {
		for _, w := range workers {
			_ = w.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = w.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = w.Process.Kill()
				<-done
			}
		}
	}()
	for i := range k {
		addr, err := freeAddr()
		if err != nil {
			return r, err
		}
		w := exec.Command(cfg.bin, "worker")
		w.Env = append(env, "SUDOKU_METRICS_ADDR="+addr)
		w.Stderr = os.Stderr
		if err := w.Start(); err != nil {
			return r, fmt.Errorf("worker %d: %w", i+1, err)
		}
		workers = append(workers, w)
		addrs = append(addrs, addr)
	}
	for _, addr := range addrs {
		if err := waitReady(ctx, addr); err != nil {
			return r, err
		}
	}

	cpu0, err := workersCPU(workers)
	if err != nil {
		return r, err
	}
	busy0, total0, err := machineCPU()
	if err != nil {
		return r, err
	}
	svc0 := servicesCPU()
	var stderr strings.Builder
	sub := exec.CommandContext(ctx, cfg.bin, "submit", "--wait", "--out", os.DevNull, cfg.file)
	sub.Env, sub.Stderr = env, &stderr
	start := time.Now()
	if err := sub.Run(); err != nil {
		return r, fmt.Errorf("submit --wait: %w: %s", err, stderr.String())
	}
	// The job's time: from the start of the submission to its last
	// result read back in input order (the job is followed as it runs).
	r.elapsed = time.Since(start)
	cpu1, err := workersCPU(workers)
	if err != nil {
		return r, err
	}
	busy1, total1, err := machineCPU()
	if err != nil {
		return r, err
	}
	r.workerCPU = cpu1 - cpu0
	r.producer = sub.ProcessState.UserTime() + sub.ProcessState.SystemTime()
	r.machineCPU = float64(busy1-busy0) / float64(total1-total0)
	r.services = servicesCPU() - svc0
	r.otherCPU = time.Duration(busy1-busy0)*clockTick - r.workerCPU - r.producer - r.services

	m := regexp.MustCompile(`job (\w+):`).FindStringSubmatch(stderr.String())
	if m == nil {
		return r, fmt.Errorf("no job id in %q", stderr.String())
	}
	st := exec.CommandContext(ctx, cfg.bin, "job", "status", m[1])
	st.Env = env
	out, err := st.Output()
	if err != nil {
		return r, fmt.Errorf("job status %s: %w", m[1], err)
	}
	if want := fmt.Sprintf("done      %d of %d lines", cfg.n, cfg.n); !strings.Contains(string(out), want) {
		return r, fmt.Errorf("job %s is not done: %s", m[1], out)
	}
	for _, addr := range addrs {
		r.perWorker = append(r.perWorker, scrape(addr, `sudoku_puzzles_total{status="unique"}`))
	}
	return r, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitReady waits (20s at most) until the worker at addr is ready.
func waitReady(ctx context.Context, addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("worker on %s not ready within 20s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scrape returns the value of one series of the worker's metrics, or NaN.
func scrape(addr, series string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return math.NaN()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return math.NaN()
}

// clockTick is the unit of /proc times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// workersCPU returns the user+system time of the processes so far, from
// /proc/PID/stat.
func workersCPU(ps []*exec.Cmd) (time.Duration, error) {
	var sum time.Duration
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Process.Pid))
		if err != nil {
			return 0, fmt.Errorf("cpu of worker %d: %w", p.Process.Pid, err)
		}
		// Fields after the command name, which is in parentheses.
		s := string(b)
		fs := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fs) < 13 {
			return 0, errors.New("/proc/PID/stat: too few fields")
		}
		utime, _ := strconv.ParseInt(fs[11], 10, 64)
		stime, _ := strconv.ParseInt(fs[12], 10, 64)
		sum += time.Duration(utime+stime) * clockTick
	}
	return sum, nil
}

// servicesCPU returns the user+system time so far of every nats-server
// and redis-server process, from /proc.
func servicesCPU() time.Duration {
	var sum time.Duration
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		if comm := s[open+1 : end]; comm != "nats-server" && comm != "redis-server" {
			continue
		}
		fs := strings.Fields(s[end+2:])
		if len(fs) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(fs[11], 10, 64)
		stime, _ := strconv.ParseInt(fs[12], 10, 64)
		sum += time.Duration(utime+stime) * clockTick
	}
	return sum
}

// machineCPU returns the busy and total jiffies of all cores, from
// /proc/stat.
func machineCPU() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fs := strings.Fields(line)
	for i, f := range fs[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

func markdown(cfg config, rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| worker processes | job time | puzzles/s | speed-up | workers' CPU | workers' CPU / job time | machine busy (%d cores) | producer CPU | NATS + Redis CPU | puzzles per worker | puzzles/s of each run |\n",
		runtime.NumCPU())
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rows {
		var per []string
		for _, v := range r.perWorker {
			per = append(per, strconv.FormatFloat(v, 'f', 0, 64))
		}
		var runs []string
		for _, v := range r.runs {
			runs = append(runs, strconv.FormatFloat(v, 'f', 0, 64))
		}
		fmt.Fprintf(&b, "| %d | %.2f s | %.0f | %.2fx | %.2f s | %.0f%% | %.0f%% | %.2f s | %.2f s | %s | %s |\n",
			r.workers, r.elapsed.Seconds(), r.throughput(cfg.n), r.throughput(cfg.n)/rows[0].throughput(cfg.n),
			r.workerCPU.Seconds(), 100*r.workerCPU.Seconds()/r.elapsed.Seconds(), 100*r.machineCPU,
			r.producer.Seconds(), r.services.Seconds(), strings.Join(per, " / "), strings.Join(runs, ", "))
	}
	return b.String()
}

// plot returns an SVG line chart of throughput against worker processes,
// with the line of perfect scaling from the first point.
func plot(cfg config, rows []row) string {
	const (
		w, h                   = 640, 440
		left, right, top, bott = 80, 60, 60, 100
	)
	maxX := rows[len(rows)-1].workers
	maxY := 0.0
	for _, r := range rows {
		maxY = math.Max(maxY, r.throughput(cfg.n))
	}
	maxY = niceCeil(maxY * 1.15)
	x := func(k float64) float64 { return left + (k-0)/float64(maxX)*(w-left-right) }
	y := func(v float64) float64 { return h - bott - v/maxY*(h-top-bott) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">sudoku-queue: one job of %d %s puzzles</text>`+"\n", left-40, cfg.n, cfg.label)
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%d cores; %d solving goroutine(s) per worker; NATS, Redis and the producer on the same machine</text>`+"\n",
		left-40, runtime.NumCPU(), cfg.concurrency)
	// Grid and axes.
	for i := 0; i <= 5; i++ {
		v := maxY * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), w-right, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y(v)+4, humanize(v))
	}
	for k := 0; k <= maxX; k++ {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999"/>`+"\n", x(float64(k)), h-bott, x(float64(k)), h-bott+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(float64(k)), h-bott+20, k)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bott, w-right, h-bott)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bott)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">worker processes</text>`+"\n", (left+w-right)/2, h-bott+72)
	fmt.Fprintf(&b, `<text x="20" y="%d" text-anchor="middle" transform="rotate(-90 20 %d)">puzzles per second</text>`+"\n", (top+h-bott)/2, (top+h-bott)/2)
	// Perfect scaling from the first point, clipped to the plot.
	r0 := rows[0]
	per := r0.throughput(cfg.n) / float64(r0.workers)
	kEnd := math.Min(float64(maxX), maxY/per)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="6 4"/>`+"\n",
		x(float64(r0.workers)), y(r0.throughput(cfg.n)), x(kEnd), y(per*kEnd))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#777" text-anchor="end">perfect scaling</text>`+"\n", x(kEnd)-6, y(per*kEnd)+18)
	// Cores.
	cores := float64(runtime.NumCPU())
	if cores <= float64(maxX) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c33" stroke-dasharray="2 3"/>`+"\n", x(cores), top, x(cores), h-bott)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#c33" text-anchor="end">%d cores</text>`+"\n", x(cores)-4, h-bott-8, runtime.NumCPU())
	}
	// The measurements.
	var pts []string
	for _, r := range rows {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(r.workers)), y(r.throughput(cfg.n))))
	}
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#1f5fbf" stroke-width="2.5"/>`+"\n", strings.Join(pts, " "))
	for i, r := range rows {
		cx, cy := x(float64(r.workers)), y(r.throughput(cfg.n))
		anchor := "middle"
		if i == len(rows)-1 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4.5" fill="#1f5fbf"/>`+"\n", cx, cy)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="%s" fill="#1f5fbf">%s/s</text>`+"\n",
			cx, cy-12, anchor, humanize(r.throughput(cfg.n)))
		// CPU under the tick: the workers' (in cores) and the machine's.
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555" font-size="11">workers %.2f</text>`+"\n",
			cx, h-bott+36, r.workerCPU.Seconds()/r.elapsed.Seconds())
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555" font-size="11">all %.0f%%</text>`+"\n",
			cx, h-bott+50, 100*r.machineCPU)
	}
	fmt.Fprintf(&b, `<text x="12" y="%d" fill="#555" font-size="11">Under each count: cores used by the workers; how busy all cores were (NATS, Redis, producer included).</text>`+"\n", h-8)
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func humanize(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

// cleanup deletes a run's streams and keys.
func cleanup(nc *nats.Conn, rdb *redis.Client, name string) {
	for _, s := range []string{name, name + "_DLQ", name + "_RESULTS", "KV_" + name + "_JOBS"} {
		_, _ = nc.Request("$JS.API.STREAM.DELETE."+s, nil, 5*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, name+":*", 5000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 5000 {
			rdb.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Unlink(ctx, keys...)
	}
}
