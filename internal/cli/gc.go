package cli

import (
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// clientHeap is the heap a client command (a producer or a reader of
// results, whose memory is bounded by its windows) grows to before it
// collects garbage at all.
const clientHeap = 64 << 20

// annotGC marks a client command (cobra.Command.Annotations).
const annotGC = "sudoku/gc"

// processGC is set by Execute: the GC settings are the process's, which
// an in-process Run (tests) must not change.
var processGC bool

// asClient marks cmd as a client for clientGC.
func asClient(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotGC] = "client"
	return cmd
}

// clientGC makes a client command collect garbage only once its heap
// reaches clientHeap, then as often as it takes to stay there (a memory
// limit with GOGC off), instead of from its first few megabytes: at the
// default GOGC a submit --wait of 5,000 puzzles spent a third of its CPU
// collecting, while the workers waited for its batches. GOGC or
// GOMEMLIMIT in the environment decide instead.
func clientGC(cmd *cobra.Command) {
	if !processGC || cmd.Annotations[annotGC] != "client" || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(clientHeap)
}
