package agentserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/transport"
)

// DefaultMaxHandshakes is how many handshakes (QUIC and the WebSocket
// fallback's TLS together) a hub carries at once by default: enough for a
// fleet a round trip away to come back at hundreds a second, few enough
// that each completes long before the agents' 10 s handshake timeout on
// two cores.
const DefaultMaxHandshakes = 256

// DefaultRetryThreshold is how many handshakes in flight make new QUIC
// connections prove their source address first (a Retry, one round trip
// more): a fleet reconnecting goes past it at once and hardly notices;
// spoofed Initial packets, which never answer a Retry, can hold no more
// places than this.
const DefaultRetryThreshold = 64

// DefaultMaxHandshakesPerSource bounds the QUIC handshakes in flight from
// one source address (an IPv6 /64): a site behind one NAT that dials with
// many clusters at once gets through a few round trips later.
const DefaultMaxHandshakesPerSource = 32

// DefaultHandshakeTimeout is how long a QUIC handshake may stay silent
// before the hub drops it (quic-go's HandshakeIdleTimeout; the handshake
// gets twice that in all).
const DefaultHandshakeTimeout = 5 * time.Second

// HandshakeLimits bound the agents' handshakes in flight.
type HandshakeLimits struct {
	// Max bounds them all, QUIC and TLS on TCP; 0: DefaultMaxHandshakes.
	Max int
	// RetryThreshold: from this many in flight, a QUIC connection from an
	// address not validated yet gets a Retry; 0: DefaultRetryThreshold.
	RetryThreshold int
	// PerSource bounds the QUIC handshakes from one source address whose
	// address was validated; one not validated yet gets a Retry beyond it;
	// 0: DefaultMaxHandshakesPerSource.
	PerSource int
}

func (l HandshakeLimits) withDefaults() HandshakeLimits {
	if l.Max <= 0 {
		l.Max = DefaultMaxHandshakes
	}
	if l.RetryThreshold <= 0 {
		l.RetryThreshold = DefaultRetryThreshold
	}
	if l.PerSource <= 0 {
		l.PerSource = DefaultMaxHandshakesPerSource
	}
	return l
}

// errHubBusy refuses a connection beyond the handshake limit;
// errSourceBusy one beyond its source's.
var (
	errHubBusy    = errors.New("too many handshakes in flight")
	errSourceBusy = errors.New("too many handshakes in flight from this source address")
)

// handshakeGate bounds the agents' handshakes in flight, QUIC and TLS on
// TCP (the WebSocket fallback) together: they share the cores. After a hub
// restart a whole fleet dials at once; handshakes beyond what the cores
// finish in time would all be slow, many would time out, and their agents
// would back off for longer. Beyond the limit a new QUIC connection is
// refused at its first packet (quic-go answers CONNECTION_REFUSED, no key
// exchange), and the agent dials again a second or two later
// (agent.BusyRetryDelay); a TCP connection waits in the kernel's accept
// queue instead (gatedTCPListener).
//
// Source addresses on UDP can be spoofed: a flood of Initial packets that
// never go further would hold every place until their handshakes time
// out. So past RetryThreshold the gate has quic-go validate a new
// connection's address first (verifySource: a stateless Retry that only a
// real peer answers), and validated handshakes are capped per source
// address. Unvalidated ones are counted per source apart, so a spoofer
// cannot use up a real address's share.
type handshakeGate struct {
	limits HandshakeLimits
	logger *slog.Logger
	// retryLog and refuseLog pace the gate's log lines.
	retryLog, refuseLog *netlimit.Throttle

	mu       sync.Mutex
	inFlight int
	// validated and unvalidated are the QUIC handshakes in flight per
	// source address (TCP ones are capped by the WebSocket listener).
	validated, unvalidated netlimit.Counts

	refused, sourceLimited, retries, abandoned atomic.Int64
	// freed wakes the TCP listener waiting for a place (it alone waits).
	freed chan struct{}
}

// ticket is one admitted handshake; it is released once, when the hub
// accepts the connection or the connection ends before that.
type ticket struct {
	gate     *handshakeGate
	src      netip.Prefix
	counts   *netlimit.Counts // nil for TCP
	released atomic.Bool
}

type ticketKey struct{}

// gateLogEvery paces the gate's log lines under a flood.
const gateLogEvery = 10 * time.Second

func newHandshakeGate(limits HandshakeLimits, logger *slog.Logger) *handshakeGate {
	return &handshakeGate{limits: limits.withDefaults(), logger: logger, freed: make(chan struct{}, 1),
		retryLog: netlimit.NewThrottle(gateLogEvery, nil), refuseLog: netlimit.NewThrottle(gateLogEvery, nil)}
}

