package reliability

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// garbage is a body published straight onto a work subject, and whether
// the workers must dead-letter it (it does not decode) or may take it (it
// decodes, whatever nonsense it holds).
type garbage struct {
	name        string
	body        []byte
	undecodable bool
}

// garbageBodies returns bodies of every kind of wrongness, random ones
// from r.
func garbageBodies(t *testing.T, seed uint64) []garbage {
	r := rngFrom(seed)
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	valid := queue.Batch{JobID: "garbage", Items: []queue.Item{{Puzzle: strings.Repeat(".", 81)}}}
	enc := valid.Append(nil)
	gs := []garbage{
		{"empty", nil, true},
		{"text", []byte("hello, workers"), true},
		{"JSON", []byte(`{"job":"x","puzzles":["` + strings.Repeat(".", 81) + `"]}`), true},
		{"version 2", append([]byte{2}, enc[1:]...), true},
		{"cut short", enc[:len(enc)-1], true},
		{"trailing bytes", append(enc[:len(enc):len(enc)], 0, 0), true},
		{"claims 100000 puzzles", binary.AppendUvarint([]byte{queue.Version, 0, 1, 'j', 0}, queue.MaxBatch), true},
		{"900 kB of noise", random(900 << 10), true},
	}
	for i := range 20 {
		gs = append(gs, garbage{fmt.Sprintf("noise %d", i), random(1 + r.IntN(4096)), true})
	}
	// Bodies that decode: every puzzle in them is invalid (or absurd), and
	// their job ids name no job.
	decodes := []queue.Batch{
		{JobID: "a.>", Items: []queue.Item{{Puzzle: "x"}}},
		{JobID: "*", Items: []queue.Item{{Puzzle: "<script>alert(1)</script>"}}},
		{JobID: "..", Items: []queue.Item{{Puzzle: "\x00\x00"}}},
		{JobID: "$JS.API.STREAM.DELETE", Items: []queue.Item{{Puzzle: strings.Repeat("9", 81)}}},
		{JobID: strings.Repeat("j", queue.MaxJobID), Index: 1 << 62, Items: []queue.Item{{Index: 1 << 62, Puzzle: strings.Repeat("\xff", 4096)}}},
		{JobID: "packed", Flags: queue.FlagPacked, Items: []queue.Item{{Puzzle: "abc"}, {Puzzle: strings.Repeat("\xff", queue.PackedLen)}}},
		{JobID: "empty", Items: nil},
		{JobID: "many", Items: make([]queue.Item, 100_000)}, // 100000 empty puzzles, ~200 kB
	}
	for _, b := range decodes {
		gs = append(gs, garbage{"decodes: job " + fmt.Sprintf("%.20q", b.JobID), b.Append(nil), false})
	}
	return gs
}

// TestGarbageMessages publishes garbage straight onto the bulk and
// interactive subjects, next to a real job: the workers dead-letter what
// does not decode, take what does (nonsense puzzles get invalid results,
// unknown jobs are not counted), refuse nothing they should take, never
// crash, and the real job completes. A body over the server's payload
// limit does not even get in.
func TestGarbageMessages(t *testing.T) {
	s := newSys(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w0, w1 := s.startWorker("worker-0"), s.startWorker("worker-1")
	file, puzzles := genFile(t, clue17, 3000, 10)
	id := s.submit(file)

	undecodable := 0
	for _, subject := range []string{s.name + ".jobs.bulk", s.name + ".jobs.interactive"} {
		for _, g := range garbageBodies(t, 11) {
			if _, err := s.js.Publish(ctx, subject, g.body); err != nil {
				t.Fatalf("publish %s to %s: %v", g.name, subject, err)
			}
			if g.undecodable {
				undecodable++
			}
		}
		// Over the server's payload limit (1 MB): refused at the door.
		_, err := s.js.Publish(ctx, subject, make([]byte, 2<<20))
		if !errors.Is(err, nats.ErrMaxPayload) {
			t.Errorf("publishing 2 MB to %s: %v, want %v", subject, err, nats.ErrMaxPayload)
		}
	}

	out, _ := s.mustRun(cli.ExitOK, "job", "wait", id)
	checkSolutions(t, puzzles, out)
	s.checkJob(id, int64(len(puzzles)))
	dls := s.waitDLQ(undecodable, time.Minute)
	for _, dl := range dls {
		if dl.Reason != "undecodable" || dl.Deliveries != 1 || dl.Job != "" {
			t.Errorf("dead letter %+v", dl)
		}
	}
	for _, w := range []*proc{w0, w1} {
		if w.exited() {
			t.Fatalf("%s died (exit %d)", w.name, w.code)
		}
		if strings.Contains(w.stderr.String(), "panic") {
			t.Errorf("%s logged a panic:\n%s", w.name, logTail(w.stderr.String()))
		}
	}
	if n := w0.count("message moved to the dead-letter stream") + w1.count("message moved to the dead-letter stream"); n != undecodable {
		t.Errorf("the workers logged %d dead letters, want one line for each of %d", n, undecodable)
	}
	// Everything was taken or dead-lettered: drop the dead letters and the
	// queue is empty.
	dlq, err := s.js.Stream(ctx, s.name+"_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	if err := dlq.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	s.checkDrained()
	// The workers still work.
	file2, puzzles2 := genFile(t, clue17, 500, 12)
	out, _ = s.mustRun(cli.ExitOK, "submit", "--wait", file2)
	checkSolutions(t, puzzles2, out)
	t.Logf("%d undecodable bodies dead-lettered, %d decodable ones taken, 2 oversized refused", undecodable, 2*8)
}
