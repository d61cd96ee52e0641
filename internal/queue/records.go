package queue

import "github.com/sudoku-queue/sudoku-queue/internal/job"

// Store returns the store of q's job records and manifests: on Records
// when it is set, else on the JetStream bucket Jobs. Every reader and
// writer of the records gets its store here, so that a queue InMemory
// serves them all.
func (q *Queue) Store() *job.Store {
	if q.Records != nil {
		return job.NewStoreOn(q.Records)
	}
	return job.NewStore(q.JS, q.Jobs)
}

// InMemory returns a queue of options o whose jobs bucket is a new
// job.MemBucket and whose results stream is a new MemResults, and which
// has no server: for tests of the job logic (records, their
// transitions, statuses, listings, results stored and counted) without
// one. What needs the work stream or a connection (JS, Results, Jobs)
// finds nil.
func InMemory(o Options) *Queue {
	o.defaults()
	return &Queue{Opts: o, Records: job.NewMemBucket(), Answers: &MemResults{}}
}
