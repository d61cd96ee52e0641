package app

import (
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// ProducerOptions are the settings of the jobs a process submits, from
// the configuration: batches, the configured owner and its quota,
// logging to log. Every door (the CLI, sudoku serve, the workers' micro
// service, the client) submits with them.
func ProducerOptions(cfg *config.Config, log *slog.Logger) producer.Options {
	return producer.Options{
		BatchSize:       cfg.Queue.BatchSize,
		FirstBatch:      cfg.Queue.FirstBatchSize,
		MaxMessageBytes: cfg.Queue.MaxMessageBytes,
		Owner:           cfg.Owner(),
		Quota:           Quota(cfg),
		Logger:          log,
	}
}

// Quota is the configuration's quota of an owner.
func Quota(cfg *config.Config) job.Quota {
	return job.Quota{JobsOpen: cfg.Quota.JobsOpen, LinesPending: cfg.Quota.LinesPending, RequestBytes: cfg.Quota.RequestBytes}
}

// WorkerOptions are a worker's settings from the configuration, logging
// to log, reporting the module's version (ServiceVersion).
func WorkerOptions(cfg *config.Config, log *slog.Logger) worker.Options {
	return worker.Options{
		Concurrency:     cfg.WorkerConcurrency(),
		MaxNodes:        cfg.Worker.MaxNodes,
		Nice:            cfg.Worker.Nice,
		Heartbeat:       cfg.WorkerHeartbeat(),
		NakDelays:       cfg.Queue.Backoff,
		ShutdownTimeout: cfg.Worker.ShutdownTimeout,
		Version:         ServiceVersion(),
		Quota:           Quota(cfg),
		Logger:          log,
	}
}

// ServiceVersion is the module's version for the micro service: the
// build's module version, or "0.0.0" for a development build.
func ServiceVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := strings.TrimPrefix(bi.Main.Version, "v"); v != "" && v != "(devel)" {
			return v
		}
	}
	return "0.0.0"
}
