// Package reliability attacks the whole sudoku-queue system and checks
// that nothing is lost: workers and producers killed with SIGKILL, the
// NATS server restarted or cut off in the middle of a job, Redis (only a
// cache) killed, restarted, flushed or full in the middle of one, poison
// messages that go to the dead-letter stream and are replayed, forged
// batches carrying another job's id, malformed input at every door,
// garbage published straight onto the subjects, and an opt-in soak of up
// to a million puzzles. A job's state is checked where it lives, in
// JetStream: its record (producer.JobStatus, `sudoku job status`), its
// results messages and their counts, the dead letters (`sudoku dlq
// list`), and every output line against `solve --local` or the puzzle.
//
// Every case is a Go test bounded in time. The sudoku processes, every
// command included, are this package's test binary acting as the command
// line (see TestMain), started as child processes with the test's
// settings in their environment, except in the soak, which builds the
// real binary so that its memory and speed are those of a deployment and
// not of a race-detector build. Tests that stop or restart a server start
// their own nats-server and redis-server on free ports of 127.0.0.1; the
// others use the shared ones with names of their own (testenv.Name).
// Without the servers or their binaries the tests skip with a message,
// and fail when CI is set.
//
// Tests that strike at a moment of a job (a kill, an outage) run one at a
// time; the others call t.Parallel and run together after them, so that
// their waits (a producer's heartbeat going stale, redelivery backoffs)
// overlap.
//
// SUDOKU_SOAK=N runs the soak with N puzzles (1000000 for the full run;
// skipped without it). SUDOKU_RELIABILITY_CACHE_N=N sets the size of the
// full-cache tests' job (default 20000; 100000 is the full size).
// SUDOKU_RELIABILITY_SEED fixes the random points at which the crash
// tests kill processes (each run logs the seed it used).
//
// The package has no code besides its tests.
package reliability
