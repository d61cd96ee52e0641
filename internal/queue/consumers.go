package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// Work is divided by job: each job has a durable pull consumer of its own
// on the work stream, filtered on its work subject (JobConsumer), so that
// a worker can take its next batch from whichever job's turn it is,
// instead of from one queue where a small job waits for every batch of a
// larger one published before it. The work stream's work-queue retention
// lets consumers with disjoint filters share it; a batch still goes to
// one worker at a time, and is removed from the stream when acked.
//
// The producer creates its job's consumer before it publishes the first
// batch; a worker that finds a job without one (created by an older
// producer, or lost) creates it the same way. It is deleted when the job
// ends (the last batch's results stored, cancelled, or removed), and by
// the server after jobConsumerIdle without a pull, a backstop for a job
// left behind: a worker that later finds the job active creates it again,
// and its messages are still in the stream.

// jobConsumerIdle is how long a job's consumer may go without a pull
// before the server deletes it.
const jobConsumerIdle = time.Hour

// legacyConsumerSuffix ends the name of the consumer every worker shared
// before work was divided by job.
const legacyConsumerSuffix = "-bulk"

// JobConsumer is the name of job id's durable consumer on the work stream.
func (o Options) JobConsumer(id string) string {
	o.defaults()
	return o.Consumer + "-job-" + id
}

// JobConsumerConfig is the configuration of job id's consumer.
func (o Options) JobConsumerConfig(id string) jetstream.ConsumerConfig {
	o.defaults()
	return jetstream.ConsumerConfig{
		Durable:           o.JobConsumer(id),
		Description:       "sudoku-queue: the work of job " + id,
		FilterSubject:     o.WorkSubject(id),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           o.AckWait,
		MaxDeliver:        o.MaxDeliver,
		MaxAckPending:     o.MaxAckPending,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: jobConsumerIdle,
	}
}

// JobWork returns job id's consumer, created when it is missing.
func (q *Queue) JobWork(ctx context.Context, id string) (jetstream.Consumer, error) {
	name := q.Opts.JobConsumer(id)
	c, err := q.JS.Consumer(ctx, q.Opts.Stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		c, err = q.JS.CreateConsumer(ctx, q.Opts.Stream, q.Opts.JobConsumerConfig(id))
		if errors.Is(err, jetstream.ErrConsumerExists) {
			c, err = q.JS.Consumer(ctx, q.Opts.Stream, name) // by another client meanwhile
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: consumer %s on %s: %w", name, q.Opts.Stream, err)
	}
	return c, nil
}

// EndWork removes what is left of job id's work: the batches not yet
// acked leave the work stream, and its consumer is deleted (a batch a
// worker holds then can be neither acked nor redelivered). Either may be
// gone already.
func (q *Queue) EndWork(ctx context.Context, id string) error {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return fmt.Errorf("queue: job %s: %w", id, err)
	}
	if err := work.Purge(ctx, jetstream.WithPurgeSubject(q.Opts.WorkSubject(id))); err != nil {
		return fmt.Errorf("queue: job %s: remove its work: %w", id, err)
	}
	return q.DropJobWork(ctx, id)
}

// DropJobWork deletes job id's consumer, if it exists.
func (q *Queue) DropJobWork(ctx context.Context, id string) error {
	err := q.JS.DeleteConsumer(ctx, q.Opts.Stream, q.Opts.JobConsumer(id))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("queue: job %s: delete its consumer: %w", id, err)
	}
	return nil
}

// DropDoneJobWork deletes job id's consumer once no message of the job
// is left in the work stream (none to deliver, none awaiting an ack), and
// reports whether it did: a message left (a nak'ed batch still to be
// delivered, a copy whose ack was lost) keeps it. An error of the look
// at the stream keeps it too, without an error.
func (q *Queue) DropDoneJobWork(ctx context.Context, id string) (bool, error) {
	if n, err := q.WorkLeft(ctx, id); err != nil || n > 0 {
		return false, nil
	}
	return true, q.DropJobWork(ctx, id)
}

// dropSharedConsumer deletes the consumer workers shared before work was
// divided by job, if it exists: its filter overlaps every job's, which a
// work-queue stream refuses. Its messages stay in the stream; each job's
// consumer delivers them from the start.
func (o Options) dropSharedConsumer(ctx context.Context, js jetstream.JetStream) error {
	name := o.Consumer + legacyConsumerSuffix
	err := js.DeleteConsumer(ctx, o.Stream, name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("queue: delete the shared consumer %s on %s: %w", name, o.Stream, err)
	}
	return nil
}

// Backlog is what waits for the workers on the work stream, in batches:
// the figures of every job's consumer, summed.
type Backlog struct {
	// Pending batches not yet delivered; AckPending delivered and not yet
	// acked; Redelivered delivered more than once; Waiting pull requests
	// waiting for work.
	Pending, AckPending, Redelivered, Waiting uint64
	// Jobs holds each job's own figures, by id.
	Jobs map[string]Backlog
}

// Backlog sums the figures of the jobs' consumers.
func (q *Queue) Backlog(ctx context.Context) (Backlog, error) {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return Backlog{}, fmt.Errorf("queue: %w", err)
	}
	b := Backlog{Jobs: map[string]Backlog{}}
	prefix := q.Opts.JobConsumer("")
	lister := work.ListConsumers(ctx)
	for ci := range lister.Info() {
		id, ok := strings.CutPrefix(ci.Name, prefix)
		if !ok {
			continue
		}
		j := Backlog{Pending: ci.NumPending, AckPending: uint64(ci.NumAckPending),
			Redelivered: uint64(ci.NumRedelivered), Waiting: uint64(ci.NumWaiting)}
		b.Jobs[id] = j
		b.Pending += j.Pending
		b.AckPending += j.AckPending
		b.Redelivered += j.Redelivered
		b.Waiting += j.Waiting
	}
	if err := lister.Err(); err != nil {
		return b, fmt.Errorf("queue: list the consumers of %s: %w", q.Opts.Stream, err)
	}
	return b, nil
}

