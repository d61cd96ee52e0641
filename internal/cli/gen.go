package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/gen"
)

func init() { addCommand(newGenCmd) }

func newGenCmd() *cobra.Command {
	var (
		from string
		n    int
		seed uint64
		out  string
	)
	cmd := &cobra.Command{
		Use:   "gen --from FILE -n N [--seed S]",
		Short: "Make N distinct puzzles from a set of puzzles, for load tests",
		Long: `Make N distinct valid puzzles from the puzzles of FILE (such as the
17-clue set) and write them one per line, in the canonical 81-character
form. Each is a puzzle of FILE, taken in turn, under a random symmetry of
Sudoku: digits relabelled, rows permuted within their band, bands
permuted, columns within their stack, stacks, and perhaps a transposition.
A symmetry keeps the number of givens and of solutions, so a set of
puzzles with unique solutions gives puzzles with unique solutions.

The output is the same for the same FILE and --seed (default 1), and the
first puzzles do not depend on N. It is written as it is made: memory stays
small (16 to 32 bytes per puzzle, to keep them distinct) whatever N.`,
		Example: `  sudoku gen --from 17_clue.txt -n 1000000 > million.txt
  sudoku gen --from 17_clue.txt -n 10000 --seed 7 | sudoku submit --wait -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return usageErrorf("--from is required: a file of puzzles to start from")
			}
			if n < 0 {
				return usageErrorf("-n %d: want 0 or more", n)
			}
			// No setting changes what gen makes, but a configuration
			// that is wrong is an error here as for every command.
			if _, _, err := loadConfig(cmd); err != nil {
				return err
			}
			f, err := os.Open(from)
			if err != nil {
				return usageErrorf("--from %s: %w", from, pathless(err))
			}
			defer f.Close()
			bases, err := gen.ReadBases(f)
			if err != nil {
				return fmt.Errorf("%s: %w", from, err)
			}
			g, err := gen.New(bases, seed)
			if err != nil {
				return fmt.Errorf("%s: %w", from, err)
			}
			w, outName, err := createOutput(cmd, out)
			if err != nil {
				return err
			}
			defer w.Close()
			start := time.Now()
			if err := gen.Write(cmd.Context(), w, g, n); err != nil {
				return err
			}
			if err := w.Close(); err != nil {
				return fmt.Errorf("closing %s: %w", outName, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "gen: %d puzzles from %d in %s\n", n, len(bases), roundDuration(time.Since(start)))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "read the base puzzles from `FILE`")
	fl.IntVarP(&n, "count", "n", 0, "make `N` puzzles")
	fl.Uint64Var(&seed, "seed", 1, "random seed: the same seed gives the same puzzles")
	fl.StringVarP(&out, "out", "o", "", "write the puzzles to `FILE` instead of standard output")
	_ = cmd.MarkFlagRequired("count")
	return cmd
}
