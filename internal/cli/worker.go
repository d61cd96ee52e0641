package cli

import (
	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

func init() { addCommand(newWorkerCmd) }

func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: pull batches from NATS JetStream, solve, cache results in Redis",
		Long: `Run one worker process. Any number of workers, on any number of
machines, share the work of one durable JetStream consumer. Each batch is
looked up in Redis, the misses are solved, the results written back, and
only then is the message acknowledged.

On SIGINT or SIGTERM the worker stops pulling, finishes the batches in work
within worker.shutdown_timeout (what is left is redelivered to others),
closes its connections and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, conn, err := openConn(cmd, app.OpenOptions{})
			if err != nil {
				return err
			}
			defer conn.Close()
			log.Info("sudoku worker starting", "config", cfg)
			w := worker.New(conn.NC, conn.Queue, conn.Store, worker.Options{
				Concurrency:     cfg.WorkerConcurrency(),
				Fetch:           cfg.WorkerFetch(),
				MaxNodes:        cfg.Worker.MaxNodes,
				Heartbeat:       cfg.WorkerHeartbeat(),
				NakDelays:       cfg.Queue.Backoff,
				ShutdownTimeout: cfg.Worker.ShutdownTimeout,
				Logger:          log,
			})
			return w.Run(cmd.Context())
		},
	}
}
