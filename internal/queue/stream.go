// Package queue holds where sudoku-queue keeps things in NATS JetStream:
// the work stream and its jobs' consumers, the results stream, the jobs bucket
// (job records and manifests), the dead-letter stream, every subject and
// header name, and the dead letters' form. The bodies of the messages are
// internal/job's.
//
// The job logic reaches the jobs bucket and the results stream through
// the storage seam: Queue.Store (a job.Store on a job.Bucket) and
// Queue.ResultStore (a ResultStore). On a queue that Setup returns they
// are JetStream's; on one InMemory returns, a job.MemBucket and a
// MemResults, for tests without servers (docs/jobs.md, "Storage: the
// seam").
//
// # Subjects
//
// Under the prefix P (default "sudoku"):
//
//	P.jobs.<owner>.<priority>.<slot>.<serial>
//	                          work batches of job <owner>.<serial>, in its
//	                          lane (work stream, work-queue retention; see
//	                          Lane)
//	P.results.<job>.<batch>   a batch's results (results stream, one message
//	                          per subject, kept for Retention); <job> is
//	                          "<owner>.<serial>", two tokens
//	P.dlq.<reason>            dead letters (dead-letter stream)
//	P.solve                   one puzzle, request/reply (the workers' NATS
//	                          micro service "sudoku")
//	P.submit, P.status,       a bulk job, its status, its cancel:
//	P.cancel                  request/reply (the same service;
//	                          docs/protocol.md)
//	P.events.<job>            a worker's note of each batch done (core NATS,
//	                          not stored: for dashboards)
//
// The jobs bucket (a JetStream key-value bucket) holds "<job>", the job's
// record, and "<job>.m.<chunk>", its manifests: under "<owner>." too.
// Every subject and key of a job starts its job part with the owner's
// name, so that NATS permissions per user (internal/roles) can give each
// owner its own jobs and nobody else's.
package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// Options describe the streams, the bucket and the consumer. Setup creates
// them when missing and reports how existing ones differ; only the
// operator's Update changes them.
type Options struct {
	// Stream is the work stream's name (default "SUDOKU"); the results
	// stream is Stream+"_RESULTS" and the jobs bucket Stream+"_JOBS".
	Stream string
	// Prefix starts every subject (default "sudoku").
	Prefix string
	// Replicas of each stream: 1 on one server, 3 in a cluster.
	Replicas int
	// Memory selects memory storage instead of files.
	Memory bool
	// MaxAge drops unprocessed work older than this (0: never).
	MaxAge time.Duration
	// Retention is how long a job's record and results are kept (0:
	// until removed with 'sudoku job rm').
	Retention time.Duration
	// MaxMsgBytes bounds a message's size (0: the server's limit).
	MaxMsgBytes int32
	// Consumer is the durable consumers' base name (default
	// "sudoku-workers"): a job's consumer is named by JobConsumer.
	Consumer string
	// AckWait is how long a delivered message may go without an ack or an
	// InProgress before it is delivered again (default 10s).
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one message (default 5); the worker
	// dead-letters a message on its last delivery if that fails too.
	MaxDeliver int
	// MaxAckPending bounds the messages delivered and not yet acked, over
	// every worker (default 1024).
	MaxAckPending int
	// DLQStream is the dead-letter stream's name (default "SUDOKU_DLQ").
	DLQStream string
	// MaxBytes bounds the work stream (0: no bound); full, it refuses
	// new work.
	MaxBytes int64
	// ResultsMaxBytes bounds the results stream (0: no bound); full, it
	// refuses new results rather than drop stored ones.
	ResultsMaxBytes int64
	// JobsMaxBytes bounds the jobs bucket (0: no bound); full, it refuses
	// new records rather than drop stored ones. Each value is at most
	// MaxRecordBytes, whatever it is.
	JobsMaxBytes int64
	// DLQMaxAge drops dead letters older than this (0: never).
	DLQMaxAge time.Duration
	// DLQMaxBytes bounds the dead-letter stream (0: no bound); full, its
	// oldest dead letters go.
	DLQMaxBytes int64
	// Duplicates is the window in which a Nats-Msg-Id seen before is dropped
	// (default 2 minutes).
	Duplicates time.Duration
	// Update makes Setup change the streams and the bucket that exist
	// already to match these Options: the operator's explicit
	// 'sudoku setup --apply', never a process's start (a shorter max age
	// or a smaller limit deletes what a stream holds). Without it, Setup
	// uses them as they are, creates only what is missing, and reports
	// each difference in Queue.Differences.
	Update bool
	// NoConsumer makes Setup leave the work stream's consumers alone: for
	// commands that only publish work or read jobs. Without it (workers),
	// Setup deletes the consumer every worker shared before work was
	// divided into a consumer per job (JobConsumer), which would overlap
	// theirs; its messages stay in the stream for the jobs' consumers.
	NoConsumer bool
}

