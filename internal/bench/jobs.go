package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/gen"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Ways to submit a job, for JobsOptions.Via.
const (
	// ViaHTTP posts to sudoku serve's POST /v1/jobs.
	ViaHTTP = "http"
	// ViaMicro requests the workers' NATS submit endpoint.
	ViaMicro = "micro"
	// ViaCLI runs one 'sudoku submit' process a job.
	ViaCLI = "cli"
)

// JobsOptions say what Jobs measures and where.
type JobsOptions struct {
	// Config is the deployment's configuration (NATS, Redis, serve's
	// token and address); with Deployment, its NATS and Redis are
	// replaced by the private ones.
	Config *config.Config
	// Jobs jobs of Puzzles puzzles each, from Clients clients at once,
	// spread over Owners owners ("bench-0", "bench-1", ...).
	Jobs, Puzzles, Clients, Owners int
	// Via is how a job is submitted: ViaHTTP, ViaMicro or ViaCLI.
	Via string
	// URL is sudoku serve's base URL for ViaHTTP without Deployment
	// (default http:// and serve.addr).
	URL string
	// Exe is the sudoku binary run as serve, the workers and ViaCLI's
	// submits (default: this process's executable).
	Exe string
	// NATSPID is nats-server's process, whose CPU is read (default: the
	// listener of nats.url's port, on this host).
	NATSPID int
	// Deployment starts a private nats-server, redis-server, serve and
	// Workers workers for the run.
	Deployment bool
	Workers    int
	// Settle is the wait after the last job ended before counting the
	// consumers left; Timeout bounds the whole run.
	Settle, Timeout time.Duration
	// Seed seeds the puzzles made from the base file (0: from the clock,
	// so none is cached).
	Seed uint64
	// Stderr receives the private deployment's announcement.
	Stderr io.Writer
}

