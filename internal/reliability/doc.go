// Package reliability attacks the whole sudoku-queue system and checks
// that nothing is lost: workers and producers killed with SIGKILL, the
// NATS and Redis servers restarted or cut off in the middle of a job,
// poison messages that go to the dead-letter stream and are replayed,
// malformed input at every door, garbage published straight onto the
// subjects, and a bounded soak of up to a million puzzles.
//
// Every case is a Go test bounded in time. The sudoku processes are this
// package's test binary acting as the command line (see TestMain), except
// in the soak, which builds the real binary so that its memory and speed
// are those of a deployment and not of a race-detector build. Tests that
// stop or restart a server start their own nats-server and redis-server on
// free ports of 127.0.0.1; the others use the shared ones with names of
// their own (testenv.Name). Without the servers or their binaries the
// tests skip with a message, and fail when CI is set.
//
// SUDOKU_SOAK=N sets the soak's size (default 100000, 10000 with -short;
// 1000000 for the full run); SUDOKU_RELIABILITY_SEED fixes the random
// points at which the crash tests kill processes (each run logs the seed
// it used).
//
// The package has no code besides its tests.
package reliability
