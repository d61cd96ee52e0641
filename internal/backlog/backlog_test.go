package backlog_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sudoku-queue/sudoku-queue/internal/backlog"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// gauges scrapes reg and returns every sample as "name{labels}" -> value.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()+labels(m.GetLabel())] = m.GetGauge().GetValue()
		}
	}
	return out
}

func labels(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	var parts []string
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// waitGauges scrapes reg until its samples include want, failing after d.
func waitGauges(t *testing.T, reg *prometheus.Registry, want map[string]float64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := gauges(t, reg)
		var diff []string
		for k, v := range want {
			if got[k] != v {
				diff = append(diff, fmt.Sprintf("%s = %v, want %v", k, got[k], v))
			}
		}
		if len(diff) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, strings.Join(diff, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBacklogWithoutWorkers submits jobs with no worker running: the
// gauges read their lines, jobs and batches from JetStream alone, and
// Usage each owner's; then a worker finishes them and every gauge reads
// zero.
func TestBacklogWithoutWorkers(t *testing.T) {
	puzzles := testenv.Puzzles(t, "../cli/testdata/17_clue_200.txt", 130)
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			q := testenv.NewQueue(t, server, queue.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := backlog.New(q.Queue, backlog.Options{StreamEvery: time.Millisecond, Logger: quiet})
			go w.Run(ctx)
			reg := prometheus.NewRegistry()
			if err := reg.Register(w); err != nil {
				t.Fatal(err)
			}
			waitGauges(t, reg, map[string]float64{"sudoku_backlog_up": 1, `sudoku_backlog_lines{priority="normal"}`: 0}, 10*time.Second)

			jobs := []struct {
				owner    string
				priority job.Priority
				puzzles  []string
				batch    int // batch size: more than one batch makes a large job
			}{
				{"alice", job.PriorityHigh, puzzles[:100], 32},      // 4 batches, a big lane
				{"alice", job.PriorityNormal, puzzles[100:110], 64}, // one batch, the small lane
				{"bob", job.PriorityHigh, puzzles[110:130], 64},
			}
			for _, j := range jobs {
				p := producer.New(q.Queue, nil, producer.Options{Owner: j.owner, Priority: j.priority,
					BatchSize: j.batch, FirstBatch: j.batch, Logger: quiet})
				if _, err := p.Submit(ctx, input.NewReader(strings.NewReader(strings.Join(j.puzzles, "\n")))); err != nil {
					t.Fatal(err)
				}
			}
			waitGauges(t, reg, map[string]float64{
				"sudoku_backlog_up":                         1,
				`sudoku_backlog_lines{priority="high"}`:     120,
				`sudoku_backlog_lines{priority="normal"}`:   10,
				`sudoku_backlog_lines{priority="low"}`:      0,
				`sudoku_backlog_jobs{priority="high"}`:      2,
				`sudoku_backlog_jobs{priority="normal"}`:    1,
				`sudoku_backlog_batches{priority="high"}`:   5,
				`sudoku_backlog_batches{priority="normal"}`: 1,
				`sudoku_backlog_batches{priority="low"}`:    0,
			}, 10*time.Second)
			for owner, want := range map[string][2]int64{"alice": {2, 110}, "bob": {1, 20}, "carol": {0, 0}} {
				n, lines, err := w.Usage(ctx, owner)
				if err != nil || int64(n) != want[0] || lines != want[1] {
					t.Errorf("Usage(%s) = %d jobs, %d lines, %v; want %d, %d", owner, n, lines, err, want[0], want[1])
				}
			}

			wk := worker.New(q.NC, q.Queue, nil, worker.Options{Logger: quiet})
			wctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- wk.Run(wctx) }()
			defer func() {
				stop()
				if err := <-done; err != nil {
					t.Errorf("worker: %v", err)
				}
			}()
			zero := map[string]float64{"sudoku_backlog_up": 1}
			for _, p := range job.Priorities {
				for _, g := range []string{"lines", "jobs", "batches"} {
					zero[fmt.Sprintf("sudoku_backlog_%s{priority=%q}", g, p)] = 0
				}
			}
			waitGauges(t, reg, zero, 30*time.Second)
		})
	}
}

// TestBacklogDown: a watch that cannot read JetStream says so in
// sudoku_backlog_up.
func TestBacklogDown(t *testing.T) {
	q := testenv.NewQueue(t, "embedded", queue.Options{})
	w := backlog.New(q.Queue, backlog.Options{StreamEvery: time.Millisecond, Logger: quiet})
	reg := prometheus.NewRegistry()
	if err := reg.Register(w); err != nil {
		t.Fatal(err)
	}
	// Not running: the records are not read.
	if got := gauges(t, reg)["sudoku_backlog_up"]; got != 0 {
		t.Errorf("sudoku_backlog_up = %v before the watch runs, want 0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	waitGauges(t, reg, map[string]float64{"sudoku_backlog_up": 1}, 10*time.Second)
	// The work stream gone: its batches cannot be read.
	if err := q.JS.DeleteStream(ctx, q.Opts.Stream); err != nil {
		t.Fatal(err)
	}
	waitGauges(t, reg, map[string]float64{"sudoku_backlog_up": 0}, 10*time.Second)
}
