package client

import (
	"context"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// NewWorker returns a worker on conn with opts, serving the micro
// service's submit, status and cancel endpoints (ServiceEndpoints)
// through a Client over conn that submits with popts, each owner's usage
// (for its quota) counted by the worker itself. It is how every worker
// of the sudoku command is made, so that its endpoints submit as sudoku
// submit does.
func NewWorker(conn *app.Conn, opts worker.Options, popts producer.Options) *worker.Worker {
	var w *worker.Worker
	popts.Usage = func(ctx context.Context, owner string) (int, int64, error) { return w.Usage(ctx, owner) }
	popts.Logger = opts.Logger
	opts.Endpoints = New(conn, popts).ServiceEndpoints()
	w = worker.New(conn.NC, conn.Queue, conn.Cache, opts)
	return w
}

// StartWorker runs a worker made by NewWorker in this process until the
// returned stop is called; stop waits for it and logs its error, if any,
// with opts.Logger. Without opts.Signer (proof.key), it signs with a key
// of this run's, which conn's readers trust: they take its answers
// without solving each again. Its Ready channel closes once it serves.
func StartWorker(conn *app.Conn, opts worker.Options, popts producer.Options) (w *worker.Worker, stop func()) {
	if opts.Signer == nil {
		opts.Signer = conn.Signer
	}
	if opts.Signer == nil {
		if k, err := proof.GenerateKey(); err == nil {
			opts.Signer = proof.NewSigner(k)
		}
	}
	if opts.Signer != nil {
		conn.Trust = conn.Trust.With(opts.Signer.PublicKey())
	}
	w = NewWorker(conn, opts, popts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return w, func() {
		cancel()
		if err := <-done; err != nil && opts.Logger != nil {
			opts.Logger.Warn("in-process worker", "err", err)
		}
	}
}
