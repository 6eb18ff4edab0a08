package agentserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/transport"
)

// DefaultMaxHandshakes is how many handshakes (QUIC and the WebSocket
// fallback's TLS together) a hub carries at once by default: enough for a
// fleet a round trip away to come back at hundreds a second, few enough
// that each completes long before the agents' 10 s handshake timeout on
// two cores.
const DefaultMaxHandshakes = 256

// errHubBusy refuses a connection beyond the handshake limit.
var errHubBusy = errors.New("too many handshakes in flight")

// handshakeGate bounds the agents' handshakes in flight, QUIC and TLS on
// TCP (the WebSocket fallback) together: they share the cores. After a hub
// restart a whole fleet dials at once; handshakes beyond what the cores
// finish in time would all be slow, many would time out, and their agents
// would back off for longer. Beyond the limit a new QUIC connection is
// refused at its first packet (quic-go answers CONNECTION_REFUSED, no key
// exchange), and the agent dials again a second or two later
// (agent.BusyRetryDelay); a TCP connection waits in the kernel's accept
// queue instead (gatedTCPListener).
type handshakeGate struct {
	limit    int64
	inFlight atomic.Int64
	refused  atomic.Int64
	// freed wakes the TCP listener waiting for a place (it alone waits).
	freed chan struct{}
}

// ticket is one admitted handshake; it is released once, when the hub
// accepts the connection or the connection ends before that.
type ticket struct {
	gate     *handshakeGate
	released atomic.Bool
}

type ticketKey struct{}

func newHandshakeGate(limit int) *handshakeGate {
	if limit <= 0 {
		limit = DefaultMaxHandshakes
	}
	return &handshakeGate{limit: int64(limit), freed: make(chan struct{}, 1)}
}

// admit is the QUIC transport's ConnContext: it lets a connection start
// its handshake if fewer than the limit are in flight.
func (g *handshakeGate) admit(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
	if !g.take() {
		g.refused.Add(1)
		return nil, errHubBusy
	}
	t := &ticket{gate: g}
	// ctx ends when the connection does, also when its handshake fails.
	context.AfterFunc(ctx, t.release)
	return context.WithValue(ctx, ticketKey{}, t), nil
}

// take takes a place if one is free. The count never goes over the
// limit, even for a moment: a waiter woken by a release must see the
// place free (a refused admit that counted itself in and out again could
// hide it).
func (g *handshakeGate) take() bool {
	for {
		n := g.inFlight.Load()
		if n >= g.limit {
			return false
		}
		if g.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// wait takes a place for a handshake, waiting while the gate is full,
// until ctx ends. One goroutine waits at a time.
func (g *handshakeGate) wait(ctx context.Context) (*ticket, error) {
	for {
		if g.take() {
			return &ticket{gate: g}, nil
		}
		select {
		case <-g.freed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

func (t *ticket) release() {
	if t.released.CompareAndSwap(false, true) {
		t.gate.inFlight.Add(-1)
		select {
		case t.gate.freed <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// gatedListener releases each connection's ticket when it is accepted:
// its handshake is over.
type gatedListener struct{ transport.QUICListener }

func (l gatedListener) Accept(ctx context.Context) (transport.Conn, error) {
	c, err := l.QUICListener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	if t, ok := c.Context().Value(ticketKey{}).(*ticket); ok {
		t.release()
	}
	return c, nil
}

// gatedTCPListener hands the WebSocket server a TCP connection only once
// the gate has a place for its TLS handshake; the connections behind it
// wait in the kernel's accept queue. The place is released when the
// server reports the connection active (its handshake is over and its
// first request came) or closed (releaseOnState): a client that stays
// silent holds it until the server's handshake and header deadlines. The
// server speaks HTTP/1.1 only, since HTTP/2 connections skip the active
// state's hook.
type gatedTCPListener struct {
	net.Listener
	gate *handshakeGate
	ctx  context.Context // ends the wait; the server closes the listener too
}

// gatedConn carries its handshake's place to the server's ConnState hook.
type gatedConn struct {
	net.Conn
	ticket *ticket
}

func (l gatedTCPListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	t, err := l.gate.wait(l.ctx)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("wait for a handshake place: %w (%w)", err, net.ErrClosed)
	}
	return &gatedConn{Conn: c, ticket: t}, nil
}

// releaseOnState is the WebSocket server's ConnState hook: a connection
// past its TLS handshake, or closed, gives its place back.
func releaseOnState(c net.Conn, state http.ConnState) {
	if state == http.StateNew {
		return
	}
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*gatedConn); ok {
		gc.ticket.release()
	}
}
