package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
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
func producerOptions(cfg *config.Config, force, first bool) producer.Options {
	return producer.Options{
		BatchSize:       cfg.Queue.BatchSize,
		MaxMessageBytes: cfg.Queue.MaxMessageBytes,
		Force:           force,
		FirstSolution:   first,
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

// waitAndWrite waits for job id with a progress bar on a terminal, then
// writes its results in input order and a summary by status on stderr. It
// returns an exit status error when some results are not unique. When ctx
// ends while waiting, it says how to resume.
func waitAndWrite(ctx context.Context, cmd *cobra.Command, conn *app.Conn, id string, of *outputFlags, resumable bool) error {
	format, err := result.ParseFormat(of.format)
	if err != nil {
		return usageErrorf("--format %q: want %s or %s", of.format, result.Text, result.JSONL)
	}
	stderr := cmd.ErrOrStderr()
	start := time.Now()
	var bar *progress
	j, err := producer.Wait(ctx, conn.Store, conn.NC, conn.Queue.Opts, id, func(j cache.Job) {
		if bar == nil && j.Sealed {
			bar = newProgress(stderr, "solving", int(j.Queued))
		}
		bar.Set(int(j.Done))
	})
	bar.Close()
	if err != nil {
		if ctx.Err() != nil && !resumable {
			fmt.Fprintf(stderr, "interrupted: job %s stopped with %d of %d puzzles done\n", id, j.Done, j.Queued)
			return &exitError{code: ExitInterrupted}
		}
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "stopped waiting; job %s keeps running (%d of %d puzzles done). Resume with:\n  sudoku job wait %s\n",
				id, j.Done, j.Queued, id)
			return &exitError{code: ExitInterrupted}
		}
		return err
	}
	out, outName, err := createOutput(cmd, of.out)
	if err != nil {
		return err
	}
	defer out.Close()
	w := result.NewWriter(out, format)
	var sum result.Summary
	err = producer.Results(ctx, conn.Store, id, func(r result.Result) error {
		sum.Add(r)
		return w.Write(r)
	})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", outName, cerr)
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if !j.Created.IsZero() && j.IsFinished() {
		elapsed = j.Finished.Sub(j.Created)
	}
	fmt.Fprintf(stderr, "job %s: %s in %s (%.0f/s): %s\n", id, result.Puzzles(sum.Total()),
		roundDuration(elapsed), float64(sum.Total())/max(elapsed.Seconds(), 1e-9), sum.Counts())
	if !sum.OK() {
		return &exitError{code: ExitFailure}
	}
	return nil
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
	w := worker.New(conn.NC, conn.Queue, conn.Store, opts)
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
