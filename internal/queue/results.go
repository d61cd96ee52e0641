package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ResultStore is what the job logic needs of the results stream: the
// results side of the storage seam (job.Bucket is the records'). Each
// batch's results are one message on a subject of their own
// (Options.ResultSubject), stored once. JSResults is the JetStream
// stream of a deployment; MemResults keeps it in memory, for tests
// without servers. Both honour one contract (results_test.go runs it on
// each):
//
//   - sequences grow with every message stored, whatever its subject;
//   - Publish stores a message only on a subject that holds none
//     (JetStream's expected last sequence per subject 0), else fails
//     with ErrResultsExist;
//   - Last of a subject without a message fails with ErrNoResults;
//   - Read passes the messages a filter matches in the order of their
//     sequences, from one on, those stored when it started.
type ResultStore interface {
	// Publish stores m if its subject holds no message, and returns its
	// sequence.
	Publish(ctx context.Context, m *nats.Msg) (uint64, error)
	// Last returns the last message on subject.
	Last(ctx context.Context, subject string) (StoredResults, error)
	// Delete removes the message at sequence seq (ErrNoResults: none).
	Delete(ctx context.Context, seq uint64) error
	// Read calls fn with each message filter matches, at sequence from
	// or later (0: from the first), in order, until the messages stored
	// when it started are read or fn returns an error (which Read
	// returns). With headersOnly, Data may be left out.
	Read(ctx context.Context, filter string, from uint64, headersOnly bool, fn func(StoredResults) error) error
	// Purge removes every message filter matches.
	Purge(ctx context.Context, filter string) error
}

// StoredResults is a message of the results stream.
type StoredResults struct {
	Subject  string
	Data     []byte
	Header   nats.Header
	Sequence uint64
}

// ErrResultsExist is matched by the error of ResultStore.Publish on a
// subject that holds results already.
var ErrResultsExist = errors.New("results exist")

// ErrNoResults is matched by the errors of ResultStore.Last and Delete
// when there is no such message.
var ErrNoResults = errors.New("no such results")

// ResultStore returns the store of q's results: Answers when it is set,
// else the JetStream stream Results.
func (q *Queue) ResultStore() ResultStore {
	if q.Answers != nil {
		return q.Answers
	}
	return &JSResults{JS: q.JS, Stream: q.Results}
}

// JSResults is a ResultStore on a JetStream stream. Its errors match
// both this package's (ErrResultsExist, ErrNoResults) and jetstream's.
type JSResults struct {
	JS     jetstream.JetStream
	Stream jetstream.Stream
}

// Publish is ResultStore.Publish (ExpectResults).
func (r *JSResults) Publish(ctx context.Context, m *nats.Msg) (uint64, error) {
	ack, err := r.JS.PublishMsg(ctx, m, ExpectResults())
	if IsWrongLastSequence(err) {
		return 0, fmt.Errorf("%w: %w", ErrResultsExist, err)
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// Last is ResultStore.Last.
func (r *JSResults) Last(ctx context.Context, subject string) (StoredResults, error) {
	rm, err := r.Stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return StoredResults{}, fmt.Errorf("%w: %w", ErrNoResults, err)
	}
	if err != nil {
		return StoredResults{}, err
	}
	return StoredResults{Subject: rm.Subject, Data: rm.Data, Header: rm.Header, Sequence: rm.Sequence}, nil
}

// Delete is ResultStore.Delete. A message not there is refused as
// "deletion unsuccessful", the server's reason (its code differs from
// one version to the next) in the text only: the message is looked for,
// then.
func (r *JSResults) Delete(ctx context.Context, seq uint64) error {
	err := r.Stream.DeleteMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		if _, gerr := r.Stream.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("%w: %w", ErrNoResults, err)
		}
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: %w", ErrNoResults, err)
	}
	return err
}

