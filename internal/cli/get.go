package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
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
not cached. This reads only Redis.

With --solve, a puzzle not in the cache (or when Redis is down) is sent to
the workers' solve endpoint (NATS request/reply), ahead of any bulk job,
and the answer awaited.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			rf, err := result.ParseFormat(format)
			if err != nil {
				return usageErrorf("--format %q: want %s or %s", format, result.Text, result.JSONL)
			}
			arg := strings.TrimSpace(args[0])
			var key, puzzle string
			if hexOnly(arg) && len(arg) == 64 {
				arg = strings.ToLower(arg)
			}
			if solver.IsKey(arg) {
				key = arg
			} else if hexOnly(arg) && strings.ContainsAny(strings.ToLower(arg), "abcdef") {
				// No puzzle has a letter a-f: a key cut short (or made
				// longer), not a puzzle to report cell by cell.
				return usageErrorf("%q looks like a puzzle's key, but has %d hex digits: a key has 64 "+
					"(give the whole key, or the puzzle)", clipArg(arg), len(arg))
			} else {
				g, err := solver.Parse(arg)
				if err != nil {
					r := result.Invalid(0, arg, err)
					return writeOne(cmd, rf, r)
				}
				key, puzzle = g.Key(), g.String()
			}
			if solve && puzzle == "" {
				return usageErrorf("--solve needs the puzzle, not its key")
			}
			// Without --solve the cache is all there is; with it, a
			// cache that is down is only a miss.
			c, err := openClient(cmd, client.Options{CacheOnly: !solve})
			if err != nil {
				return err
			}
			defer c.Close()
			what := "the puzzle (key " + key + ")"
			if puzzle == "" {
				what = "key " + key
			}
			if !solve {
				r, err := c.Get(ctx, key)
				switch {
				case errors.Is(err, client.ErrUnavailable):
					return fmt.Errorf("Redis did not answer the lookup of %s", what)
				case err != nil:
					return &exitError{code: ExitFailure, err: fmt.Errorf("%s is not in the cache", what)}
				}
				return writeOne(cmd, rf, r)
			}
			tctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r, err := c.Solve(tctx, puzzle, client.SolveOptions{})
			if errors.Is(err, client.ErrNoWorker) && ctx.Err() == nil {
				if errors.Is(err, nats.ErrNoResponders) {
					return &messageError{fmt.Sprintf("no worker is running on this queue (none serves %s)",
						solveSubject(cmd)), err}
				}
				return &messageError{fmt.Sprintf("no worker answered within %s (--timeout); are the workers busy or stopped?", timeout), err}
			}
			if err != nil {
				return err
			}
			return writeOne(cmd, rf, r)
		},
	}
	cmd.Flags().BoolVar(&solve, "solve", false, "when not cached, have a worker solve it and wait")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "with --solve, how long to wait for a worker")
	cmd.Flags().StringVar(&format, "format", string(result.Text), "output `format`: text or jsonl")
	config.AddKeyFlags(cmd.Flags(), keyRedisAddrs, keyNATSURL)
	cmd.Flags().Lookup(config.FlagName(keyNATSURL)).Usage = "with --solve, NATS server `URLs`, comma-separated ($SUDOKU_NATS_URL)"
	return cmd
}

// hexOnly reports whether s is made of hex digits only, in either case.
func hexOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // lower case for letters; digits stay digits
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// clipArg cuts a long argument for an error message.
func clipArg(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
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

// solveSubject is the subject of the workers' solve endpoint in cmd's
// configuration.
func solveSubject(cmd *cobra.Command) string {
	cfg, _, err := loadConfig(cmd)
	if err != nil {
		return "the solve subject"
	}
	return app.QueueOptions(cfg.Queue, 0).SolveSubject()
}