// StrayWork returns the subjects of the work stream that hold messages,
// with their counts, other than those of the jobs active says are active:
// work no active job's consumer delivers (published by hand or by a bug,
// or left by a job that ended without removing it), which a worker must
// take all the same to dead-letter it.
func (q *Queue) StrayWork(ctx context.Context, active func(id string) bool) (map[string]uint64, error) {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	info, err := work.Info(ctx, jetstream.WithSubjectFilter(q.Opts.Prefix+".jobs.>"))
	if err != nil {
		return nil, fmt.Errorf("queue: the subjects of %s: %w", q.Opts.Stream, err)
	}
	out := map[string]uint64{}
	for subject, n := range info.State.Subjects {
		if id, ok := q.Opts.WorkJob(subject); ok && active(id) {
			continue
		}
		out[subject] = n
	}
	return out, nil
}

// WorkJob returns the job whose work subject subject is.
func (o Options) WorkJob(subject string) (string, bool) {
	o.defaults()
	id, ok := strings.CutPrefix(subject, o.Prefix+".jobs.bulk.")
	return id, ok && id != "" && !strings.Contains(id, ".")
}

// StrayConsumerConfig is the configuration of a consumer of the stray
// work on subject: short-lived, deleted by the server once idle.
func (o Options) StrayConsumerConfig(subject string) jetstream.ConsumerConfig {
	o.defaults()
	sum := sha256.Sum256([]byte(subject))
	cc := o.JobConsumerConfig("")
	cc.Durable = o.Consumer + "-stray-" + hex.EncodeToString(sum[:8])
	cc.Description = "sudoku-queue: stray work on " + subject
	cc.FilterSubject = subject
	cc.InactiveThreshold = strayConsumerIdle
	return cc
}

// strayConsumerIdle is how long a consumer of stray work lives without a
// pull.
const strayConsumerIdle = time.Minute

// StrayConsumer returns a consumer of the stray work on subject, created when
// missing.
func (q *Queue) StrayConsumer(ctx context.Context, subject string) (jetstream.Consumer, error) {
	cc := q.Opts.StrayConsumerConfig(subject)
	c, err := q.JS.CreateOrUpdateConsumer(ctx, q.Opts.Stream, cc)
	if err != nil {
		return nil, fmt.Errorf("queue: consumer %s on %s: %w", cc.Durable, q.Opts.Stream, err)
	}
	return c, nil
}

// WorkLeft returns the number of job id's messages in the work stream:
// not yet delivered, or delivered and not yet acked.
func (q *Queue) WorkLeft(ctx context.Context, id string) (uint64, error) {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return 0, fmt.Errorf("queue: %w", err)
	}
	subject := q.Opts.WorkSubject(id)
	info, err := work.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("queue: job %s: %w", id, err)
	}
	return info.State.Subjects[subject], nil
}

// TallyResults calls fn with the batch index and the counts (the
// HdrCounts header) of every results message of job id from the results
// stream's sequence from on (0: its start), reading the headers alone.
// It is the slow, sure count of a job's results, for repairing its record.
func (q *Queue) TallyResults(ctx context.Context, id string, from uint64, fn func(index uint64, c job.Counts)) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{q.Opts.ResultsFilter(id)}, HeadersOnly: true,
		InactiveThreshold: time.Minute}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	c, err := q.Results.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("queue: job %s: read results: %w", id, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("queue: job %s: read results: %w", id, err)
	}
	prefix := q.Opts.ResultsFilter(id)
	prefix = prefix[:len(prefix)-1] // "P.results.<job>."
	for left := info.NumPending; left > 0; {
		batch, err := c.Fetch(int(min(left, 1024)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("queue: job %s: read results: %w", id, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			index, err := strconv.ParseUint(strings.TrimPrefix(m.Subject(), prefix), 10, 64)
			cs, cerr := job.ParseCounts(m.Headers().Get(HdrCounts))
			if err == nil && cerr == nil {
				fn(index, cs)
			}
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("queue: job %s: read results: %w", id, err)
		}
		if got == 0 {
			return nil
		}
		left -= uint64(got)
	}
	return nil
}

// JobIdle reports whether job id has nothing left to deliver or to ack,
// by either of two accounts: the work stream holds no message of it (a
// work-queue stream removes a message when it is acked), or its consumer
// has nothing pending and nothing awaiting an ack. Either may lag in a
// cluster that lost a leader: a consumer's new leader may report counts of
// an older state, and a message the consumer counts as acked may stay in
// the stream (a server killed between the two writes keeps it).
func (q *Queue) JobIdle(ctx context.Context, id string) (bool, error) {
	n, err := q.WorkLeft(ctx, id)
	if err == nil && n == 0 {
		return true, nil
	}
	c, cerr := q.JS.Consumer(ctx, q.Opts.Stream, q.Opts.JobConsumer(id))
	if cerr != nil {
		if errors.Is(cerr, jetstream.ErrConsumerNotFound) && err == nil {
			return false, nil // messages left, no consumer yet to deliver them
		}
		return false, fmt.Errorf("queue: job %s: %w", id, errors.Join(err, cerr))
	}
	ci := c.CachedInfo()
	return ci.NumPending == 0 && ci.NumAckPending == 0, nil
}
