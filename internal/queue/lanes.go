package queue

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// Work waits in lanes: each owner has a lane per priority and slot, a
// durable pull consumer on the work stream filtered on the lane's
// subjects, which its jobs' batches share in the order they were
// published. The number of consumers depends on the owners with work and
// their priorities, never on the number of jobs: opening a job creates no
// server state but its record and its messages, and ending one leaves
// nothing behind.
//
// Slots keep an owner's jobs from waiting for each other: a job whose
// whole input fits in its first batch (a small job) goes to the owner's
// small slot, which only small jobs share; a larger one goes to the
// least busy of the owner's BigSlots big slots. So an owner's small job
// never waits for its own large one, and up to BigSlots large jobs of an
// owner take turns. Workers take turns between owners first, then
// between an owner's lanes (worker/sched.go): an owner gains nothing by
// splitting its work into more jobs.
//
// A lane's consumer is created by the first worker that finds one of its
// jobs active, and deleted by a worker once the lane has no active job
// and no message left (DropIdleLane), or by the server after
// laneConsumerIdle without a pull. Batches of a job that ended
// (cancelled, failed) stay in its lane until a worker takes them and
// drops them unsolved.

// Slots of a lane.
const (
	// SlotSmall holds the jobs whose whole input fits in one batch.
	SlotSmall = "s"
	// BigSlots is the number of slots an owner's larger jobs are spread
	// over, per priority: "b0", "b1", ...
	BigSlots = 3
)

// BigSlot returns the name of big slot i.
func BigSlot(i int) string { return "b" + strconv.Itoa(i) }

// validSlot reports whether s names a slot.
func validSlot(s string) bool {
	if s == SlotSmall {
		return true
	}
	i, err := strconv.Atoi(strings.TrimPrefix(s, "b"))
	return strings.HasPrefix(s, "b") && err == nil && i >= 0 && i < BigSlots && s == BigSlot(i)
}

// Lane is one queue of work: an owner's jobs of one priority in one slot.
type Lane struct {
	Owner    string
	Priority job.Priority
	Slot     string
}

// LaneOf returns the lane of a job's record.
func LaneOf(r *job.Record) Lane {
	return Lane{Owner: job.OwnerOf(r.ID), Priority: r.Options.Priority.Or(), Slot: cmp.Or(r.Slot, SlotSmall)}
}

// String returns l as "owner/priority/slot".
func (l Lane) String() string { return l.Owner + "/" + string(l.Priority) + "/" + l.Slot }

// Valid reports whether l names a lane.
func (l Lane) Valid() bool {
	_, err := job.ParsePriority(string(l.Priority))
	return job.CheckOwner(l.Owner) == nil && l.Priority != "" && err == nil && validSlot(l.Slot)
}

// WorkSubject is the subject of the work batches of job id in lane l (l's
// owner is id's).
func (o Options) WorkSubject(id string, l Lane) string {
	o.defaults()
	_, serial, _ := job.SplitID(id)
	return o.laneSubject(l) + "." + serial
}

// laneSubject is the subject of lane l without its job's serial.
func (o Options) laneSubject(l Lane) string {
	return o.Prefix + ".jobs." + l.Owner + "." + string(l.Priority) + "." + l.Slot
}

// LaneFilter matches the work subjects of every job in lane l.
func (o Options) LaneFilter(l Lane) string { o.defaults(); return o.laneSubject(l) + ".*" }

// OwnerWorkFilter matches the work subjects of every job of owner.
func (o Options) OwnerWorkFilter(owner string) string {
	o.defaults()
	return o.Prefix + ".jobs." + owner + ".>"
}

// WorkJob returns the job and the lane of a work subject, and whether
// subject is one.
func (o Options) WorkJob(subject string) (id string, l Lane, ok bool) {
	o.defaults()
	rest, ok := strings.CutPrefix(subject, o.Prefix+".jobs.")
	if !ok {
		return "", Lane{}, false
	}
	t := strings.Split(rest, ".")
	if len(t) != 4 {
		return "", Lane{}, false
	}
	l = Lane{Owner: t[0], Priority: job.Priority(t[1]), Slot: t[2]}
	id = t[0] + "." + t[3]
	if !l.Valid() || !job.ValidID(id) {
		return "", Lane{}, false
	}
	return id, l, true
}

