// Package e2e holds end-to-end tests of deployments that the other
// packages' tests do not build: a three-server NATS JetStream cluster
// that loses a server in the middle of a job, Redis behind a Sentinel,
// and NATS and Redis that require credentials or TLS. Every server is a
// private process on a free port of 127.0.0.1, and the sudoku processes
// are the test binary itself acting as the CLI (see TestMain), so nothing
// is built or installed beyond the nats-server and redis-server binaries
// (the tests skip without them, and fail when CI is set).
//
// The package has no code besides its tests.
package e2e
