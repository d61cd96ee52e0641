package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

func init() { addCommand(newGetCmd) }

func newGetCmd() *cobra.Command {
	var (
		solve   bool
		timeout time.Duration
		format  string
	)
	cmd := &cobra.Command{
		Use:   "get PUZZLE|KEY",
		Short: "Print the cached solution of a puzzle (or of a key)",
		Long: `Print the cached result of a puzzle, given as its 81 characters (or a
9-line grid, quoted) or as its 64-character key. Exit status 1 when it is
not cached. With --solve, an uncached puzzle is sent to the workers on the
interactive subject, ahead of any bulk job, and the answer awaited.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			format, err := result.ParseFormat(format)
			if err != nil {
				return usageErrorf("--format: %w", err)
			}
			arg := strings.TrimSpace(args[0])
			var key, puzzle string
			if solver.IsKey(arg) {
				key = arg
			} else {
				g, err := solver.Parse(arg)
				if err != nil {
					r := result.Invalid(0, arg, err)
					return writeOne(cmd, format, r)
				}
				key, puzzle = g.Key(), g.String()
			}
			_, _, conn, err := openConn(cmd, app.OpenOptions{})
			if err != nil {
				return err
			}
			defer conn.Close()
			rs, err := conn.Store.Get(ctx, []string{key})
			if err != nil {
				return err
			}
			if rs[0] != nil {
				return writeOne(cmd, format, *rs[0])
			}
			if !solve || puzzle == "" {
				why := "not in the cache"
				if solve {
					why += " (--solve needs the puzzle, not its key)"
				}
				return &exitError{code: ExitFailure, err: fmt.Errorf("%s: %s", key, why)}
			}
			tctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r, err := SolveInteractive(tctx, conn, puzzle)
			if err != nil {
				return err
			}
			return writeOne(cmd, format, r)
		},
	}
	cmd.Flags().BoolVar(&solve, "solve", false, "when not cached, have a worker solve it and wait")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "with --solve, how long to wait for a worker")
	cmd.Flags().StringVar(&format, "format", string(result.Text), "output `format`: text or jsonl")
	return cmd
}

// writeOne prints one result; exit status 1 when it is not unique.
func writeOne(cmd *cobra.Command, format result.Format, r result.Result) error {
	w := result.NewWriter(cmd.OutOrStdout(), format)
	if err := w.Write(r); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !r.OK() {
		return &exitError{code: ExitFailure}
	}
	return nil
}

// SolveInteractive sends one canonical puzzle to the workers on the
// interactive subject and waits for its result, carried by the completion
// event: producer.SolveInteractive on conn's queue.
func SolveInteractive(ctx context.Context, conn *app.Conn, puzzle string) (result.Result, error) {
	return producer.SolveInteractive(ctx, conn.JS, conn.Queue.Opts, puzzle)
}
