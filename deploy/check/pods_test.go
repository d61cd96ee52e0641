package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestPodsRunTogether runs the pods of a release with roles on, as
// processes on this machine: nats-server with the rendered nats.conf and
// the users of `sudoku roles init`, redis-server with the rendered
// arguments and ACL file, then each sudoku container's command line and
// environment: the setup Job as admin, a worker as worker, serve as
// gateway (with its API token). Only what cannot be the same outside a
// cluster is changed: the servers' ports (free loopback ones), their
// folders, the addresses the sudoku processes listen on and connect to,
// and the mount points, which become folders. It checks that the setup
// Job succeeds, that the worker's and serve's readiness and liveness
// probes answer 200 on the rendered paths, that serve's backlog gauges
// (KEDA's signal) read a job submitted with no worker running, that the
// job is solved once a worker starts and the gauges then read 0 (the
// worker exporting none of them), and that the worker drains and exits 0 on SIGTERM within
// the pod's grace period.
func TestPodsRunTogether(t *testing.T) {
	natsServer, redisServer := need(t, "nats-server"), need(t, "redis-server")
	bin, roles := sudoku(t)
	r := render(t, "roles: {enabled: true}\nserve: {tokenSecret: {name: api-token}}")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// NATS.
	natsPort, httpPort := freePort(t), freePort(t)
	conf := natsConf(t, r)
	for _, sub := range [][2]string{
		{`listen: "0.0.0.0:4222"`, fmt.Sprintf(`listen: "127.0.0.1:%d"`, natsPort)},
		{`http_port: 8222`, fmt.Sprintf(`http: "127.0.0.1:%d"`, httpPort)},
		{`store_dir: "/data"`, fmt.Sprintf(`store_dir: %q`, filepath.Join(dir, "data"))},
		{`pid_file: "/var/run/nats/nats.pid"`, fmt.Sprintf(`pid_file: %q`, filepath.Join(dir, "nats.pid"))},
	} {
		// Each line must be there once: never start on the shared ports.
		if strings.Count(conf, sub[0]) != 1 {
			t.Fatalf("nats.conf has not one %s:\n%s", sub[0], conf)
		}
		conf = strings.Replace(conf, sub[0], sub[1], 1)
	}
	write(t, filepath.Join(dir, "nats", "nats.conf"), conf)
	users, err := os.ReadFile(filepath.Join(roles, "server", "nats-users.conf"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "nats", "users", "nats-users.conf"), string(users))
	nats := start(ctx, t, dir, "nats", natsServer, []string{"-c", filepath.Join(dir, "nats", "nats.conf")}, []string{"POD_NAME=sq-sudoku-queue-nats-0"})
	natsPod := statefulSet(t, r, "sq-sudoku-queue-nats").Spec.Template.Spec.Containers[0]
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, natsPod.StartupProbe.HTTPGet.Path), nats)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, natsPod.ReadinessProbe.HTTPGet.Path), nats)

	// Redis.
	redisPort := freePort(t)
	redisArgs := append([]string(nil), deployment(t, r, "sq-sudoku-queue-redis").Spec.Template.Spec.Containers[0].Args[1:]...)
	for i, a := range redisArgs {
		if a == "/etc/redis-roles/redis-users.acl" {
			redisArgs[i] = filepath.Join(roles, "server", "redis-users.acl")
		}
	}
	redisArgs = append(redisArgs, "--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1", "--dir", dir)
	start(ctx, t, dir, "redis", redisServer, redisArgs, nil)

	// The sudoku containers.
	var cm corev1.ConfigMap
	decodeAs(t, r, "ConfigMap", "sq-sudoku-queue-config", &cm)
	write(t, filepath.Join(dir, "etc", "sudoku.yaml"), cm.Data["sudoku.yaml"])
	write(t, filepath.Join(dir, "api", "token"), "t0ken\n")
	metricsPort, servePort := freePort(t), freePort(t)
	command := func(c container) (args, environ []string) {
		user := env(c.c, "SUDOKU_NATS_USER")
		paths := strings.NewReplacer(
			"/etc/sudoku-chart/", filepath.Join(dir, "etc")+"/",
			"/run/secrets/sudoku/", filepath.Join(roles, user)+"/",
			"/run/secrets/sudoku-api/", filepath.Join(dir, "api")+"/",
		)
		environ = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		for _, e := range c.c.Env {
			environ = append(environ, e.Name+"="+paths.Replace(e.Value))
		}
		// The environment wins over the file: the servers' addresses here.
		environ = append(environ,
			fmt.Sprintf("SUDOKU_NATS_URL=nats://127.0.0.1:%d", natsPort),
			fmt.Sprintf("SUDOKU_REDIS_ADDRS=127.0.0.1:%d", redisPort))
		addrs := strings.NewReplacer(
			"0.0.0.0:9090", fmt.Sprintf("127.0.0.1:%d", metricsPort),
			"0.0.0.0:8080", fmt.Sprintf("127.0.0.1:%d", servePort))
		for _, a := range c.c.Args {
			args = append(args, addrs.Replace(a))
		}
		return args, environ
	}
	byName := map[string]container{}
	for _, c := range sudokuContainers(t, r) {
		byName[c.c.Name] = c
	}

	// The setup Job, as admin: it creates the streams.
	args, environ := command(byName["setup"])
	setup := exec.CommandContext(ctx, bin, args...)
	setup.Env = environ
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("setup Job (sudoku %s): %v\n%s", strings.Join(args, " "), err, out)
	} else if !strings.Contains(string(out), "created") {
		t.Errorf("setup Job created nothing:\n%s", out)
	}

	// serve first, as its pod would run it: the backlog it exports for
	// KEDA reads the work left with no worker running.
	sc := byName["serve"]
	args, environ = command(sc)
	serve := start(ctx, t, dir, "serve", bin, args, environ)
	for _, p := range []*corev1.Probe{sc.c.ReadinessProbe, sc.c.LivenessProbe} {
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d%s", servePort, p.HTTPGet.Path), serve)
	}

	// A job through serve, before any worker runs.
	base := fmt.Sprintf("http://127.0.0.1:%d", servePort)
	puzzles := ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7...\n" +
		".................1.....2.34.....5.23..6.....7..8..9.......8.....2..6.8...3.1.....\n"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/jobs", strings.NewReader(puzzles))
	req.Header.Set("Authorization", "Bearer t0ken")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var job struct{ ID string }
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &job) != nil || job.ID == "" {
		t.Fatalf("POST /v1/jobs as serve's user: %s\n%s", resp.Status, body)
	}
	// What KEDA's query reads, from serve alone: the job's 2 lines.
	waitSamples(t, base+"/metrics", map[string]string{
		"sudoku_backlog_up":                       "1",
		`sudoku_backlog_lines{priority="normal"}`: "2",
		`sudoku_backlog_jobs{priority="normal"}`:  "1",
	})

	// A worker, as its pod would run it, solves the job.
	wc := byName["worker"]
	args, environ = command(wc)
	worker := start(ctx, t, dir, "worker", bin, args, environ)
	for _, p := range []*corev1.Probe{wc.c.ReadinessProbe, wc.c.LivenessProbe} {
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d%s", metricsPort, p.HTTPGet.Path), worker)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/jobs/"+job.ID+"/results?format=text", nil)
	req.Header.Set("Authorization", "Bearer t0ken")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Fields(string(body))
	if resp.StatusCode != http.StatusOK || len(lines) != 2 || len(lines[0]) != 81 || len(lines[1]) != 81 {
		t.Errorf("the job's results: %s\n%s", resp.Status, body)
	}
	// The job done, the backlog is 0; the worker exports none of it.
	waitSamples(t, base+"/metrics", map[string]string{
		"sudoku_backlog_up":                       "1",
		`sudoku_backlog_lines{priority="normal"}`: "0",
		`sudoku_backlog_jobs{priority="normal"}`:  "0",
	})
	if m := scrapeText(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)); strings.Contains(m, "sudoku_backlog_") {
		t.Error("the worker exports sudoku_backlog_* too: KEDA's sum would count it once per worker")
	}

	// SIGTERM: the worker drains and exits 0 within the pod's grace period.
	grace := time.Duration(*deployment(t, r, "sq-sudoku-queue-worker").Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	_ = worker.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-worker.exited:
		if worker.err != nil {
			t.Errorf("worker after SIGTERM: %v", worker.err)
		}
	case <-time.After(grace):
		t.Errorf("worker still running %s after SIGTERM (the pod's grace period)", grace)
	}
}

