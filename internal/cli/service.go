package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// loadConfig loads the configuration for cmd (file, environment, flags)
// and makes its logger, on stderr. A bad configuration is a usage error.
func loadConfig(cmd *cobra.Command) (*config.Config, *slog.Logger, error) {
	cfg, err := config.Load(config.LoadOptions{Flags: cmd.Flags()})
	if err != nil {
		return nil, nil, &exitError{code: ExitUsage, err: err}
	}
	return cfg, slog.New(cfg.Log.Handler(cmd.ErrOrStderr())), nil
}

// openConn loads the configuration and connects to NATS and the store.
func openConn(cmd *cobra.Command, oo app.OpenOptions) (*config.Config, *slog.Logger, *app.Conn, error) {
	cfg, log, err := loadConfig(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := app.Open(cmd.Context(), cfg, oo, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, log, conn, nil
}

// producerOptions are the producer's settings from the configuration.
func producerOptions(cfg *config.Config, log *slog.Logger, force, first bool) producer.Options {
	return producer.Options{
		BatchSize:       cfg.Queue.BatchSize,
		MaxMessageBytes: cfg.Queue.MaxMessageBytes,
		Force:           force,
		FirstSolution:   first,
		Logger:          log,
	}
}

// outputFlags are the flags of commands that write results.
type outputFlags struct {
	format string
	out    string
}

func (f *outputFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.format, "format", string(result.Text), "output `format`: text or jsonl")
	cmd.Flags().StringVarP(&f.out, "out", "o", "", "write the results to `FILE` instead of standard output")
}

// output is where a command writes results: checked, and the file
// created, before any work starts.
type output struct {
	format result.Format
	w      io.WriteCloser
	name   string
}

// open checks the format and creates the output file.
func (f *outputFlags) open(cmd *cobra.Command) (*output, error) {
	format, err := result.ParseFormat(f.format)
	if err != nil {
		return nil, usageErrorf("--format %q: want %s or %s", f.format, result.Text, result.JSONL)
	}
	w, name, err := createOutput(cmd, f.out)
	if err != nil {
		return nil, err
	}
	return &output{format: format, w: w, name: name}, nil
}

// Close closes the output file.
func (o *output) Close() error {
	if err := o.w.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", o.name, err)
	}
	return nil
}

// waitAndWrite follows job id (producer.Follow) with a progress bar on a
// terminal, writing its results in input order to out as they come, then
// a summary on stderr. It returns an exit status error when some results
// are not unique. When ctx ends while waiting, it says how to resume
// (when resumable) or that the job stopped.
func waitAndWrite(ctx context.Context, cmd *cobra.Command, conn *app.Conn, log *slog.Logger, id string, out *output, resumable bool) error {
	stderr := cmd.ErrOrStderr()
	start := time.Now()
	var bar *progress
	var last producer.Progress
	w := result.NewWriter(out.w, out.format)
	var sum result.Summary
	rec, err := producer.Follow(ctx, conn.Queue, id, func(r result.Result) error {
		sum.Add(r)
		return w.Write(r)
	}, producer.FollowOptions{Full: out.format == result.JSONL, Logger: log, Progress: func(p producer.Progress) {
		if bar == nil {
			if bar = newProgress(stderr, "solving", -1); bar == nil {
				bar = &progress{} // not a terminal: nothing to draw
			}
		}
		if p.Record.State != job.Publishing && last.Record.State == job.Publishing {
			bar.SetTotal(int(p.Record.Lines))
		}
		if p.Waiting != last.Waiting {
			if p.Waiting != "" {
				bar.Describe("waiting: " + p.Waiting)
				if bar.bar == nil {
					log.Warn("waiting: " + p.Waiting)
				}
			} else {
				bar.Describe("solving")
				if bar.bar == nil && last.Waiting != "" {
					log.Info("no longer waiting: results are coming in again")
				}
			}
		}
		bar.Set(int(p.Lines))
		last = p
	}})
	bar.Close()
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil && !resumable {
			fmt.Fprintf(stderr, "interrupted: job %s stopped with %d of %d results written\n", id, last.Lines, last.Record.Lines)
			return &exitError{code: ExitInterrupted}
		}
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "stopped waiting; job %s keeps running (%d of %d results written). Resume with:\n  sudoku job wait %s\n",
				id, last.Lines, last.Record.Lines, id)
			return &exitError{code: ExitInterrupted}
		}
		return jobError(id, err)
	}
	elapsed := time.Since(start)
	if !rec.Created.IsZero() && !rec.Finished.IsZero() && rec.Finished.After(rec.Created) {
		elapsed = rec.Finished.Sub(rec.Created)
	}
	fmt.Fprintf(stderr, "job %s: %s in %s (%.0f/s): %s%s\n", id, result.Puzzles(sum.Total()),
		roundDuration(elapsed), float64(sum.Total())/max(elapsed.Seconds(), 1e-9), sum.Counts(), sources(&rec))
	if !sum.OK() {
		return &exitError{code: ExitFailure}
	}
	return nil
}

// sources says where a job's answers came from besides the workers:
// " (12 cached, 3 repeated, 1 invalid)", or "".
func sources(r *job.Record) string {
	var parts []string
	for _, p := range []struct {
		n    int64
		what string
	}{{r.Cached, "cached"}, {r.Repeated, "repeated"}, {r.Invalid, "invalid"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// jobError words the errors of following a job for people.
func jobError(id string, err error) error {
	switch {
	case errors.Is(err, job.ErrNotFound):
		return fmt.Errorf("no job %s (never submitted, removed, or expired)", id)
	case errors.Is(err, producer.ErrJobFailed):
		return fmt.Errorf("job %s failed and will never finish: %w", id, err)
	}
	return err
}

// discardLogger logs nothing.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// workerOptions are a worker's settings from the configuration, logging to
// log.
func workerOptions(cfg *config.Config, log *slog.Logger) worker.Options {
	return worker.Options{
		Concurrency:     cfg.WorkerConcurrency(),
		Fetch:           cfg.WorkerFetch(),
		MaxNodes:        cfg.Worker.MaxNodes,
		Heartbeat:       cfg.WorkerHeartbeat(),
		NakDelays:       cfg.Queue.Backoff,
		ShutdownTimeout: cfg.Worker.ShutdownTimeout,
		Version:         serviceVersion(),
		Logger:          log,
	}
}

// startLocalWorker runs a worker pool in this process on conn (for 'sudoku
// solve' and 'sudoku serve --embedded') until the returned stop is called;
// stop waits for it. Its start and stop are not logged (not news here),
// its warnings are.
func startLocalWorker(ctx context.Context, opts worker.Options, log *slog.Logger, conn *app.Conn) (stop func()) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	opts.Logger = slog.New(quietHandler{log.Handler()})
	w := worker.New(conn.NC, conn.Queue, conn.Cache, opts)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			log.Warn("in-process worker", "err", err)
		}
	}
}

// quietHandler drops records below Warn.
type quietHandler struct{ slog.Handler }

// Enabled reports whether l is Warn or above and enabled by the handler.
func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

// serviceVersion is the module's version for the micro service: the build's
// module version, or "0.0.0" for a development build.
func serviceVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := strings.TrimPrefix(bi.Main.Version, "v"); v != "" && v != "(devel)" {
			return v
		}
	}
	return "0.0.0"
}