// JobsResult are the figures of one Jobs run.
type JobsResult struct {
	Jobs    int    `json:"jobs"`
	Puzzles int    `json:"puzzles_per_job"`
	Clients int    `json:"clients"`
	Owners  int    `json:"owners"`
	Via     string `json:"via"`
	// Workers is the worker processes of a Deployment run (0: not ours).
	Workers int `json:"workers,omitempty"`
	// SubmitSeconds is the time from the first submission to the last
	// one's answer; FinishSeconds until every job had ended.
	SubmitSeconds float64 `json:"submit_seconds"`
	FinishSeconds float64 `json:"finish_seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	// JobP50Seconds and JobP90Seconds: a job's time from its submission
	// to its end.
	JobP50Seconds float64 `json:"job_p50_seconds"`
	JobP90Seconds float64 `json:"job_p90_seconds"`
	// NATSCPUPerJobMS is nats-server's CPU over FinishSeconds, a job, in
	// milliseconds; absent when its process is not known.
	NATSCPUPerJobMS *float64 `json:"nats_cpu_per_job_ms,omitempty"`
	// ConsumersLeft is the consumers on the work stream after Settle.
	ConsumersLeft int `json:"consumers_left"`
	// RecordWritesPerJob is the writes to the jobs bucket (records and
	// manifests) a job; NATSMsgsInPerJob and NATSMsgsOutPerJob the
	// messages nats-server took in and sent out a job (with Deployment:
	// its /varz), over FinishSeconds.
	RecordWritesPerJob float64  `json:"record_writes_per_job"`
	NATSMsgsInPerJob   *float64 `json:"nats_msgs_in_per_job,omitempty"`
	NATSMsgsOutPerJob  *float64 `json:"nats_msgs_out_per_job,omitempty"`
	// Finished and Failed count the jobs by how they ended (Failed
	// holds cancelled ones too).
	Finished int `json:"finished"`
	Failed   int `json:"failed"`
}

// Jobs submits o.Jobs jobs of o.Puzzles puzzles each, made fresh from
// the puzzles of bases (a puzzle file named name; gen's symmetries, so
// none is cached), from o.Clients clients at once, and measures the time
// to submit them all, until every one has ended (from a watch of the job
// records started before the first submission), each job's time,
// nats-server's CPU and messages a job, the record writes a job, and the
// consumers left o.Settle after the last job ended.
func Jobs(ctx context.Context, bases io.Reader, name string, f JobsOptions) (*JobsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	c := *f.Config
	cfg := &c
	if f.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		f.Exe = exe
	}
	bodies, err := jobBodies(bases, name, f)
	if err != nil {
		return nil, err
	}
	natsPID, serveURL, monitor := f.NATSPID, f.URL, ""
	if f.Deployment {
		d, err := startDeployment(ctx, f.Exe, f.Workers, f.Stderr)
		if d != nil {
			defer d.stop()
		}
		if err != nil {
			return nil, err
		}
		cfg.NATS.URL, cfg.Redis.Addrs = d.natsURL, []string{d.redisAddr}
		natsPID, serveURL, monitor = d.natsPID, d.serveURL, d.monitor
	} else {
		if natsPID == 0 {
			natsPID, _ = ServerPIDs(cfg)
		}
		if serveURL == "" {
			serveURL = "http://" + cfg.Serve.Addr
		}
	}
	conn, err := app.Open(ctx, cfg, app.OpenOptions{NoCache: true, NoConsumer: true}, discardLogger())
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	// The jobs' ends, from a watch of the records started before the
	// first submission.
	ends := newJobEnds()
	w, err := conn.Queue.Jobs.Watch(ctx, "*.*", jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("bench: watch the job records: %w", err)
	}
	defer func() { _ = w.Stop() }()
	go ends.follow(w)

	submit, err := submitter(cfg, conn, f, serveURL)
	if err != nil {
		return nil, err
	}
	res := &JobsResult{Jobs: f.Jobs, Puzzles: f.Puzzles, Clients: f.Clients, Owners: f.Owners, Via: f.Via}
	if f.Deployment {
		res.Workers = f.Workers
	}
	kvName := "KV_" + conn.Queue.Opts.JobsBucket()
	kv0 := streamLastSeq(ctx, conn.Queue, kvName)
	in0, out0, varzErr := natsVarz(monitor)
	cpu0, start := procCPU(natsPID), time.Now()
	submitted := make([]time.Time, f.Jobs)
	ids := make([]string, f.Jobs)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for range f.Clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= f.Jobs || ctx.Err() != nil {
					return
				}
				submitted[i] = time.Now()
				id, err := submit(ctx, benchOwner(i, f.Owners), bodies[i])
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("bench: job %d: %w", i, err); cancel() })
					return
				}
				ids[i] = id
				ends.expect(id)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	res.SubmitSeconds = time.Since(start).Seconds()
	if err := ends.wait(ctx, f.Jobs); err != nil {
		return nil, fmt.Errorf("bench: %d of %d jobs ended: %w", ends.count(), f.Jobs, err)
	}
	lastEnd := ends.last()
	res.FinishSeconds = lastEnd.Sub(start).Seconds()
	if natsPID != 0 {
		// The CPU until now, a little after the last end: at most a
		// watch delivery's time more.
		ms := float64((procCPU(natsPID) - cpu0).Microseconds()) / 1000 / float64(f.Jobs)
		res.NATSCPUPerJobMS = &ms
	}
	if in1, out1, err := natsVarz(monitor); err == nil && varzErr == nil {
		in, out := float64(in1-in0)/float64(f.Jobs), float64(out1-out0)/float64(f.Jobs)
		res.NATSMsgsInPerJob, res.NATSMsgsOutPerJob = &in, &out
	}
	res.RecordWritesPerJob = float64(streamLastSeq(ctx, conn.Queue, kvName)-kv0) / float64(f.Jobs)
	res.JobsPerSecond = float64(f.Jobs) / res.FinishSeconds
	lat := make([]float64, f.Jobs)
	for i, id := range ids {
		e := ends.get(id)
		lat[i] = e.at.Sub(submitted[i]).Seconds()
		if e.state == job.Finished {
			res.Finished++
		} else {
			res.Failed++
		}
	}
	res.JobP50Seconds, res.JobP90Seconds = quantile(lat, 0.5), quantile(lat, 0.9)

	select {
	case <-time.After(f.Settle):
	case <-ctx.Done():
	}
	if res.ConsumersLeft, err = countConsumers(ctx, conn.Queue); err != nil {
		return nil, err
	}
	return res, nil
}

// WriteText writes r on one line for people; settle is the wait before
// the consumers were counted.
func (r *JobsResult) WriteText(w io.Writer, settle time.Duration) error {
	msgs := ""
	if r.NATSMsgsInPerJob != nil {
		msgs = fmt.Sprintf(", nats-server messages %.1f in, %.1f out", *r.NATSMsgsInPerJob, *r.NATSMsgsOutPerJob)
	}
	cpu := "n/a (no nats-server process known: --nats-pid)"
	if r.NATSCPUPerJobMS != nil {
		cpu = fmt.Sprintf("%.3f ms", *r.NATSCPUPerJobMS)
	}
	_, err := fmt.Fprintf(w, "%d jobs of %d puzzles, %d clients via %s, %d owners: submitted in %.2f s; all ended after %.2f s "+
		"(%.0f jobs/s; a job p50 %.3f s, p90 %.3f s; %d finished, %d failed); nats-server CPU a job %s; consumers left after %s: %d; "+
		"a job: %.1f record writes%s\n",
		r.Jobs, r.Puzzles, r.Clients, r.Via, r.Owners, r.SubmitSeconds, r.FinishSeconds, r.JobsPerSecond,
		r.JobP50Seconds, r.JobP90Seconds, r.Finished, r.Failed, cpu, settle, r.ConsumersLeft,
		r.RecordWritesPerJob, msgs)
	return err
}

// benchOwner is the owner of job i of the run.
func benchOwner(i, owners int) string { return "bench-" + strconv.Itoa(i%owners) }

// jobBodies makes the jobs' inputs: f.Puzzles fresh puzzles each, one a
// line, made from the puzzles of r (the file file).
func jobBodies(r io.Reader, file string, f JobsOptions) ([][]byte, error) {
	bases, err := gen.ReadBases(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	seed := f.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	g, err := gen.New(bases, seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	bodies := make([][]byte, f.Jobs)
	for i := range bodies {
		var b bytes.Buffer
		for range f.Puzzles {
			p, err := g.Next()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			b.WriteString(p.String())
			b.WriteByte('\n')
		}
		bodies[i] = b.Bytes()
	}
	return bodies, nil
}

// submitFunc submits one job for owner and returns its id.
type submitFunc func(ctx context.Context, owner string, body []byte) (string, error)

// submitter returns the submit of f.Via.
func submitter(cfg *config.Config, conn *app.Conn, f JobsOptions, serveURL string) (submitFunc, error) {
	switch f.Via {
	case ViaHTTP:
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: f.Clients, MaxConnsPerHost: f.Clients}}
		token := cfg.Serve.Token.Reveal()
		if strings.Contains(token, "\n") || strings.Contains(token, " ") {
			token = "" // principals' lines: not one token to send
		}
		url := strings.TrimSuffix(serveURL, "/") + "/v1/jobs"
		return func(ctx context.Context, owner string, body []byte) (string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return "", err
			}
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set("X-Sudoku-Owner", owner)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var sub struct{ ID string }
			if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &sub) != nil || sub.ID == "" {
				return "", fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(data))
			}
			return sub.ID, nil
		}, nil
	case ViaMicro:
		return func(ctx context.Context, owner string, body []byte) (string, error) {
			subject := conn.Queue.Opts.SubmitSubject(owner)
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			m, err := conn.NC.RequestWithContext(rctx, subject, body)
			if err != nil {
				return "", fmt.Errorf("request %s: %w", subject, err)
			}
			if e := m.Header.Get("Nats-Service-Error"); e != "" {
				return "", fmt.Errorf("%s: %s %s", subject, m.Header.Get("Nats-Service-Error-Code"), e)
			}
			var sub struct{ ID string }
			if json.Unmarshal(m.Data, &sub) != nil || sub.ID == "" {
				return "", fmt.Errorf("%s: a reply without a job id: %.200s", subject, m.Data)
			}
			return sub.ID, nil
		}, nil
	default:
		exe := f.Exe
		env := append(os.Environ(), "SUDOKU_NATS_URL="+cfg.NATS.URL, "SUDOKU_REDIS_ADDRS="+strings.Join(cfg.Redis.Addrs, ","))
		return func(ctx context.Context, owner string, body []byte) (string, error) {
			c := exec.CommandContext(ctx, exe, "submit", "-")
			c.Env = append(slices.Clip(env), "SUDOKU_JOB_OWNER="+owner)
			c.Stdin = bytes.NewReader(body)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			out, err := c.Output()
			if err != nil {
				return "", fmt.Errorf("sudoku submit: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
			}
			id := strings.TrimSpace(string(out))
			if !job.ValidID(id) {
				return "", fmt.Errorf("sudoku submit printed %q, not a job id", id)
			}
			return id, nil
		}, nil
	}
}

// jobEnd is how and when a job ended, as the watch saw it.
type jobEnd struct {
	state job.State
	at    time.Time
}

// jobEnds collects the ends of the run's jobs from a watch of the records.
type jobEnds struct {
	mu       sync.Mutex
	ended    map[string]jobEnd // every job seen ending
	expected map[string]bool   // the run's jobs
	n        int               // of expected, ended
	changed  chan struct{}     // closed and replaced when n grows
	lastAt   time.Time
}

func newJobEnds() *jobEnds {
	return &jobEnds{ended: map[string]jobEnd{}, expected: map[string]bool{}, changed: make(chan struct{})}
}

func (e *jobEnds) follow(w jetstream.KeyWatcher) {
	for u := range w.Updates() {
		if u == nil || u.Operation() != jetstream.KeyValuePut || !job.ValidID(u.Key()) {
			continue
		}
		r, err := job.DecodeRecord(u.Value())
		if err != nil || !r.State.Ended() {
			continue
		}
		e.mu.Lock()
		if _, seen := e.ended[u.Key()]; !seen {
			e.ended[u.Key()] = jobEnd{state: r.State, at: time.Now()}
			if e.expected[u.Key()] {
				e.grewLocked(e.ended[u.Key()].at)
			}
		}
		e.mu.Unlock()
	}
}

// expect adds id to the run's jobs.
func (e *jobEnds) expect(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expected[id] = true
	if end, ok := e.ended[id]; ok {
		e.grewLocked(end.at)
	}
}

func (e *jobEnds) grewLocked(at time.Time) {
	e.n++
	if at.After(e.lastAt) {
		e.lastAt = at
	}
	close(e.changed)
	e.changed = make(chan struct{})
}

// wait waits until n of the run's jobs have ended.
func (e *jobEnds) wait(ctx context.Context, n int) error {
	for {
		e.mu.Lock()
		done, ch := e.n >= n, e.changed
		e.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (e *jobEnds) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func (e *jobEnds) last() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastAt
}

func (e *jobEnds) get(id string) jobEnd {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended[id]
}

// streamLastSeq returns the last sequence of stream name (0 when it
// cannot be read).
func streamLastSeq(ctx context.Context, q *queue.Queue, name string) uint64 {
	s, err := q.JS.Stream(ctx, name)
	if err != nil {
		return 0
	}
	return s.CachedInfo().State.LastSeq
}

// natsVarz returns the messages nats-server has taken in and sent out, from
// its monitoring endpoint's /varz at base ("": not known).
func natsVarz(base string) (in, out uint64, err error) {
	if base == "" {
		return 0, 0, errors.New("no monitoring endpoint")
	}
	resp, err := http.Get(base + "/varz")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var v struct {
		InMsgs  uint64 `json:"in_msgs"`
		OutMsgs uint64 `json:"out_msgs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return 0, 0, err
	}
	return v.InMsgs, v.OutMsgs, nil
}

