// Package cli implements the sudoku command line with cobra: the root
// command here, each subcommand in a file of its own (solve.go, ...), and
// the mapping of errors to exit statuses in exit.go.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
)

// subcommands holds the constructor of every subcommand. Each command's
// file appends its own from an init function, so that adding a command
// touches no other file.
var subcommands []func() *cobra.Command

// addCommand registers the constructor of a subcommand of sudoku.
func addCommand(newCmd func() *cobra.Command) {
	subcommands = append(subcommands, newCmd)
}

// NewRootCmd returns a new sudoku command with every subcommand. Its
// errors are not printed by cobra: Run prints them and picks the exit
// status.
func NewRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sudoku",
		Short: "Solve Sudoku puzzles in bulk",
		Long: `sudoku solves Sudoku puzzles in bulk: in this process with
'sudoku solve --local', or through a NATS JetStream queue and a pool of
workers that cache their results in Redis.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what 'sudoku version' does.
		Version: versionText(debug.ReadBuildInfo()),
	}
	root.SetVersionTemplate("{{.Version}}")
	// Children inherit this: every bad flag is a usage error (exit 2).
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &exitError{code: ExitUsage, err: flagHint(cmd, err)}
	})
	// Every command has --config, --log-level and --log-format; each
	// defines the flags of the other keys it uses (config.AddKeyFlags),
	// so that its help lists no flag that does nothing there.
	config.AddGlobalFlags(root.PersistentFlags())
	// A CPU profile of the whole command, and one of what it allocated,
	// for tuning; hidden from help.
	root.PersistentFlags().String("cpuprofile", "", "write a CPU profile to `FILE`")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentFlags().String("memprofile", "", "write a profile of the allocations to `FILE` at exit")
	_ = root.PersistentFlags().MarkHidden("memprofile")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		clientGC(cmd)
		stopOnRefusal(cmd)
		if p, _ := cmd.Flags().GetString("cpuprofile"); p != "" {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			cobra.OnFinalize(func() { pprof.StopCPUProfile(); f.Close() })
		}
		if p, _ := cmd.Flags().GetString("memprofile"); p != "" {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			cobra.OnFinalize(func() { _ = pprof.Lookup("allocs").WriteTo(f, 0); f.Close() })
		}
		return nil
	}
	for _, newCmd := range subcommands {
		root.AddCommand(newCmd())
	}
	return root
}

// The configuration keys whose flags commands define (config.AddKeyFlags):
// each command those of the services and settings it uses.
const (
	keyNATSURL           = "nats.url"           // --nats-url: commands that connect to NATS
	keyRedisAddrs        = "redis.addrs"        // --redis-addrs: commands that use the Redis cache
	keyBatchSize         = "queue.batch_size"   // --queue-batch-size: commands that submit jobs
	keyWorkerConcurrency = "worker.concurrency" // --worker-concurrency: commands that run a worker pool
	keyMetricsAddr       = "metrics.addr"       // --metrics-addr: the worker's endpoints
	keyWaitTimeout       = "job.wait_timeout"   // --job-wait-timeout: commands that wait for a job
)

// flagHint adds to pflag's "unknown flag: --nats-url" that the flag is a
// setting this command does not use, when it is one.
func flagHint(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	key, ok := config.KeyOfFlag(name)
	if !ok {
		return err
	}
	return fmt.Errorf("%w ('%s' does not use %s)", err, cmd.CommandPath(), key)
}

// Execute runs the sudoku command line on the process's arguments and
// standard streams and returns the exit status. ctx should be cancelled
// on an interrupt (SIGINT, SIGTERM).
//
// With tracing configured by the OTEL_* variables (docs/observability.md),
// it sets up the tracer provider first, its service.name "sudoku-" and
// the command's name (sudoku-worker, sudoku-submit...), and flushes the
// spans before returning.
func Execute(ctx context.Context) int {
	processGC = true
	args := os.Args[1:]
	shutdown, err := telemetry.Setup(ctx, serviceName(args))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sudoku: tracing is off: %v\n", err)
	}
	code := Run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	sctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		fmt.Fprintf(os.Stderr, "sudoku: %v\n", err)
	}
	return code
}

// flushTimeout bounds how long a process waits on exit for its last
// spans to be exported.
const flushTimeout = 5 * time.Second

// serviceName is the service.name of the spans of the command args runs:
// "sudoku-" and its name, "sudoku" for the root.
func serviceName(args []string) string {
	cmd, _, err := NewRootCmd().Find(args)
	if err != nil || !cmd.HasParent() {
		return "sudoku"
	}
	return "sudoku-" + strings.ReplaceAll(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), " ", "-")
}

// Run runs the sudoku command line with args (without the program name)
// and the given streams, and returns the exit status (see ExitOK and the
// other Exit constants). Errors are printed on stderr. Tests drive the CLI
// through Run, in-process.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRootCmd()
	markRunErrors(root)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	return exitStatus(ctx, cmd, err, stderr)
}
