package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
)

// Exit statuses of the sudoku command.
const (
	// ExitOK: success; for solve, every puzzle has a unique solution.
	ExitOK = 0
	// ExitFailure: some puzzles have no unique solution (or are invalid),
	// or the command failed while running (an unreadable input, a full
	// disk).
	ExitFailure = 1
	// ExitUsage: the command line is wrong: an unknown command or flag, a
	// bad flag value, a missing input file.
	ExitUsage = 2
	// ExitCancelled: the job waited for was cancelled; the results written
	// are those done before.
	ExitCancelled = 3
	// ExitTimeout: stopped waiting for a job when job.wait_timeout passed
	// (the job goes on); the status of timeout(1).
	ExitTimeout = 124
	// ExitInterrupted: stopped by SIGINT or SIGTERM (128 + SIGINT).
	ExitInterrupted = 130
)

// exitError makes a command end with a given exit status. err is printed
// on stderr when not nil; a nil err means the command has already said
// everything (such as the summary of a solve with failures).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// messageError is an error worded for people, instead of err's own text,
// that still matches err (errors.Is, errors.As).
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }

func (e *messageError) Unwrap() error { return e.err }

// usageErrorf returns a usage error (exit status 2) with a formatted
// message; %w wraps as in fmt.Errorf.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// markRunErrors wraps the RunE of c and of every command below it so that
// an error they return without an exit status gets ExitFailure. Errors
// that do not pass through a RunE come from cobra itself (an unknown
// command, too many arguments) or from a PreRunE check, and exitStatus
// treats them as usage errors.
func markRunErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			err := run(cmd, args)
			var ee *exitError
			if err == nil || errors.As(err, &ee) {
				return err
			}
			var pe *roles.PermissionError
			if ctx := cmd.Context(); ctx != nil && errors.As(context.Cause(ctx), &pe) {
				// Stopped at once by a refusal (openConn).
				return &exitError{code: ExitFailure, err: roles.ExplainSince(start, pe)}
			}
			if ctx := cmd.Context(); ctx != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return &exitError{code: ExitInterrupted, err: errors.New("interrupted")}
			}
			if errors.Is(err, input.ErrEmpty) {
				// Like a missing file: the input given is wrong.
				return &exitError{code: ExitUsage, err: err}
			}
			// A request NATS refused (the user's role does not allow it)
			// fails late, as a timeout: say what was refused.
			return &exitError{code: ExitFailure, err: roles.ExplainSince(start, err)}
		}
	}
	for _, sub := range c.Commands() {
		markRunErrors(sub)
	}
}

// exitStatus prints err, if any, on stderr and returns the exit status for
// it. cmd is the command that ran (or the root).
func exitStatus(ctx context.Context, cmd *cobra.Command, err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	code := ExitUsage
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		err = ee.err
	} else if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		code, err = ExitInterrupted, errors.New("interrupted")
	}
	if err == nil {
		return code
	}
	path := "sudoku"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	fmt.Fprintf(stderr, "%s: %v\n", path, err)
	if code == ExitUsage {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
	}
	return code
}