// countConsumers returns the number of consumers on the work stream.
func countConsumers(ctx context.Context, q *queue.Queue) (int, error) {
	s, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	n := 0
	names := s.ConsumerNames(ctx)
	for range names.Name() {
		n++
	}
	if err := names.Err(); err != nil {
		return 0, fmt.Errorf("bench: the consumers of %s: %w", q.Opts.Stream, err)
	}
	return n, nil
}

// deployment is a private deployment started for a run: nats-server,
// redis-server, serve and workers, on free loopback ports.
type deployment struct {
	dir                          string
	procs                        []*exec.Cmd
	natsPID                      int
	natsURL, redisAddr, serveURL string
	monitor                      string // nats-server's monitoring base URL
}

// freeAddr returns a free loopback TCP address.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startDeployment starts a private deployment with workers worker
// processes; its processes' output goes to files in its folder, named in
// the error of one that does not start. Stop it (also after an error).
func startDeployment(ctx context.Context, exe string, workers int, stderr io.Writer) (*deployment, error) {
	dir, err := os.MkdirTemp("", "sudoku-bench-")
	if err != nil {
		return nil, err
	}
	d := &deployment{dir: dir}
	natsAddr, err1 := freeAddr()
	redisAddr, err2 := freeAddr()
	serveAddr, err3 := freeAddr()
	monAddr, err4 := freeAddr()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return d, err
	}
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return d, err
		}
	}
	start := func(name, program string, env []string, args ...string) (*exec.Cmd, error) {
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, err
		}
		c := exec.Command(program, args...)
		c.Stdout, c.Stderr = log, log
		if env != nil {
			c.Env = env
		}
		if err := c.Start(); err != nil {
			log.Close()
			return nil, fmt.Errorf("bench: start %s: %w", name, err)
		}
		log.Close() // the child has it
		d.procs = append(d.procs, c)
		return c, nil
	}
	host, port, _ := net.SplitHostPort(natsAddr)
	_, mport, _ := net.SplitHostPort(monAddr)
	ns, err := start("nats-server", "nats-server", nil, "-js", "-a", host, "-p", port, "-m", mport,
		"-sd", filepath.Join(dir, "js"))
	if err != nil {
		return d, err
	}
	d.natsPID, d.natsURL, d.monitor = ns.Process.Pid, "nats://"+natsAddr, "http://"+monAddr
	host, port, _ = net.SplitHostPort(redisAddr)
	if _, err := start("redis-server", "redis-server", nil, "--port", port, "--bind", host, "--save", "",
		"--appendonly", "no", "--dir", dir); err != nil {
		return d, err
	}
	d.redisAddr = redisAddr
	// Both listening before anything connects.
	for _, a := range []string{natsAddr, redisAddr} {
		if err := waitListening(ctx, a); err != nil {
			return d, fmt.Errorf("bench: %s (logs in %s): %w", a, dir, err)
		}
	}
	env := append(os.Environ(), "SUDOKU_NATS_URL="+d.natsURL, "SUDOKU_REDIS_ADDRS="+redisAddr)
	if _, err := start("serve", exe, env, "serve", "--addr", serveAddr); err != nil {
		return d, err
	}
	d.serveURL = "http://" + serveAddr
	for i := range workers {
		if _, err := start("worker-"+strconv.Itoa(i), exe, env, "worker"); err != nil {
			return d, err
		}
	}
	if err := waitReady(ctx, d.serveURL+"/readyz"); err != nil {
		return d, fmt.Errorf("bench: serve (log in %s): %w", dir, err)
	}
	if err := waitWorkers(ctx, d.natsURL, workers); err != nil {
		return d, fmt.Errorf("bench: workers (logs in %s): %w", dir, err)
	}
	fmt.Fprintf(stderr, "bench: a private deployment in %s: nats %s, redis %s, serve %s, %d workers\n",
		dir, natsAddr, redisAddr, serveAddr, workers)
	return d, nil
}

// stop stops the deployment's processes, the last started first, and
// removes its folder.
func (d *deployment) stop() {
	for i := len(d.procs) - 1; i >= 0; i-- {
		c := d.procs[i]
		_ = c.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(d.dir)
}

// waitListening waits up to 10 s for something to listen on addr.
func waitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nothing listens: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitReady waits up to 30 s for url to answer 200.
func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitWorkers waits up to 30 s for n instances of the workers' micro
// service to answer a ping.
func waitWorkers(ctx context.Context, url string, n int) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return err
		}
		if err := nc.PublishRequest("$SRV.PING."+queue.ServiceName, inbox, nil); err != nil {
			return err
		}
		got := 0
		for got < n {
			if _, err := sub.NextMsg(200 * time.Millisecond); err != nil {
				break
			}
			got++
		}
		_ = sub.Unsubscribe()
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d answer", got, n)
		}
	}
}
