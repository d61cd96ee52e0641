package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Workers counts the workers of this queue online: the instances of the
// micro service ServiceName that answer a PING within wait and whose
// metadata (ServiceMetadata) names o's work stream and subject prefix.
// The service's name is the same for every queue on a NATS server, so
// the metadata tells this queue's workers from the others'. It stops
// counting at enough answers when enough > 0, so that "is any worker
// there?" (enough 1) takes a round trip, not wait. It returns an error
// only when the question could not be asked.
func Workers(ctx context.Context, nc *nats.Conn, o Options, wait time.Duration, enough int) (int, error) {
	o.defaults()
	subject, err := micro.ControlSubject(micro.PingVerb, ServiceName, "")
	if err != nil {
		return 0, fmt.Errorf("queue: workers: %w", err)
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, fmt.Errorf("queue: workers: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return 0, fmt.Errorf("queue: workers: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	n := 0
	for enough <= 0 || n < enough {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // wait is over
		}
		var ping micro.Ping
		if json.Unmarshal(m.Data, &ping) != nil {
			continue
		}
		if ping.Metadata["work_stream"] == o.Stream && ping.Metadata["subject_prefix"] == o.Prefix {
			n++
		}
	}
	return n, nil
}