// LaneConsumer is the name of lane l's durable consumer on the work
// stream: "<Consumer>-<owner>-<priority>-<slot>".
func (o Options) LaneConsumer(l Lane) string {
	o.defaults()
	return o.Consumer + "-" + l.Owner + "-" + string(l.Priority) + "-" + l.Slot
}

// laneConsumerIdle is how long a lane's consumer may go without a pull
// before the server deletes it: a backstop for one no worker dropped.
const laneConsumerIdle = 10 * time.Minute

// LaneConsumerConfig is the configuration of lane l's consumer.
func (o Options) LaneConsumerConfig(l Lane) jetstream.ConsumerConfig {
	o.defaults()
	return jetstream.ConsumerConfig{
		Durable:           o.LaneConsumer(l),
		Description:       "sudoku-queue: the work of lane " + l.String(),
		FilterSubject:     o.LaneFilter(l),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           o.AckWait,
		MaxDeliver:        o.MaxDeliver,
		MaxAckPending:     o.MaxAckPending,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: laneConsumerIdle,
	}
}

// LaneWork returns lane l's consumer, created when it is missing.
func (q *Queue) LaneWork(ctx context.Context, l Lane) (jetstream.Consumer, error) {
	name := q.Opts.LaneConsumer(l)
	c, err := q.JS.Consumer(ctx, q.Opts.Stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		c, err = q.JS.CreateConsumer(ctx, q.Opts.Stream, q.Opts.LaneConsumerConfig(l))
		if errors.Is(err, jetstream.ErrConsumerExists) {
			c, err = q.JS.Consumer(ctx, q.Opts.Stream, name) // by another client meanwhile
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: consumer %s on %s: %w", name, q.Opts.Stream, err)
	}
	return c, nil
}

// EndWork removes what is left of job id's work in lane l from the work
// stream (an admin's right: it purges). A batch a worker holds then can
// no longer be acked, and is not redelivered.
func (q *Queue) EndWork(ctx context.Context, id string, l Lane) error {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return fmt.Errorf("queue: job %s: %w", id, err)
	}
	if err := work.Purge(ctx, jetstream.WithPurgeSubject(q.Opts.WorkSubject(id, l))); err != nil {
		return fmt.Errorf("queue: job %s: remove its work: %w", id, err)
	}
	return nil
}

// DropIdleLane deletes lane l's consumer once no message of the lane is
// left in the work stream (none to deliver, none awaiting an ack), and
// reports whether it did: a message left keeps it, as does an error of
// the look at the stream (without an error). Call it when the lane has no
// active job: a job published into it meanwhile finds its consumer made
// again by the next worker that takes its turn.
func (q *Queue) DropIdleLane(ctx context.Context, l Lane) (bool, error) {
	if n, err := q.messagesOn(ctx, q.Opts.LaneFilter(l)); err != nil || n > 0 {
		return false, nil
	}
	err := q.JS.DeleteConsumer(ctx, q.Opts.Stream, q.Opts.LaneConsumer(l))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, fmt.Errorf("queue: lane %s: delete its consumer: %w", l, err)
	}
	return true, nil
}

