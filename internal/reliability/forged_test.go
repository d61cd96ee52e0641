package reliability

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// TestForgedBatches publishes batches carrying a victim job's id straight
// to its work subject in its lane (q.Opts.WorkMsg of a job.Batch), as anyone allowed
// to publish there could: batches whose indexes the job does not have,
// and batches at indexes it has but with other puzzles, other lines or
// items moved. The victim's output is the same as `solve --local`'s and
// its counts are exact; every forgery is in the dead-letter stream with
// its reason and the victim's id, as `sudoku dlq list` shows; none has
// results. A forgery sent with its batch's own message id (the default
// of WorkMsg) is dropped by the stream as a duplicate of the real batch.
func TestForgedBatches(t *testing.T) {
	t.Parallel()
	const n = 2000 // batches of 20: 100 batches
	// No redelivery expected: a message a worker prefetched waits in its
	// buffer without a heartbeat, and with the short ack wait of the
	// other tests, on a busy machine, it would be delivered (and
	// dead-lettered) twice.
	s := newSys(t, options{env: []string{"SUDOKU_QUEUE_ACK_WAIT=30s"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	file, puzzles := genFile(t, clue17, n, 30)
	_, others := genFile(t, hardest, 200, 31)
	_, local, _ := s.run(time.Minute, "", "solve", "--local", file)
	victim := s.submit(file) // no worker yet: every batch waits in the stream
	batches := uint64(n / s.batchSize)
	lane := s.lane(victim) // the forgeries go to the victim's lane, as its batches do

	grid := func(p string) solver.Grid {
		g, err := solver.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// batch returns batch index of the victim as its producer made it.
	batch := func(index uint64) *job.Batch {
		b := &job.Batch{Job: victim, Index: index, First: index * uint64(s.batchSize)}
		for i := range s.batchSize {
			item := int(b.First) + i
			b.Items = append(b.Items, job.Item{Line: item + 1, Kind: job.Solve, Grid: grid(puzzles[item])})
		}
		return b
	}
	// beyond returns a batch at an index the victim does not have, of
	// other puzzles.
	beyond := func(index uint64) *job.Batch {
		b := &job.Batch{Job: victim, Index: index, First: index * uint64(s.batchSize)}
		for i := range s.batchSize {
			b.Items = append(b.Items, job.Item{Line: int(b.First) + i + 1, Kind: job.Solve, Grid: grid(others[i])})
		}
		return b
	}
	// withOthers returns b with other puzzles from item from on.
	withOthers := func(b *job.Batch, from int) *job.Batch {
		for i := from; i < len(b.Items); i++ {
			b.Items[i].Grid = grid(others[(int(b.Index)+i)%len(others)])
		}
		return b
	}
	forgeries := []struct {
		name   string
		reason string
		b      *job.Batch
	}{
		{"the index after the last", queue.ReasonOutOfRange, beyond(batches)},
		{"an index past every manifest", queue.ReasonOutOfRange, beyond(10_000)},
		{"an index of 2^40", queue.ReasonOutOfRange, withOthers(&job.Batch{Job: victim, Index: 1 << 40, First: 1 << 40,
			Items: []job.Item{{Line: 1, Kind: job.Solve}}}, 0)},
		{"other puzzles in batch 5", queue.ReasonMismatch, withOthers(batch(5), 0)},
		{"one puzzle changed in batch 9", queue.ReasonMismatch, withOthers(batch(9), 19)},
		{"batch 12 one item later", queue.ReasonMismatch, func() *job.Batch { b := batch(12); b.First++; return b }()},
		{"batch 40 on other lines", queue.ReasonMismatch, func() *job.Batch {
			b := batch(40)
			for i := range b.Items {
				b.Items[i].Line += 1000
			}
			return b
		}()},
		{"the last batch, first solution only", queue.ReasonMismatch, func() *job.Batch {
			b := batch(batches - 1)
			b.Flags |= job.FlagFirstSolution
			b.Items[0].Grid = grid(others[0])
			return b
		}()},
	}
	for i, f := range forgeries {
		m := s.q.Opts.WorkMsg(f.b, lane)
		if f.b.Index < batches {
			// With its batch's own message id, the stream drops it as a
			// duplicate of the real batch.
			ack, err := s.q.JS.PublishMsg(ctx, m)
			if err != nil || !ack.Duplicate {
				t.Fatalf("forgery %q with the real batch's message id: %+v, %v; want a duplicate", f.name, ack, err)
			}
		}
		m.Header.Set(nats.MsgIdHdr, "forged-"+strconv.Itoa(i))
		if ack, err := s.q.JS.PublishMsg(ctx, m); err != nil || ack.Duplicate {
			t.Fatalf("publish forgery %q: %+v, %v", f.name, ack, err)
		}
	}

	w0, w1 := s.startWorker("worker-0"), s.startWorker("worker-1")
	code, out, stderr := s.run(2*time.Minute, "", "job", "wait", victim)
	if code != cli.ExitOK {
		t.Fatalf("job wait: exit %d: %s", code, tail(stderr, 20))
	}
	if out != local {
		t.Fatalf("the victim's results differ from solve --local's (%d and %d bytes)", len(out), len(local))
	}
	checkSummary(t, stderr, victim, fmt.Sprintf("%d unique", n))
	s.checkJob(victim, want{lines: n, queued: n})

	dls := s.waitDLQ(len(forgeries), time.Minute)
	table, _ := s.mustRun(cli.ExitOK, "dlq", "list")
	for i, f := range forgeries {
		var dl *queue.DeadLetter
		for j := range dls {
			if dls[j].MsgID == "forged-"+strconv.Itoa(i) {
				dl = &dls[j]
			}
		}
		switch {
		case dl == nil:
			t.Errorf("forgery %q is not in the dead-letter stream", f.name)
			continue
		case dl.Reason != f.reason || dl.Job != victim || dl.Batch == nil || *dl.Batch != f.b.Index ||
			dl.Puzzles != len(f.b.Items) || dl.Deliveries != 1 || dl.Subject != s.q.Opts.WorkSubject(victim, lane):
			t.Errorf("forgery %q: dead letter %+v; want reason %s, batch %d", f.name, dl, f.reason, f.b.Index)
		}
		wantErr := map[string]string{queue.ReasonOutOfRange: "its producer published none",
			queue.ReasonMismatch: "is not the one its producer published"}[f.reason]
		if !strings.Contains(dl.Error, wantErr) {
			t.Errorf("forgery %q: error %q, want it to say %q", f.name, dl.Error, wantErr)
		}
		if row := dlqRow(table, dl.Seq); !strings.Contains(row, f.reason) || !strings.Contains(row, victim) {
			t.Errorf("dlq list does not show forgery %q (seq %d):\n%s", f.name, dl.Seq, table)
		}
	}
	if c := w0.count("message moved to the dead-letter stream") + w1.count("message moved to the dead-letter stream"); c != len(forgeries) {
		t.Errorf("the workers logged %d dead letters, want %d", c, len(forgeries))
	}
	// The victim still has exactly one results message per batch (checked
	// above), and none for the indexes it does not have.
	for _, f := range forgeries {
		if f.b.Index < batches {
			continue
		}
		if _, err := s.q.Results.GetLastMsgForSubject(ctx, s.q.Opts.ResultSubject(victim, f.b.Index)); err == nil {
			t.Errorf("forgery %q has results", f.name)
		}
	}
	t.Logf("sudoku dlq list:\n%s", table)
}
