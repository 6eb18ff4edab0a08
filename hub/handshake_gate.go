package hub

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/transport"
)

// DefaultMaxHandshakes is how many QUIC handshakes a hub carries at once
// by default: enough for a fleet a round trip away to come back at
// hundreds a second, few enough that each completes long before the
// agents' 10 s handshake timeout on two cores.
const DefaultMaxHandshakes = 256

// errHubBusy refuses a connection beyond the handshake limit.
var errHubBusy = errors.New("too many handshakes in flight")

// handshakeGate bounds the QUIC handshakes in flight. After a hub restart
// a whole fleet dials at once; handshakes beyond what the cores finish in
// time would all be slow, many would time out, and their agents would
// back off for longer. Beyond the limit a new connection is refused at its
// first packet (quic-go answers CONNECTION_REFUSED, no key exchange), and
// the agent dials again a second or two later (agent.BusyRetryDelay).
type handshakeGate struct {
	limit    int64
	inFlight atomic.Int64
	refused  atomic.Int64
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
	return &handshakeGate{limit: int64(limit)}
}

// admit is the QUIC transport's ConnContext: it lets a connection start
// its handshake if fewer than the limit are in flight.
func (g *handshakeGate) admit(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
	if g.inFlight.Add(1) > g.limit {
		g.inFlight.Add(-1)
		g.refused.Add(1)
		return nil, errHubBusy
	}
	t := &ticket{gate: g}
	// ctx ends when the connection does, also when its handshake fails.
	context.AfterFunc(ctx, t.release)
	return context.WithValue(ctx, ticketKey{}, t), nil
}

func (t *ticket) release() {
	if t.released.CompareAndSwap(false, true) {
		t.gate.inFlight.Add(-1)
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
