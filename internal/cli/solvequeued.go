package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// solveQueued is sudoku solve without --local: the one-command start. It
// starts an embedded NATS server with JetStream, uses Redis as the cache
// when it is reachable (else a cache in memory), runs a worker pool in
// this process and submits the file through the very same producer and
// worker code as a distributed deployment, writing the results like
// submit --wait.
func solveQueued(cmd *cobra.Command, args []string, f *solveFlags) error {
	ctx := cmd.Context()
	in, name, _, err := openInput(cmd, args, false)
	if err != nil {
		return err
	}
	defer in.Close()
	if sameFile(f.out, name) {
		return usageErrorf("--out %s is the input file", f.out)
	}
	rd := input.NewReader(in)
	if err := rd.RequirePuzzle(); err != nil { // before a server starts
		return fmt.Errorf("%s: %w", name, err)
	}
	of := outputFlags{format: f.format, out: f.out}
	out, err := of.open(cmd)
	if err != nil {
		return err
	}
	defer out.Close()
	cfg, log, conn, err := openConn(cmd, app.OpenOptions{Embedded: true, AllowMemoryCache: true})
	if err != nil {
		return err
	}
	defer conn.Close()
	store := "redis " + fmt.Sprint(cfg.Redis.Addrs)
	if conn.MemoryCache {
		store = "in-process cache"
	}
	log.Debug("solve: embedded NATS server", "cache", store)

	wopts := app.WorkerOptions(cfg, log)
	wopts.Concurrency = f.workers
	wopts.MaxNodes = f.maxNodes
	stopWorker := startLocalWorker(conn, cfg, wopts, log)
	defer stopWorker()

	popts := app.ProducerOptions(cfg, log)
	popts.FirstSolution = f.first
	failed := func(err error) error {
		if ctx.Err() != nil {
			return &exitError{code: ExitInterrupted, err: fmt.Errorf("interrupted while reading %s", name)}
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	// The results are read while the batches are published.
	st, err := producer.New(conn.Queue, conn.Cache, popts).Start(ctx, rd)
	if err != nil {
		return failed(err)
	}
	return waitAndWrite(ctx, cmd, client.New(conn, popts), log, st.ID, out, waitOptions{resumable: conn.Embedded == nil, timed: true,
		started: st, failed: failed})
}
