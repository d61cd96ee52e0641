package producer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// TestStatusOf checks the one status type against records in each state:
// its counts sum to Done, progress and rate follow, a stale job reads
// failed, its results' place is named, and its counts are its own (not
// the record's map).
func TestStatusOf(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	created := now.Add(-10 * time.Second)
	o := queue.Options{Stream: "T"}
	running := job.Record{ID: "j1", State: job.Published, Created: created, ResultsFrom: 42, Tally: job.Tally{Lines: 300, Queued: 290, Cached: 5, Repeated: 3, Invalid: 2, Batches: 3}}
	running.AddResults(0, job.Counts{result.StatusUnique: 99, result.StatusInvalid: 1}, now)
	finished := running
	finished.Counts = job.Counts{}
	finished.Done = nil
	finished.DoneBatches = 0
	for i := range uint64(3) {
		finished.AddResults(i, job.Counts{result.StatusUnique: 98, result.StatusNone: 1, job.RepeatStatus: 1}, now)
	}
	stale := job.Record{ID: "j2", State: job.Publishing, Created: now.Add(-time.Hour), Heartbeat: now.Add(-job.StaleAfter - time.Second),
		Options: job.Options{JSONResults: true, Priority: job.PriorityHigh}}
	for _, tc := range []struct {
		name                  string
		rec                   job.Record
		state                 job.State
		done, batchesDone     int64
		unsolved              int64
		progress, rate, spent float64
		complete              bool
		form                  string
		priority              job.Priority
	}{
		{"running", running, job.Published, 100, 1, 1, 100.0 / 300, 10, 10, false, queue.FormBinary, job.PriorityNormal},
		{"finished", finished, job.Finished, 300, 3, 3, 1, 300.0 / 10, 10, true, queue.FormBinary, job.PriorityNormal},
		{"stale", stale, job.Failed, 0, 0, 0, 0, 0, 3600, false, queue.FormJSON, job.PriorityHigh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StatusOf(o, tc.rec, now)
			var sum int64
			for _, n := range s.Counts {
				sum += n
			}
			if s.State != tc.state || s.Done != tc.done || sum != s.Done || s.BatchesDone != tc.batchesDone ||
				s.Unsolved != tc.unsolved || s.Progress != tc.progress || s.Rate != tc.rate || s.Elapsed != tc.spent ||
				s.Complete != tc.complete || s.Priority != tc.priority || s.Lines != tc.rec.Lines || s.Batches != tc.rec.Batches {
				t.Errorf("StatusOf = %+v", s)
			}
			if s.State == job.Failed && s.Error == "" {
				t.Error("a failed job without its error")
			}
			if want := o.ResultsOf(tc.rec.ID, tc.form, tc.rec.ResultsFrom); s.Results != want {
				t.Errorf("results %+v, want %+v", s.Results, want)
			}
			if (s.Finished != nil) != (s.State == job.Finished || s.State == job.Failed) {
				t.Errorf("finished %v in state %s", s.Finished, s.State)
			}
			s.Counts[result.StatusUnique]++
			if tc.rec.Counts[result.StatusUnique] == s.Counts[result.StatusUnique] {
				t.Error("the status shares its counts with the record")
			}
			b, err := json.Marshal(&s)
			var back Status
			if err != nil || json.Unmarshal(b, &back) != nil || back.ID != s.ID || back.Done != s.Done || back.Results != s.Results {
				t.Errorf("JSON round trip: %s %v", b, err)
			}
		})
	}
}
