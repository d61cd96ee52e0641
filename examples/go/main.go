// Command sudoku-client submits a file of puzzles to a sudoku-queue
// deployment as one job, through the Go client (package client), and
// prints one line per puzzle in input order: the solution, or why there
// is none. It reads the same settings as the sudoku command:
// SUDOKU_NATS_URL, SUDOKU_JOB_OWNER, SUDOKU_REDIS_ADDRS... or the file
// named by SUDOKU_CONFIG.
//
//	go run . puzzles.txt > solutions.txt
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sudoku-queue/sudoku-queue/client"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sudoku-client FILE")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "sudoku-client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, file string) error {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	c, err := client.Dial(ctx, client.Options{})
	if err != nil {
		return err
	}
	defer c.Close()

	// Start returns once the job exists: its results are read while its
	// batches are published.
	job, err := c.Start(ctx, in, client.SubmitOptions{})
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for r, err := range c.Results(ctx, job.ID) {
		if err != nil {
			return fmt.Errorf("job %s: %w", job.ID, err)
		}
		fmt.Fprintln(out, r.Text())
	}
	if _, err := job.Wait(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	st, err := c.Status(ctx, job.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "job %s: %s, %d lines: %v\n", job.ID, st.State, st.Lines, st.Counts)
	return nil
}