// Read is ResultStore.Read: an ordered consumer, fetched from until the
// messages pending when it was created are read.
func (r *JSResults) Read(ctx context.Context, filter string, from uint64, headersOnly bool, fn func(StoredResults) error) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, HeadersOnly: headersOnly,
		InactiveThreshold: time.Minute}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	c, err := r.Stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	for left := info.NumPending; left > 0; {
		batch, err := c.Fetch(int(min(left, 1024)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var seq uint64
			md, merr := m.Metadata()
			if merr == nil {
				seq = md.Sequence.Stream
			}
			if err := fn(StoredResults{Subject: m.Subject(), Data: m.Data(), Header: m.Headers(), Sequence: seq}); err != nil {
				return err
			}
			if merr == nil && md.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if got == 0 {
			return nil
		}
		left -= uint64(got)
	}
	return nil
}

// Purge is ResultStore.Purge.
func (r *JSResults) Purge(ctx context.Context, filter string) error {
	return r.Stream.Purge(ctx, jetstream.WithPurgeSubject(filter))
}

// MemResults is a ResultStore in memory: the seam's stand-in for the
// results stream, with its contract (see ResultStore). The zero value is
// empty; it is safe for concurrent use.
type MemResults struct {
	mu   sync.Mutex
	seq  uint64
	msgs []StoredResults // in order of sequence
}

// Publish is ResultStore.Publish.
func (r *MemResults) Publish(ctx context.Context, m *nats.Msg) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.msgs {
		if s.Subject == m.Subject {
			return 0, fmt.Errorf("%w: on %s", ErrResultsExist, m.Subject)
		}
	}
	r.seq++
	r.msgs = append(r.msgs, StoredResults{Subject: m.Subject, Data: slices.Clone(m.Data),
		Header: cloneHeader(m.Header), Sequence: r.seq})
	return r.seq, nil
}

// Last is ResultStore.Last.
func (r *MemResults) Last(ctx context.Context, subject string) (StoredResults, error) {
	if err := ctx.Err(); err != nil {
		return StoredResults{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.msgs) - 1; i >= 0; i-- {
		if r.msgs[i].Subject == subject {
			return r.msgs[i].clone(), nil
		}
	}
	return StoredResults{}, fmt.Errorf("%w: on %s", ErrNoResults, subject)
}

// Delete is ResultStore.Delete.
func (r *MemResults) Delete(ctx context.Context, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.msgs, func(s StoredResults) bool { return s.Sequence == seq })
	if i < 0 {
		return fmt.Errorf("%w: sequence %d", ErrNoResults, seq)
	}
	r.msgs = slices.Delete(r.msgs, i, i+1)
	return nil
}

// Read is ResultStore.Read.
func (r *MemResults) Read(ctx context.Context, filter string, from uint64, headersOnly bool, fn func(StoredResults) error) error {
	r.mu.Lock()
	var msgs []StoredResults
	for _, s := range r.msgs {
		if s.Sequence >= from && matchSubject(filter, s.Subject) {
			s = s.clone()
			if headersOnly {
				s.Data = nil
			}
			msgs = append(msgs, s)
		}
	}
	r.mu.Unlock()
	for _, s := range msgs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// Purge is ResultStore.Purge.
func (r *MemResults) Purge(ctx context.Context, filter string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = slices.DeleteFunc(r.msgs, func(s StoredResults) bool { return matchSubject(filter, s.Subject) })
	return nil
}

func (s StoredResults) clone() StoredResults {
	s.Data, s.Header = slices.Clone(s.Data), cloneHeader(s.Header)
	return s
}

func cloneHeader(h nats.Header) nats.Header {
	if h == nil {
		return nil
	}
	out := maps.Clone(h)
	for k, v := range out {
		out[k] = slices.Clone(v)
	}
	return out
}

// matchSubject reports whether filter matches subject as NATS matches
// them: "*" is one token, a last ">" one or more.
func matchSubject(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, t := range f {
		if t == ">" && i == len(f)-1 {
			return len(s) > i
		}
		if i >= len(s) || t != "*" && t != s[i] {
			return false
		}
	}
	return len(f) == len(s)
}
