package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Options describe the streams and consumers. Setup creates or updates
// them to match, so every process started with the same Options agrees.
type Options struct {
	// Stream is the work stream's name (default "SUDOKU").
	Stream string
	// Prefix starts every subject (default "sudoku").
	Prefix string
	// Replicas of each stream: 1 on one server, 3 in a cluster.
	Replicas int
	// Memory selects memory storage instead of files.
	Memory bool
	// MaxAge drops unprocessed messages older than this (0: never).
	MaxAge time.Duration
	// MaxMsgBytes bounds a message's size (0: the server's limit).
	MaxMsgBytes int32
	// Consumer is the durable consumers' base name (default
	// "sudoku-workers"); the bulk consumer adds "-bulk", the interactive one
	// "-interactive".
	Consumer string
	// AckWait is how long a delivered message may go without an ack or an
	// InProgress before it is delivered again (default 30s).
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one message (default 5); the worker
	// dead-letters a message on its last delivery if that fails too.
	MaxDeliver int
	// MaxAckPending bounds the messages delivered and not yet acked, over
	// every worker (default 1024).
	MaxAckPending int
	// DLQStream is the dead-letter stream's name (default "SUDOKU_DLQ").
	DLQStream string
	// Duplicates is the window in which a Nats-Msg-Id seen before is dropped
	// (default 2 minutes).
	Duplicates time.Duration
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
		o.AckWait = 30 * time.Second
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

// Subjects under the prefix P (default "sudoku"):
//
//	P.jobs.bulk         batches of bulk jobs (work stream)
//	P.jobs.interactive  single puzzles someone waits for (work stream)
//	P.events.<job id>   completion events, core NATS (not stored)
//	P.dlq.<reason>      dead letters (dead-letter stream)

// BulkSubject is the subject of bulk batches.
func (o Options) BulkSubject() string { o.defaults(); return o.Prefix + ".jobs.bulk" }

// InteractiveSubject is the subject of interactive requests.
func (o Options) InteractiveSubject() string { o.defaults(); return o.Prefix + ".jobs.interactive" }

// EventSubject is the subject of a job's completion events.
func (o Options) EventSubject(jobID string) string {
	o.defaults()
	return o.Prefix + ".events." + jobID
}

// DLQSubject is the subject of dead letters with a reason (a token such as
// "undecodable" or "max_deliver").
func (o Options) DLQSubject(reason string) string { o.defaults(); return o.Prefix + ".dlq." + reason }

// Queue is a set-up work stream with its consumers.
type Queue struct {
	JS          jetstream.JetStream
	Opts        Options
	Bulk        jetstream.Consumer
	Interactive jetstream.Consumer
}

// Setup creates or updates the work stream, the dead-letter stream and the
// two durable pull consumers. It is idempotent: every worker and producer
// calls it at start-up.
func Setup(ctx context.Context, js jetstream.JetStream, o Options) (*Queue, error) {
	o.defaults()
	storage := jetstream.FileStorage
	if o.Memory {
		storage = jetstream.MemoryStorage
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        o.Stream,
		Description: "sudoku-queue: batches of puzzles to solve",
		Subjects:    []string{o.Prefix + ".jobs.>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     storage,
		Replicas:    o.Replicas,
		MaxAge:      o.MaxAge,
		MaxMsgSize:  o.MaxMsgBytes,
		Duplicates:  o.Duplicates,
		Discard:     jetstream.DiscardNew, // a full queue refuses work rather than lose it
	}); err != nil {
		return nil, fmt.Errorf("queue: create stream %s: %w", o.Stream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        o.DLQStream,
		Description: "sudoku-queue: messages that could not be processed",
		Subjects:    []string{o.Prefix + ".dlq.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     storage,
		Replicas:    o.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("queue: create stream %s: %w", o.DLQStream, err)
	}
	q := &Queue{JS: js, Opts: o}
	var err error
	if q.Bulk, err = q.consumer(ctx, "-bulk", o.BulkSubject()); err != nil {
		return nil, err
	}
	if q.Interactive, err = q.consumer(ctx, "-interactive", o.InteractiveSubject()); err != nil {
		return nil, err
	}
	return q, nil
}

func (q *Queue) consumer(ctx context.Context, suffix, subject string) (jetstream.Consumer, error) {
	o := q.Opts
	name := o.Consumer + suffix
	c, err := q.JS.CreateOrUpdateConsumer(ctx, o.Stream, jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "sudoku-queue workers, shared by every worker process",
		FilterSubject: subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    o.MaxDeliver,
		MaxAckPending: o.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("queue: create consumer %s on %s: %w", name, o.Stream, err)
	}
	return c, nil
}

// Delete removes the streams (and so their consumers); tests use it to
// clean up. Streams that do not exist are not an error.
func (q *Queue) Delete(ctx context.Context) error {
	var errs []error
	for _, s := range []string{q.Opts.Stream, q.Opts.DLQStream} {
		if err := q.JS.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
