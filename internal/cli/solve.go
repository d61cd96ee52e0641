package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/local"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

func init() { addCommand(newSolveCmd) }

// solveFlags are the flags of sudoku solve. After runSolve has loaded the
// configuration, maxNodes and workers hold the effective settings: the
// flag's value when it was given, else the configuration's (worker.max_nodes
// and worker.concurrency, from the environment, the file or the defaults),
// with workers at 1 or more.
type solveFlags struct {
	local    bool
	format   string
	out      string
	first    bool
	maxNodes int64
	workers  int
}

// applyConfig sets the settings of f that mirror a configuration key from
// cfg, unless their flag was given on the command line (fs): flags, then
// the environment, then the file, then the defaults.
func (f *solveFlags) applyConfig(fs *pflag.FlagSet, cfg *config.Config) {
	if !fs.Changed("max-nodes") {
		f.maxNodes = cfg.Worker.MaxNodes
	}
	if !fs.Changed("workers") {
		f.workers = cfg.Worker.Concurrency
	}
	if f.workers == 0 {
		f.workers = runtime.GOMAXPROCS(0)
	}
}

// newSolveCmd returns the sudoku solve command.
func newSolveCmd() *cobra.Command {
	var f solveFlags
	cmd := &cobra.Command{
		Use:   "solve [FILE|-]",
		Short: "Solve a file of puzzles and print the solutions in input order",
		Long: `Solve every puzzle of FILE (or of standard input, when FILE is - or
missing) and print one line per puzzle, in input order.

The input holds puzzles in two formats, mixed as you like: one puzzle per
line, 81 cells row by row with '.' or '0' for a blank; or a grid of 9
lines of 9 cells, with or without spaces and the box separators '|', '-'
and '+' (such as "5 3 . | . 7 . | . . ." and "------+-------+------").
Grids follow each other directly or with blank lines between them (a
blank line keeps a grid with a row missing from taking the next one's).
A grid's result names the line of its first row, and a broken grid gives
one error. Blank lines and lines starting with '#' are skipped and give no
output.

The text output is the 81-digit solution of each puzzle; a puzzle without
a unique solution gives a line starting with "error: line N:" and the
reason (for several solutions, followed by one of them). --format jsonl
writes one JSON object per puzzle instead: line, puzzle, key, status
(unique, multiple, none, invalid, gave_up, or solved with --first),
solution, error, guesses.

A summary by status goes to standard error, with a progress bar while
solving when standard error is a terminal. The exit status is 0 when every
puzzle has a unique solution (or any solution, with --first), 1 when some
have not, 2 for a usage error and 130 when interrupted; an interrupted run
keeps the results written so far.

Without --local, solve is the one-command start: it starts an embedded
NATS server with JetStream and a worker pool in this process, uses Redis
when one is reachable at redis.addrs (else a cache in memory), and sends
the file through the same producer and worker code as a real deployment.
--local solves in this process on every core, with no queue and no cache.

Both read the configuration like the other commands (--config,
$SUDOKU_CONFIG, the SUDOKU_ variables; an unknown key or a bad value is a
usage error): --max-nodes defaults to worker.max_nodes and --workers to
worker.concurrency, and a flag given on the command line wins.`,
		Example: `  sudoku solve puzzles.txt > solutions.txt
  sudoku solve --local puzzles.txt > solutions.txt
  sudoku solve --local --format jsonl --out results.jsonl puzzles.txt
  generate-puzzles | sudoku solve --local -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSolve(cmd, args, &f)
		},
	}
	f.addFlags(cmd.Flags())
	config.AddKeyFlags(cmd.Flags(), keyRedisAddrs, keyBatchSize)
	for _, key := range []string{keyRedisAddrs, keyBatchSize} {
		fl := cmd.Flags().Lookup(config.FlagName(key))
		fl.Usage = "without --local, " + fl.Usage
	}
	return cmd
}

// addFlags defines the flags of sudoku solve on fl, bound to f.
func (f *solveFlags) addFlags(fl *pflag.FlagSet) {
	fl.BoolVar(&f.local, "local", false, "solve in this process, without NATS or Redis")
	fl.StringVar(&f.format, "format", string(result.Text), "output `format`: text or jsonl")
	fl.StringVarP(&f.out, "out", "o", "", "write the results to `FILE` instead of standard output")
	fl.BoolVar(&f.first, "first", false, "stop at the first solution of each puzzle (status solved) instead of proving it unique")
	fl.Int64Var(&f.maxNodes, "max-nodes", 0, "give up on a puzzle after `N` search nodes; negative: no limit, 0: the solver's default, "+
		strconv.Itoa(solver.DefaultMaxNodes)+" (default: worker.max_nodes)")
	fl.IntVar(&f.workers, "workers", 0, "number of solving goroutines, 0 for GOMAXPROCS (default: worker.concurrency)")
}

// runSolve checks the flags and runs the mode they ask for.
func runSolve(cmd *cobra.Command, args []string, f *solveFlags) error {
	format, err := result.ParseFormat(f.format)
	if err != nil {
		return usageErrorf("--format %q: want %s or %s", f.format, result.Text, result.JSONL)
	}
	if f.workers < 0 {
		return usageErrorf("--workers %d: want 0 (GOMAXPROCS) or more", f.workers)
	}
	cfg, _, err := loadConfig(cmd)
	if err != nil {
		return err
	}
	f.applyConfig(cmd.Flags(), cfg)
	if !f.local {
		return solveQueued(cmd, args, f)
	}
	return solveLocal(cmd, args, f, format)
}

// solveLocal is sudoku solve --local.
func solveLocal(cmd *cobra.Command, args []string, f *solveFlags, format result.Format) error {
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()

	in, inName, total, err := openInput(cmd, args, isTerminal(stderr))
	if err != nil {
		return err
	}
	defer in.Close()
	if sameFile(f.out, inName) {
		return usageErrorf("--out %s is the input file", f.out)
	}
	rd := input.NewReader(in)
	if err := rd.RequirePuzzle(); err != nil { // before --out is created
		return fmt.Errorf("%s: %w", inName, err)
	}
	out, outName, err := createOutput(cmd, f.out)
	if err != nil {
		return err
	}
	defer out.Close() // a second Close after the checked one is harmless

	w := result.NewWriter(out, format)
	var sum result.Summary
	bar := newProgress(stderr, "solving", total)
	start := time.Now()
	err = local.Run(ctx, rd, func(r result.Result) error {
		sum.Add(r)
		return w.Write(r)
	}, local.Options{
		Workers:       f.workers,
		FirstSolution: f.first,
		MaxNodes:      f.maxNodes,
		Progress:      bar.Set,
	})
	elapsed := time.Since(start)
	bar.Close()
	// Keep whatever was solved, even when stopping on an error.
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", outName, cerr)
	}

	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		fmt.Fprintf(stderr, "interrupted after %s: %s of %s written to %s, in input order (%s)\n",
			roundDuration(elapsed), result.Puzzles(sum.Total()), inName, outName, sum.Counts())
		return &exitError{code: ExitInterrupted}
	}
	if err != nil {
		return fmt.Errorf("solving %s: %w", inName, err)
	}
	fmt.Fprintf(stderr, "solved %s in %s (%.0f/s): %s\n",
		result.Puzzles(sum.Total()), roundDuration(elapsed), float64(sum.Total())/max(elapsed.Seconds(), 1e-9), sum.Counts())
	if !sum.OK() {
		return &exitError{code: ExitFailure}
	}
	return nil
}

// openInput opens the input named by args: a file, or standard input for
// "-" or no argument. A file that cannot be opened is a usage error. With
// count set and a regular file, it also returns the number of puzzle lines
// (for the progress bar), else -1.
func openInput(cmd *cobra.Command, args []string, count bool) (in io.ReadCloser, name string, total int, err error) {
	if len(args) == 0 || args[0] == "-" {
		return io.NopCloser(cmd.InOrStdin()), "standard input", -1, nil
	}
	name = args[0]
	fi, err := os.Stat(name)
	if err != nil {
		return nil, "", 0, usageErrorf("input file %s: %w", name, pathless(err))
	}
	if fi.IsDir() {
		return nil, "", 0, usageErrorf("input file %s is a directory", name)
	}
	file, err := os.Open(name)
	if err != nil {
		return nil, "", 0, usageErrorf("input file %s: %w", name, pathless(err))
	}
	total = -1
	if count && fi.Mode().IsRegular() {
		// One more read of the file, from the page cache: a fraction of
		// the solving time, for a bar with a total and an ETA.
		if n, err := input.Count(file); err == nil {
			total = n
		}
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			file.Close()
			return nil, "", 0, fmt.Errorf("input file %s: %w", name, pathless(err))
		}
	}
	return file, name, total, nil
}

// createOutput returns where the results go: standard output for "" or
// "-", else the file name, created or truncated. A file that cannot be
// created is a usage error.
func createOutput(cmd *cobra.Command, name string) (io.WriteCloser, string, error) {
	if name == "" || name == "-" {
		return nopWriteCloser{cmd.OutOrStdout()}, "standard output", nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, "", usageErrorf("--out %s: %w", name, pathless(err))
	}
	return f, name, nil
}

// pathless returns the cause of a *fs.PathError ("no such file or
// directory") for a message that names the file itself, without Go's
// "open" or "stat"; other errors as they are.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sameFile reports whether the files named a and b both exist and are the
// same file.
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// nopWriteCloser is an io.Writer with a Close that does nothing: standard
// output stays open for whatever the program prints next.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// roundDuration rounds d for a human: 1.234s, 12ms, 345µs.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