// scrapeText returns the Prometheus text at url.
func scrapeText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(body)
}

// waitSamples scrapes url until each sample of want ("name{labels}" ->
// value, as the text format writes them) is there, failing after 20 s.
func waitSamples(t *testing.T, url string, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := map[string]string{}
		for _, line := range strings.Split(scrapeText(t, url), "\n") {
			if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
				got[f[0]] = f[1]
			}
		}
		var diff []string
		for k, v := range want {
			if got[k] != v {
				diff = append(diff, fmt.Sprintf("%s = %q, want %s", k, got[k], v))
			}
		}
		if len(diff) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", url, strings.Join(diff, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proc is a process the test started.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when it has exited
	err    error         // how, once exited is closed
}

// start starts a server process, its output to a log file in dir that the
// test shows if it fails; it is killed when the test ends.
func start(ctx context.Context, t *testing.T, dir, name, program string, args, environ []string) *proc {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, program, args...)
	if environ != nil {
		cmd.Env = environ
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("%s's log:\n%s", name, out)
		}
	})
	return p
}

// waitHTTP waits up to 30 s for url to answer 200, while p runs.
func waitHTTP(t *testing.T, url string, p *proc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status + ": " + string(b)
		} else {
			last = err.Error()
		}
		select {
		case <-p.exited:
			t.Fatalf("GET %s: the process exited (%v): %s", url, p.err, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("GET %s never answered 200: %s", url, last)
}