// verifySource is the QUIC transport's VerifySourceAddress: whether a new
// connection without a token must answer a Retry before it may start its
// handshake.
func (g *handshakeGate) verifySource(addr net.Addr) bool {
	src := netlimit.Source(addr)
	g.mu.Lock()
	inFlight := g.inFlight
	retry := inFlight >= g.limits.RetryThreshold || g.unvalidated.Get(src) >= g.limits.PerSource
	g.mu.Unlock()
	if !retry {
		return false
	}
	g.retries.Add(1)
	if ok, held := g.retryLog.Allow(); ok {
		g.logger.Info("new QUIC connections must prove their source address (Retry): many handshakes in flight",
			"inFlight", inFlight, "retryThreshold", g.limits.RetryThreshold, "retriesSinceLastLog", held)
	}
	return true
}

// admit is the QUIC transport's ConnContext: it lets a connection start
// its handshake if the gate and its source have room.
func (g *handshakeGate) admit(ctx context.Context, info *quic.ClientInfo) (context.Context, error) {
	src := netlimit.Source(info.RemoteAddr)
	t, err := g.takeQUIC(src, info.AddrVerified)
	if err != nil {
		g.logRefused(src, info.AddrVerified, err)
		return nil, err
	}
	// ctx ends when the connection does, also when its handshake fails.
	context.AfterFunc(ctx, t.abandon)
	return context.WithValue(ctx, ticketKey{}, t), nil
}

// takeQUIC takes a place for a QUIC handshake from src.
func (g *handshakeGate) takeQUIC(src netip.Prefix, validated bool) (*ticket, error) {
	counts := &g.unvalidated
	if validated {
		counts = &g.validated
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.inFlight >= g.limits.Max:
		g.refused.Add(1)
		return nil, errHubBusy
	case counts.Get(src) >= g.limits.PerSource:
		g.sourceLimited.Add(1)
		return nil, errSourceBusy
	}
	g.inFlight++
	counts.Add(src, 1)
	return &ticket{gate: g, src: src, counts: counts}, nil
}

func (g *handshakeGate) logRefused(src netip.Prefix, validated bool, err error) {
	if ok, held := g.refuseLog.Allow(); ok {
		g.logger.Warn("QUIC handshake refused", "source", src.String(), "addressValidated", validated, "reason", err,
			"maxHandshakes", g.limits.Max, "maxHandshakesPerSource", g.limits.PerSource, "refusedSinceLastLog", held)
	}
}

// take takes a place for a TLS handshake on TCP if one is free. The count
// never goes over the limit, even for a moment: a waiter woken by a
// release must see the place free.
func (g *handshakeGate) take() *ticket {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight >= g.limits.Max {
		return nil
	}
	g.inFlight++
	return &ticket{gate: g}
}

// wait takes a place for a handshake, waiting while the gate is full,
// until ctx ends. One goroutine waits at a time.
func (g *handshakeGate) wait(ctx context.Context) (*ticket, error) {
	for {
		if t := g.take(); t != nil {
			return t, nil
		}
		select {
		case <-g.freed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// held is how many handshakes are in flight.
func (g *handshakeGate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}

// release gives the place back; it reports whether this call did.
func (t *ticket) release() bool {
	if !t.released.CompareAndSwap(false, true) {
		return false
	}
	g := t.gate
	g.mu.Lock()
	g.inFlight--
	if t.counts != nil {
		t.counts.Add(t.src, -1)
	}
	g.mu.Unlock()
	select {
	case g.freed <- struct{}{}:
	default: // a wake-up is pending already
	}
	return true
}

// abandon releases the place of a connection that ended: if the hub had
// not accepted it yet, its handshake never completed (timed out, failed,
// or an Initial packet nobody followed up).
func (t *ticket) abandon() {
	if t.release() {
		t.gate.abandoned.Add(1)
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
// first request came) or closed (onConnState): a client that stays
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

// NetConn is the connection gc wraps (netlimit.Release looks through it).
func (gc *gatedConn) NetConn() net.Conn { return gc.Conn }

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

// onConnState is the WebSocket server's ConnState hook: a connection
// past its TLS handshake, or closed, gives its handshake place back; one
// upgraded to a WebSocket (hijacked) is the agent server's from then on,
// and no longer counts against the listener's caps (netlimit).
func onConnState(c net.Conn, state http.ConnState) {
	if state == http.StateNew {
		return
	}
	if state == http.StateHijacked {
		netlimit.Release(c)
	}
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*gatedConn); ok {
		gc.ticket.release()
	}
}