// messagesOn returns the number of messages of the work stream on the
// subjects filter matches.
func (q *Queue) messagesOn(ctx context.Context, filter string) (uint64, error) {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return 0, fmt.Errorf("queue: %w", err)
	}
	info, err := work.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("queue: the subjects of %s: %w", q.Opts.Stream, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// BigSlotFor returns the big slot of owner at priority p with the fewest
// messages waiting, for a new large job: the owner's large jobs spread
// over its slots, and a new one waits behind the least. It costs one
// request; when the answer cannot be had, a slot is taken at random.
func (q *Queue) BigSlotFor(ctx context.Context, owner string, p job.Priority) string {
	counts := make([]uint64, BigSlots)
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err == nil {
		filter := q.Opts.Prefix + ".jobs." + owner + "." + string(p.Or()) + ".*.*"
		var info *jetstream.StreamInfo
		if info, err = work.Info(ctx, jetstream.WithSubjectFilter(filter)); err == nil {
			for subject, n := range info.State.Subjects {
				if _, l, ok := q.Opts.WorkJob(subject); ok && l.Slot != SlotSmall {
					i, _ := strconv.Atoi(l.Slot[1:])
					counts[i] += n
				}
			}
		}
	}
	if err != nil {
		return BigSlot(int(time.Now().UnixNano() % BigSlots))
	}
	return BigSlot(slices.Index(counts, slices.Min(counts)))
}

// Backlog is what waits for the workers on the work stream, in batches:
// the figures of every lane's consumer, summed.
type Backlog struct {
	// Pending batches not yet delivered; AckPending delivered and not yet
	// acked; Redelivered delivered more than once; Waiting pull requests
	// waiting for work.
	Pending, AckPending, Redelivered, Waiting uint64
	// Lanes holds each lane's own figures, by its consumer's name.
	Lanes map[string]Backlog
}

// Backlog sums the figures of the lanes' consumers.
func (q *Queue) Backlog(ctx context.Context) (Backlog, error) {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return Backlog{}, fmt.Errorf("queue: %w", err)
	}
	b := Backlog{Lanes: map[string]Backlog{}}
	prefix := q.Opts.Consumer + "-"
	lister := work.ListConsumers(ctx)
	for ci := range lister.Info() {
		if !strings.HasPrefix(ci.Name, prefix) {
			continue
		}
		j := Backlog{Pending: ci.NumPending, AckPending: uint64(ci.NumAckPending),
			Redelivered: uint64(ci.NumRedelivered), Waiting: uint64(ci.NumWaiting)}
		b.Lanes[ci.Name] = j
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

// WorkSubjects returns the subjects of the work stream that hold
// messages, with their counts: every batch not yet delivered or not yet
// acked, whether or not a lane's consumer exists (none does before a
// worker takes its lane's first turn).
func (q *Queue) WorkSubjects(ctx context.Context) (map[string]uint64, error) {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	info, err := work.Info(ctx, jetstream.WithSubjectFilter(q.Opts.WorkFilter()))
	if err != nil {
		return nil, fmt.Errorf("queue: the subjects of %s: %w", q.Opts.Stream, err)
	}
	return info.State.Subjects, nil
}

// OwnerJobsWithWork returns the jobs of owner that have messages in the
// work stream (not yet delivered, or not yet acked): one request, however
// many records the owner keeps.
func (q *Queue) OwnerJobsWithWork(ctx context.Context, owner string) ([]string, error) {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	info, err := work.Info(ctx, jetstream.WithSubjectFilter(q.Opts.OwnerWorkFilter(owner)))
	if err != nil {
		return nil, fmt.Errorf("queue: the subjects of %s: %w", q.Opts.Stream, err)
	}
	var ids []string
	for subject := range info.State.Subjects {
		if id, _, ok := q.Opts.WorkJob(subject); ok { // a job's work has one subject
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// StrayWork returns the subjects of the work stream that hold messages,
// with their counts, other than those of the jobs active says are active:
// work of jobs that ended (cancelled, failed) left in their lanes, and
// messages on subjects of no job at all (published by hand or by a bug),
// which a worker must take all the same, to drop or dead-letter them.
func (q *Queue) StrayWork(ctx context.Context, active func(id string) bool) (map[string]uint64, error) {
	work, err := q.JS.Stream(ctx, q.Opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	info, err := work.Info(ctx, jetstream.WithSubjectFilter(q.Opts.WorkFilter()))
	if err != nil {
		return nil, fmt.Errorf("queue: the subjects of %s: %w", q.Opts.Stream, err)
	}
	out := map[string]uint64{}
	for subject, n := range info.State.Subjects {
		if id, _, ok := q.Opts.WorkJob(subject); ok && active(id) {
			continue
		}
		out[subject] = n
	}
	return out, nil
}

// StrayConsumerConfig is the configuration of a consumer of the stray
// work on subject, which is no lane's: short-lived, deleted by the server
// once idle.
func (o Options) StrayConsumerConfig(subject string) jetstream.ConsumerConfig {
	o.defaults()
	sum := sha256.Sum256([]byte(subject))
	cc := o.LaneConsumerConfig(Lane{})
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

// WorkLeft returns the number of job id's messages in lane l of the work
// stream: not yet delivered, or delivered and not yet acked.
func (q *Queue) WorkLeft(ctx context.Context, id string, l Lane) (uint64, error) {
	n, err := q.messagesOn(ctx, q.Opts.WorkSubject(id, l))
	if err != nil {
		return 0, fmt.Errorf("queue: job %s: %w", id, err)
	}
	return n, nil
}

// TallyResults calls fn with the batch index and the counts (the
// HdrCounts header) of every results message of job id from the results
// stream's sequence from on (0: its start), reading the headers alone.
// It is the slow, sure count of a job's results, for repairing its record.
func (q *Queue) TallyResults(ctx context.Context, id string, from uint64, fn func(index uint64, c job.Counts)) error {
	prefix := q.Opts.ResultsFilter(id)
	prefix = prefix[:len(prefix)-1] // "P.results.<job>."
	err := q.ResultStore().Read(ctx, q.Opts.ResultsFilter(id), from, true, func(m StoredResults) error {
		index, err := strconv.ParseUint(strings.TrimPrefix(m.Subject, prefix), 10, 64)
		cs, cerr := job.ParseCounts(m.Header.Get(HdrCounts))
		if err == nil && cerr == nil {
			fn(index, cs)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: job %s: read results: %w", id, err)
	}
	return nil
}

// JobIdle reports whether job id, in lane l, has nothing left to deliver
// or to ack, by either of two accounts: the work stream holds no message
// of it (a work-queue stream removes a message when it is acked), or its
// lane's consumer has nothing pending and nothing awaiting an ack. Either
// may lag in a cluster that lost a leader: a consumer's new leader may
// report counts of an older state, and a message the consumer counts as
// acked may stay in the stream (a server killed between the two writes
// keeps it).
func (q *Queue) JobIdle(ctx context.Context, id string, l Lane) (bool, error) {
	n, err := q.WorkLeft(ctx, id, l)
	if err == nil && n == 0 {
		return true, nil
	}
	c, cerr := q.JS.Consumer(ctx, q.Opts.Stream, q.Opts.LaneConsumer(l))
	if cerr != nil {
		if errors.Is(cerr, jetstream.ErrConsumerNotFound) && err == nil {
			return false, nil // messages left, no consumer yet to deliver them
		}
		return false, fmt.Errorf("queue: job %s: %w", id, errors.Join(err, cerr))
	}
	ci := c.CachedInfo()
	return ci.NumPending == 0 && ci.NumAckPending == 0, nil
}

// dropSharedConsumer deletes the consumer workers shared before work was
// divided into lanes, if it exists: its filter overlaps every lane's,
// which a work-queue stream refuses. Its messages stay in the stream, on
// subjects of no lane: the workers' sweep takes them as stray work.
func (o Options) dropSharedConsumer(ctx context.Context, js jetstream.JetStream) error {
	name := o.Consumer + legacyConsumerSuffix
	err := js.DeleteConsumer(ctx, o.Stream, name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("queue: delete the shared consumer %s on %s: %w", name, o.Stream, err)
	}
	return nil
}

// JobLane returns the lane of job id, read from its record.
func (q *Queue) JobLane(ctx context.Context, id string) (Lane, error) {
	r, _, err := q.Store().Get(ctx, id)
	if err != nil {
		return Lane{}, fmt.Errorf("queue: job %s: %w", id, err)
	}
	return LaneOf(&r), nil
}

// JobConsumer returns the name of the consumer of job id's lane: the
// consumer that delivers its work (shared with the lane's other jobs).
func (q *Queue) JobConsumer(ctx context.Context, id string) (string, error) {
	l, err := q.JobLane(ctx, id)
	if err != nil {
		return "", err
	}
	return q.Opts.LaneConsumer(l), nil
}