func (o *Options) defaults() {
	if o.Stream == "" {
		o.Stream = "SUDOKU"
	}
	if o.Prefix == "" {
		o.Prefix = "sudoku"
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Consumer == "" {
		o.Consumer = "sudoku-workers"
	}
	if o.AckWait == 0 {
		o.AckWait = 10 * time.Second
	}
	if o.MaxDeliver == 0 {
		o.MaxDeliver = 5
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = 1024
	}
	if o.DLQStream == "" {
		o.DLQStream = "SUDOKU_DLQ"
	}
	if o.Duplicates == 0 {
		o.Duplicates = 2 * time.Minute
	}
}

// DefaultOptions returns what a zero Options stands for: the default
// names, replicas and consumer limits (internal/config takes its queue.*
// defaults from here).
func DefaultOptions() Options {
	var o Options
	o.defaults()
	return o
}

// ResultsStream is the results stream's name.
func (o Options) ResultsStream() string { o.defaults(); return o.Stream + "_RESULTS" }

// JobsBucket is the jobs bucket's name.
func (o Options) JobsBucket() string { o.defaults(); return o.Stream + "_JOBS" }

// WorkFilter matches every work subject.
func (o Options) WorkFilter() string { o.defaults(); return o.Prefix + ".jobs.>" }

// ResultSubject is the subject of the results of batch index of a job.
func (o Options) ResultSubject(jobID string, index uint64) string {
	o.defaults()
	return o.Prefix + ".results." + jobID + "." + strconv.FormatUint(index, 10)
}

// ResultsFilter matches the subjects of every result of a job.
func (o Options) ResultsFilter(jobID string) string {
	o.defaults()
	return o.Prefix + ".results." + jobID + ".>"
}

// DLQSubject is the subject of dead letters with a reason (one of the
// Reason constants).
func (o Options) DLQSubject(reason string) string { o.defaults(); return o.Prefix + ".dlq." + reason }

// EventSubject is the subject of the events of a job ("solve" for the
// solve endpoint's): core NATS, not stored.
func (o Options) EventSubject(jobID string) string {
	o.defaults()
	return o.Prefix + ".events." + jobID
}

// EventsFilter matches every event's subject.
func (o Options) EventsFilter() string { o.defaults(); return o.Prefix + ".events.>" }

// Event is what a worker publishes on EventSubject after each batch it
// acks, and after each puzzle of the solve endpoint (Job "", Batch 0): a
// hint for dashboards, never needed for correctness (it is not stored).
type Event struct {
	Job   string `json:"job"`
	Batch uint64 `json:"batch"`
	// N is the number of puzzles the batch held.
	N int `json:"n"`
}

// SolveSubject is the subject of the micro service's solve endpoint.
func (o Options) SolveSubject() string { o.defaults(); return o.Prefix + ".solve" }

// SubmitSubject is the subject of the micro service's submit endpoint for
// caller ("*" for every caller's): a bulk job over NATS alone, owned by
// caller (see internal/service). The caller's name is the subject's last
// token, so that NATS permissions (internal/roles) let a user ask only
// as itself.
func (o Options) SubmitSubject(caller string) string {
	o.defaults()
	return o.Prefix + ".submit." + caller
}

// CancelSubject is the subject of the micro service's cancel endpoint for
// caller ("*" for every caller's).
func (o Options) CancelSubject(caller string) string {
	o.defaults()
	return o.Prefix + ".cancel." + caller
}

// StatusSubject is the subject of the micro service's status endpoint (a
// job's state and counts) for caller ("*" for every caller's).
func (o Options) StatusSubject(caller string) string {
	o.defaults()
	return o.Prefix + ".status." + caller
}

// Caller returns the caller of a request on an endpoint's subject: its
// last token.
func Caller(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// legacyConsumerSuffix ends the name of the consumer every worker shared
// before work was divided into lanes.
const legacyConsumerSuffix = "-bulk"

// ServiceName is the name of the workers' NATS micro service.
const ServiceName = "sudoku"

// Headers, each owned here.
const (
	// HdrCounts on a results message: its items by status, as
	// job.Counts.String writes them.
	HdrCounts = "Sudoku-Counts"
)

// Queue is the set-up JetStream side of the service.
type Queue struct {
	JS   jetstream.JetStream
	Opts Options
	// Results is the results stream.
	Results jetstream.Stream
	// Jobs is the jobs bucket.
	Jobs jetstream.KeyValue
	// Records, when set, is the jobs bucket behind the job.Bucket seam
	// that Store uses instead of Jobs: a job.MemBucket in tests (see
	// InMemory).
	Records job.Bucket
	// Answers, when set, is the results stream behind the ResultStore
	// seam that ResultStore returns instead of Results: a MemResults in
	// tests.
	Answers ResultStore
	// Differences are the settings in which the streams and the bucket
	// that existed differ from Opts: left as they are, unless
	// Opts.Update (then they are what Setup changed).
	Differences []Difference

	// Refusals, if set, cuts short a request the server's permissions
	// refuse (roles.Refusals.Watch): NATS refuses without answering, so
	// the request would otherwise wait for its timeout.
	Refusals RefusalWatcher

	// resultsImmutable is set once a delete on the results stream was
	// refused (roles on: only the admin may): PublishResults then asks no
	// more.
	resultsImmutable atomic.Bool

	seqMu  sync.Mutex
	seq    uint64    // the results stream's last sequence + 1, as last asked
	seqAt  time.Time // when
	seqErr error
}

// RefusalWatcher is what a Queue needs of roles.Refusals: a context
// cancelled, with the refusal as its cause, as soon as the server refuses
// a publish to subject on the connection.
type RefusalWatcher interface {
	Watch(ctx context.Context, subject string) (context.Context, context.CancelFunc)
}

// ErrResultsImmutable is matched (errors.Is) by PublishResults' error
// when the results subject holds a message that does not answer the
// batch and this user may not delete it (roles on: results are
// immutable for every role but admin's).
var ErrResultsImmutable = errors.New("the results stored do not answer the batch, and this user may not delete them")

// resultsSeqFor is how long ResultsFrom reuses the results stream's
// sequence it asked for: a reader that starts a little early only skips
// more of other jobs' results.
const resultsSeqFor = 500 * time.Millisecond

// ResultsFrom returns a sequence of the results stream at or before any
// result stored from now on: its last sequence plus one, as it was at
// most resultsSeqFor ago (one request per resultsSeqFor, however many
// jobs are submitted), for readers to start at (job.Record.ResultsFrom).
func (q *Queue) ResultsFrom(ctx context.Context) (uint64, error) {
	q.seqMu.Lock()
	defer q.seqMu.Unlock()
	if !q.seqAt.IsZero() && time.Since(q.seqAt) < resultsSeqFor {
		return q.seq, q.seqErr
	}
	info, err := q.Results.Info(ctx)
	q.seqAt, q.seqErr = time.Now(), err
	if err == nil {
		q.seq = info.State.LastSeq + 1
	}
	return q.seq, err
}

// Setup creates the work stream, the results stream, the jobs bucket and
// the dead-letter stream when they are missing (the jobs' consumers are
// their producers' and workers': JobWork). What exists is used as it is:
// where its settings differ from o, Queue.Differences names each
// difference, and only Options.Update (the operator's 'sudoku setup
// --apply') changes them, for a setting that shrinks a stream can delete
// what it holds. It is idempotent: every worker and producer calls it at
// start-up.
func Setup(ctx context.Context, js jetstream.JetStream, o Options) (*Queue, error) {
	o.defaults()
	q := &Queue{JS: js, Opts: o}
	want := o.wanted()
	// Four chains of requests at once, each a round trip or two: a
	// command's start waits for the slowest, not for their sum.
	g, ctx := errgroup.WithContext(ctx)
	diffs := make([][]Difference, len(want))
	for i, w := range want {
		g.Go(func() error {
			var err error
			switch {
			case w.bucket != nil:
				q.Jobs, diffs[i], err = o.bucket(ctx, js, *w.bucket)
				if err != nil {
					return fmt.Errorf("queue: create bucket %s: %w", w.bucket.Bucket, err)
				}
				return nil
			case w.stream.Name == o.Stream:
				if _, diffs[i], err = o.stream(ctx, js, w.stream); err != nil || o.NoConsumer {
					return err
				}
				return o.dropSharedConsumer(ctx, js)
			case w.stream.Name == o.ResultsStream():
				q.Results, diffs[i], err = o.stream(ctx, js, w.stream)
				return err
			default:
				_, diffs[i], err = o.stream(ctx, js, w.stream)
				return err
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	q.Differences = slices.Concat(diffs...)
	return q, nil
}

// wanted is one stream or bucket as Options want it.
type wanted struct {
	stream jetstream.StreamConfig
	bucket *jetstream.KeyValueConfig // a bucket instead of a stream
}

// wanted returns the streams and the bucket as o wants them: the work
// stream, the results stream, the dead-letter stream and the jobs bucket.
func (o Options) wanted() []wanted {
	storage := jetstream.FileStorage
	if o.Memory {
		storage = jetstream.MemoryStorage
	}
	return []wanted{
		{stream: jetstream.StreamConfig{
			Name:        o.Stream,
			Description: "sudoku-queue: batches of puzzles to solve",
			Subjects:    []string{o.Prefix + ".jobs.>"},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     storage,
			Replicas:    o.Replicas,
			MaxAge:      o.MaxAge,
			MaxBytes:    limitBytes(o.MaxBytes),
			MaxMsgSize:  o.MaxMsgBytes,
			Duplicates:  o.duplicates(o.MaxAge),
			Discard:     jetstream.DiscardNew, // a full queue refuses work rather than lose it
		}},
		{stream: jetstream.StreamConfig{
			Name:        o.ResultsStream(),
			Description: "sudoku-queue: the results of each job, one message per batch",
			Subjects:    []string{o.Prefix + ".results.>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     storage,
			Replicas:    o.Replicas,
			MaxAge:      o.Retention,
			MaxBytes:    limitBytes(o.ResultsMaxBytes),
			// One message per batch, never replaced: the workers publish
			// with an expected last sequence of 0 for the subject, so the
			// first result stays, and the stream refuses any other
			// publish on a subject that holds one (a plain publish would
			// replace it). Only a delete frees a subject (a worker's, of
			// a message that does not answer its batch).
			MaxMsgsPerSubject:    1,
			Discard:              jetstream.DiscardNew,
			DiscardNewPerSubject: true,
			AllowDirect:          true,
			Duplicates:           o.duplicates(o.Retention),
		}},
		{stream: jetstream.StreamConfig{
			Name:        o.DLQStream,
			Description: "sudoku-queue: messages that could not be processed",
			Subjects:    []string{o.Prefix + ".dlq.>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     storage,
			Replicas:    o.Replicas,
			MaxAge:      o.DLQMaxAge,
			MaxBytes:    limitBytes(o.DLQMaxBytes),
			Duplicates:  o.duplicates(o.DLQMaxAge),
			Discard:     jetstream.DiscardOld, // the newest dead letters matter most
		}},
		{bucket: &jetstream.KeyValueConfig{
			Bucket:       o.JobsBucket(),
			Description:  "sudoku-queue: job records and manifests",
			History:      1,
			TTL:          o.Retention,
			MaxBytes:     limitBytes(o.JobsMaxBytes),
			MaxValueSize: MaxRecordBytes,
			Storage:      storage,
			Replicas:     o.Replicas,
		}},
	}
}

// MaxRecordBytes bounds a value of the jobs bucket: a record (whose
// bitmap of batches done takes a byte per 8 batches: 100 million puzzles
// in batches of 4,096 take 3 kB) or a manifest (16 digests).
const MaxRecordBytes = 1 << 20

// limitBytes is a stream's max_bytes for a bound of n bytes (0: none).
func limitBytes(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// Plan returns how the streams and the bucket that exist differ from o,
// without changing anything: what Setup with Options.Update would change
// ('sudoku setup'). A stream or bucket that does not exist is one
// Difference (setting "exists").
func Plan(ctx context.Context, js jetstream.JetStream, o Options) ([]Difference, error) {
	o.defaults()
	var diffs []Difference
	for _, w := range o.wanted() {
		cfg, what := w.stream, "stream "+w.stream.Name
		if w.bucket != nil {
			cfg, what = bucketStream(*w.bucket), "bucket "+w.bucket.Bucket
		}
		s, err := js.Stream(ctx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			diffs = append(diffs, Difference{What: what, Setting: "exists", Have: "no", Want: "yes"})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("queue: %s: %w", what, err)
		}
		diffs = append(diffs, diffStream(what, s.CachedInfo().Config, cfg)...)
	}
	return diffs, nil
}

// Difference is one setting in which a stream or the bucket that exists
// differs from what the Options want.
type Difference struct {
	What    string // "stream SUDOKU_RESULTS", "bucket SUDOKU_JOBS"
	Setting string // as 'nats stream info' names it: "max_age", "replicas"
	Have    string // as it is
	Want    string // as the Options want it
}

// String says it as "stream SUDOKU_RESULTS: max_age 1h0m0s, configured 2s".
func (d Difference) String() string {
	return fmt.Sprintf("%s: %s is %s, configured %s", d.What, d.Setting, d.Have, d.Want)
}

// DifferencesError is the error of a process that refuses to start on a
// queue whose streams or bucket differ from its configuration.
type DifferencesError struct{ Differences []Difference }

func (e *DifferencesError) Error() string {
	parts := make([]string, len(e.Differences))
	for i, d := range e.Differences {
		parts[i] = d.String()
	}
	return "the streams differ from this process's settings (" + strings.Join(parts, "; ") +
		"): nothing was changed; make the settings agree, or run 'sudoku setup' to see the differences " +
		"and 'sudoku setup --apply' to change the streams"
}

// bucketStream is the stream behind a key-value bucket of configuration
// cfg, with the settings Setup compares.
func bucketStream(cfg jetstream.KeyValueConfig) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              "KV_" + cfg.Bucket,
		Description:       cfg.Description,
		MaxMsgsPerSubject: int64(max(1, cfg.History)),
		MaxAge:            cfg.TTL,
		MaxBytes:          cfg.MaxBytes,
		MaxMsgSize:        cfg.MaxValueSize,
		Storage:           cfg.Storage,
		Replicas:          cfg.Replicas,
		Discard:           jetstream.DiscardNew, // as jetstream.CreateKeyValue makes it
		AllowDirect:       true,
	}
}

// bucket returns the key-value bucket cfg names: created when missing (or
// found created meanwhile by another client), else as it is, with how it
// differs from cfg; o.Update brings it to cfg.
func (o Options) bucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, []Difference, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// A create that finds the bucket is never turned into an update
		// (see stream).
		if kv, err = js.CreateKeyValue(ctx, cfg); err == nil {
			return kv, nil, nil // created here
		}
		if createdMeanwhile(err) {
			// By another client meanwhile (see stream).
			if other, kerr := js.KeyValue(ctx, cfg.Bucket); kerr == nil {
				kv, err = other, nil
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, nil, err
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if info == nil {
		return kv, nil, nil
	}
	diffs := diffStream("bucket "+cfg.Bucket, info.Config, bucketStream(cfg))
	if len(diffs) == 0 || !o.Update {
		return kv, diffs, nil
	}
	kv, err = js.UpdateKeyValue(ctx, cfg)
	return kv, diffs, err
}

// diffStream returns how the stream configuration have, as the server
// returns it (its defaults filled in), differs from want, in the settings
// Setup sets. The differences are named for what (a stream or bucket).
func diffStream(what string, have, want jetstream.StreamConfig) []Difference {
	var diffs []Difference
	add := func(setting string, h, w any) {
		diffs = append(diffs, Difference{What: what, Setting: setting, Have: fmt.Sprint(h), Want: fmt.Sprint(w)})
	}
	limit := func(v int64) int64 { return max(v, 0) } // 0 and -1: no limit
	if have.Description != want.Description {
		add("description", strconv.Quote(have.Description), strconv.Quote(want.Description))
	}
	if len(want.Subjects) > 0 && !slices.Equal(have.Subjects, want.Subjects) {
		add("subjects", have.Subjects, want.Subjects)
	}
	if have.Retention != want.Retention {
		add("retention", have.Retention, want.Retention)
	}
	if have.Storage != want.Storage {
		add("storage", have.Storage, want.Storage)
	}
	if have.Replicas != max(1, want.Replicas) {
		add("replicas", have.Replicas, max(1, want.Replicas))
	}
	if have.MaxAge != want.MaxAge {
		add("max_age", have.MaxAge, want.MaxAge)
	}
	if limit(have.MaxBytes) != limit(want.MaxBytes) {
		add("max_bytes", limit(have.MaxBytes), limit(want.MaxBytes))
	}
	if limit(int64(have.MaxMsgSize)) != limit(int64(want.MaxMsgSize)) {
		add("max_msg_size", limit(int64(have.MaxMsgSize)), limit(int64(want.MaxMsgSize)))
	}
	if limit(have.MaxMsgsPerSubject) != limit(want.MaxMsgsPerSubject) {
		add("max_msgs_per_subject", limit(have.MaxMsgsPerSubject), limit(want.MaxMsgsPerSubject))
	}
	if want.Duplicates != 0 && have.Duplicates != want.Duplicates {
		add("duplicate_window", have.Duplicates, want.Duplicates)
	}
	if have.Discard != want.Discard {
		add("discard", have.Discard, want.Discard)
	}
	if have.DiscardNewPerSubject != want.DiscardNewPerSubject {
		add("discard_new_per_subject", have.DiscardNewPerSubject, want.DiscardNewPerSubject)
	}
	if have.AllowDirect != want.AllowDirect {
		add("allow_direct", have.AllowDirect, want.AllowDirect)
	}
	return diffs
}

// duplicates is the duplicate window of a stream whose messages live
// maxAge (0: for ever): JetStream wants it no longer than that.
func (o Options) duplicates(maxAge time.Duration) time.Duration {
	if maxAge > 0 {
		return min(o.Duplicates, maxAge)
	}
	return o.Duplicates
}

// stream returns the stream cfg names: created when missing (or found
// created meanwhile by another client), else as it is, with how it
// differs from cfg; o.Update brings it to cfg.
func (o Options) stream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, []Difference, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// A create that finds the stream is never turned into an update,
		// as CreateOrUpdateStream does: nats-server 2.9.10 crashed
		// (stream.update) on such an update when a worker and a producer
		// started at once. One created meanwhile is compared below.
		if s, err = js.CreateStream(ctx, cfg); createdMeanwhile(err) {
			// By another client meanwhile; an overlap with a stream of
			// another name stays the error.
			if other, serr := js.Stream(ctx, cfg.Name); serr == nil {
				s, err = other, nil
			}
		}
	}
	var diffs []Difference
	if err == nil {
		diffs = diffStream("stream "+cfg.Name, s.CachedInfo().Config, cfg)
	}
	// Only a stream that differs is updated, and only when the operator
	// asks: an update costs a round of the cluster's meta group, 2.9.10
	// was seen to crash in one (its store's UpdateConfig) when every
	// worker start sent one, and a shorter max age or a smaller limit
	// deletes messages at once.
	if err == nil && o.Update && len(diffs) > 0 {
		s, err = js.UpdateStream(ctx, cfg)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("queue: create stream %s: %w", cfg.Name, err)
	}
	return s, diffs, nil
}

// errSubjectsOverlap is JetStream's error code for a stream whose subjects
// overlap another's, which a create also gets when another client creates
// the same stream at that moment.
const errSubjectsOverlap jetstream.ErrorCode = 10065

// createdMeanwhile reports whether err, from creating a stream or a
// bucket (a stream too), may say that another client created it at the
// same time: its name is in use, or its subjects overlap (seen in CI when
// a worker and a producer set up at once).
func createdMeanwhile(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || errors.Is(err, jetstream.ErrBucketExists) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == errSubjectsOverlap
}

// Delete removes the streams and the bucket (and so the consumers); tests
// use it to clean up. What does not exist is not an error.
func (q *Queue) Delete(ctx context.Context) error {
	var errs []error
	for _, s := range []string{q.Opts.Stream, q.Opts.ResultsStream(), q.Opts.DLQStream} {
		if err := q.JS.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, err)
		}
	}
	if err := q.JS.DeleteKeyValue(ctx, q.Opts.JobsBucket()); err != nil &&
		!errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// WorkMsg builds the message of a work batch of a job in lane l: on the
// job's work subject, with the batch's id as Nats-Msg-Id, so that
// JetStream drops a batch published twice within the duplicate window.
func (o Options) WorkMsg(b *job.Batch, l Lane) *nats.Msg {
	m := nats.NewMsg(o.WorkSubject(b.Job, l))
	m.Data = b.AppendWork(make([]byte, 0, 64+(job.PackedLen+2)*len(b.Items)))
	m.Header.Set(nats.MsgIdHdr, b.ID())
	return m
}

// ResultsMsg builds the message of a results batch (b.Digest set, every
// item answered): on its own subject, in the binary form or, for a batch
// with job.FlagJSONResults, the JSON form, with its counts in HdrCounts.
// Publish it with ExpectResults.
func (o Options) ResultsMsg(b *job.Batch) *nats.Msg { return o.ResultsMsgIn(b, nil) }

// ResultsMsgIn is ResultsMsg with the body in buf's memory when it has
// room (a worker reuses it batch after batch, once each is published).
func (o Options) ResultsMsgIn(b *job.Batch, buf []byte) *nats.Msg {
	m := nats.NewMsg(o.ResultSubject(b.Job, b.Index))
	if b.Flags&job.FlagJSONResults != 0 {
		m.Data = b.AppendJSONResults(buf[:0])
	} else {
		m.Data = b.AppendResults(slices.Grow(buf[:0], 64+60*len(b.Items)))
	}
	m.Header.Set(HdrCounts, job.CountItems(b.Items).String())
	return m
}

// ExpectResults is the publish option of a results message: its subject
// must hold no message yet, so the first results of a batch stay.
func ExpectResults() jetstream.PublishOpt { return jetstream.WithExpectLastSequencePerSubject(0) }

// IsWrongLastSequence reports whether err is JetStream's refusal of a
// publish whose expected last subject sequence did not match (10071, or
// 10164 from a replicated stream): for a results message, the batch's
// results are there already.
func IsWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// PublishResults publishes m, the results message of a batch, so that its
// subject ends holding results that answer the batch as ours do. The
// first published stays (ExpectResults, and the stream refuses any other
// publish on a subject that holds one); when a message is there already,
// same decides: one that answers alike (ours, from an earlier delivery,
// or another worker's) stays, and one that does not (published by hand,
// forged, or broken) is deleted and m takes its place, so that no such
// message holds a batch's subject. Each publish waits at most attempt
// for its ack (an ack lost with a server restart is not awaited for the
// whole of ctx); replaced reports a message deleted.
func (q *Queue) PublishResults(ctx context.Context, m *nats.Msg, attempt time.Duration, same func(stored []byte) bool) (replaced bool, err error) {
	rs := q.ResultStore()
	for deletes := 0; ; {
		pctx, cancel := context.WithTimeout(ctx, attempt)
		_, err := rs.Publish(pctx, m)
		cancel()
		if err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
			continue
		}
		if err == nil || !errors.Is(err, ErrResultsExist) {
			return replaced, err
		}
		rm, gerr := rs.Last(ctx, m.Subject)
		if errors.Is(gerr, ErrNoResults) {
			continue // deleted meanwhile
		}
		if gerr != nil {
			return replaced, fmt.Errorf("results on %s exist but cannot be read: %w", m.Subject, gerr)
		}
		if same(rm.Data) {
			return replaced, nil
		}
		if deletes++; deletes > maxResultsDeletes {
			return replaced, fmt.Errorf("results on %s keep being replaced by others that do not answer the batch", m.Subject)
		}
		if err := q.deleteResults(ctx, rs, rm.Sequence); err != nil {
			return replaced, fmt.Errorf("delete the results on %s: %w", m.Subject, err)
		}
		replaced = true
	}
}

// deleteResults deletes message seq of the results stream, unless a
// delete was refused before (ErrResultsImmutable); a refusal fails it at
// once (with Refusals set), and is remembered.
func (q *Queue) deleteResults(ctx context.Context, rs ResultStore, seq uint64) error {
	if q.resultsImmutable.Load() {
		return ErrResultsImmutable
	}
	dctx, stop := ctx, context.CancelFunc(func() {})
	if q.Refusals != nil {
		dctx, stop = q.Refusals.Watch(ctx, "$JS.API.STREAM.MSG.DELETE."+q.Opts.ResultsStream())
	}
	err := rs.Delete(dctx, seq)
	refused := context.Cause(dctx)
	stop()
	switch {
	case err == nil || errors.Is(err, ErrNoResults):
		return nil
	case ctx.Err() == nil && refused != nil && !errors.Is(refused, context.Canceled):
		q.resultsImmutable.Store(true)
		return fmt.Errorf("%w: %w", ErrResultsImmutable, refused)
	}
	return err
}

// maxResultsDeletes bounds the messages PublishResults deletes from one
// subject: more means someone keeps publishing there.
const maxResultsDeletes = 8

// SameResults returns PublishResults' same for ours, the results batch
// being published: a stored message answers alike when it decodes to
// results job.SameAnswers as ours, and every answer of it Verifies.
func SameResults(ctx context.Context, ours *job.Batch) func(stored []byte) bool {
	return func(stored []byte) bool {
		got, err := job.DecodeAnyResults(stored)
		if err != nil || !job.SameAnswers(&got, ours) {
			return false
		}
		first := ours.Flags&job.FlagFirstSolution != 0
		for i := range got.Items {
			if got.Items[i].Kind == job.Known && got.Items[i].Outcome.Verify(ctx, first, job.Proven) != nil {
				return false
			}
		}
		return true
	}
}
