// Command sudoku is the command line of the bulk Sudoku solving service:
// it solves files of puzzles locally, and (with NATS and Redis) runs
// workers, submits jobs and looks up results. See internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx)
	stop()
	os.Exit(code)
}
