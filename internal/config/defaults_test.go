package config

import (
	"slices"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// TestDefaultsHaveOneSource: each default the configuration states is the
// one the package that uses it applies to a zero option, so that a
// program built on the packages (a zero httpapi.Options, producer.New with
// no batch size) behaves as configs/sudoku.yaml says.
func TestDefaultsHaveOneSource(t *testing.T) {
	d := Default()
	p := producer.New(&queue.Queue{}, nil, producer.Options{}).Options()
	for _, tc := range []struct {
		key       string
		config    any
		component any
	}{
		{"queue.batch_size", d.Queue.BatchSize, p.BatchSize},
		{"queue.first_batch_size", d.Queue.FirstBatchSize, p.FirstBatch},
		{"queue.max_message_bytes", d.Queue.MaxMessageBytes, p.MaxMessageBytes},
		{"worker.max_nodes", d.Worker.MaxNodes, int64(solver.DefaultMaxNodes)},
		{"worker.shutdown_timeout", d.Worker.ShutdownTimeout, worker.DefaultShutdownTimeout},
	} {
		if tc.config != tc.component {
			t.Errorf("%s: the configuration says %v, the component uses %v", tc.key, tc.config, tc.component)
		}
	}
	if !slices.Equal(d.Queue.Backoff, worker.DefaultNakDelays()) {
		t.Errorf("queue.backoff: the configuration says %v, the worker uses %v", d.Queue.Backoff, worker.DefaultNakDelays())
	}
}
