package producer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// replyBuffer bounds the replies to one request waiting to be read; more
// are dropped (a flood of forged replies must not hold the mux up).
const replyBuffer = 32

// inBuffer bounds the replies that arrived and are not read yet, for any
// request: past it the connection drops them (a slow consumer).
const inBuffer = 4096

// replyMux receives the replies to the solve requests of one connection
// on a single wildcard subscription (<inbox>.*), and hands each to the
// request whose token ends its subject. The subscription delivers into a
// channel that the waiting requests read themselves (no goroutine of the
// mux's in between): a request that reads another's reply passes it on. Unlike the request mux of
// nats.go, which forgets a token at its first reply, it delivers every
// reply until the request is done: a wrong reply is skipped and the next
// one read. One subscription for the connection's life instead of one
// per request: a SUB and UNSUB, and the 64k-message channel of a
// synchronous subscription (512 KiB to allocate and clear), per request
// were most of a request's cost.
type replyMux struct {
	prefix string // <inbox>.
	sub    *nats.Subscription
	in     chan *nats.Msg // every reply, as the connection reads it
	next   atomic.Uint64
	// closed is closed with the subscription (the connection closed).
	closed    chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	waiting map[string]chan *nats.Msg
}

var (
	muxesMu sync.Mutex
	muxes   = map[*nats.Conn]*replyMux{}
)

// muxOf returns nc's reply mux, subscribing it at the first request. The
// muxes of closed connections are dropped as a new one is made.
func muxOf(nc *nats.Conn) (*replyMux, error) {
	muxesMu.Lock()
	defer muxesMu.Unlock()
	if m := muxes[nc]; m != nil && m.sub.IsValid() {
		return m, nil
	}
	for c := range muxes {
		if c.IsClosed() {
			delete(muxes, c)
		}
	}
	m := &replyMux{prefix: nc.NewInbox() + ".", waiting: map[string]chan *nats.Msg{}, closed: make(chan struct{}),
		in: make(chan *nats.Msg, inBuffer)}
	sub, err := nc.ChanSubscribe(m.prefix+"*", m.in)
	if err != nil {
		return nil, fmt.Errorf("subscribe to the replies: %w", err)
	}
	m.sub = sub
	sub.SetClosedHandler(func(string) { m.close() })
	if !sub.IsValid() { // closed before the handler was set
		m.close()
	}
	muxes[nc] = m
	return m, nil
}

// close releases the requests waiting on m: its subscription is closed.
func (m *replyMux) close() { m.closeOnce.Do(func() { close(m.closed) }) }

// deliver hands a reply to the request of token, if it still waits and
// has room.
func (m *replyMux) deliver(token string, msg *nats.Msg) {
	m.mu.Lock()
	ch := m.waiting[token]
	m.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- msg:
	default:
	}
}

// replies is one request's view of the mux: its reply subject and the
// replies to it.
type replies struct {
	m       *replyMux
	token   string
	Subject string
	ch      chan *nats.Msg
}

// open starts waiting for replies on a subject of the request's own.
func (m *replyMux) open() *replies {
	token := strconv.FormatUint(m.next.Add(1), 36)
	r := &replies{m: m, token: token, Subject: m.prefix + token, ch: make(chan *nats.Msg, replyBuffer)}
	m.mu.Lock()
	m.waiting[token] = r.ch
	m.mu.Unlock()
	return r
}

// Next returns the next reply, or ctx's error when it ends first, or
// nats.ErrConnectionClosed when the connection is closed meanwhile.
func (r *replies) Next(ctx context.Context) (*nats.Msg, error) {
	select {
	case msg := <-r.ch:
		return msg, nil
	default:
	}
	for {
		select {
		case msg := <-r.ch:
			return msg, nil
		case msg := <-r.m.in:
			if token := strings.TrimPrefix(msg.Subject, r.m.prefix); token != r.token {
				r.m.deliver(token, msg)
				continue
			}
			return msg, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.m.closed:
			return nil, nats.ErrConnectionClosed
		}
	}
}

// Close stops the delivery of replies to the request.
func (r *replies) Close() {
	r.m.mu.Lock()
	delete(r.m.waiting, r.token)
	r.m.mu.Unlock()
}
