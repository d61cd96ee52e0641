package producer

import (
	"context"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// BenchmarkSolveRequest measures one uncached solve round trip as
// `get --solve` makes it after a cache miss (SolveOptions.NoLookup): the
// request, a worker's solve of a 17-clue puzzle, its reply and the
// reader's check of it. It runs on the embedded and the shared NATS, with
// a worker in this process, unsigned (the reader confirms the unique by
// solving it again) and signed by a key the reader trusts. Compare runs
// with benchstat:
//
//	go test -run '^$' -bench SolveRequest -count 10 ./producer/ > new.txt
func BenchmarkSolveRequest(b *testing.B) {
	key, err := proof.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	signer := proof.NewSigner(key)
	puzzles := testenv.Puzzles(b, "testdata/17_clue_100.txt", 100)
	for _, server := range testenv.Servers {
		b.Run(server, func(b *testing.B) {
			q := testenv.NewQueue(b, server, queue.Options{})
			c := cache.NewGuard(cache.NewMemory(0), cache.GuardOptions{Logger: quiet})
			for _, tc := range []struct {
				name   string
				signer *proof.Signer
				trust  *proof.Trust
			}{
				{"unsigned", nil, nil},
				{"signed", signer, proof.NewTrust(signer.PublicKey())},
			} {
				b.Run(tc.name, func(b *testing.B) {
					w := worker.New(q.NC, q.Queue, c, worker.Options{Logger: quiet, Signer: tc.signer})
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() { done <- w.Run(ctx) }()
					defer func() { cancel(); <-done }()
					select {
					case <-w.Ready():
					case err := <-done:
						b.Fatalf("worker: %v", err)
					}
					opts := SolveOptions{NoLookup: true, Logger: quiet, Trust: tc.trust}
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
						_, err := Solve(rctx, q.NC, q.Opts, puzzles[i%len(puzzles)], opts)
						rcancel()
						if err != nil {
							b.Fatal(err)
						}
						i++
					}
				})
			}
		})
	}
}
