package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// Transport modes (Config.Transport, --transport).
const (
	// TransportAuto uses QUIC and falls back to the WebSocket over TCP
	// when QUIC gets no answer (UDP blocked), trying QUIC again every
	// QUICRetryInterval.
	TransportAuto = "auto"
	// TransportQUIC uses QUIC only.
	TransportQUIC = "quic"
	// TransportWebSocket uses the WebSocket over TCP only.
	TransportWebSocket = "websocket"
)

// Defaults of the fallback.
const (
	DefaultQUICFallbackAfter = 5 * time.Second
	DefaultQUICRetryInterval = time.Minute
)

// transportChooser decides which transports a dial tries, in which order.
// Only Run's goroutine uses it.
type transportChooser struct {
	mode  string
	retry time.Duration
	// quicFailed is when QUIC last got no answer where the fallback then
	// connected; zero once QUIC connects.
	quicFailed time.Time
}

// order returns the transports to try at now, preferred first. In auto
// mode QUIC comes first, unless it got no answer within the retry
// interval: then a reconnect goes straight to the fallback (the session
// tries QUIC again on its own, see quicProbeLoop).
func (c *transportChooser) order(now time.Time) []transport.Kind {
	switch c.mode {
	case TransportQUIC:
		return []transport.Kind{transport.QUIC}
	case TransportWebSocket:
		return []transport.Kind{transport.WebSocket}
	}
	if !c.quicFailed.IsZero() && now.Sub(c.quicFailed) < c.retry {
		return []transport.Kind{transport.WebSocket, transport.QUIC}
	}
	return []transport.Kind{transport.QUIC, transport.WebSocket}
}

// connected records that kind connected at now after the kinds in failed
// got no answer.
func (c *transportChooser) connected(kind transport.Kind, failed []transport.Kind, now time.Time) {
	switch {
	case kind == transport.QUIC:
		c.quicFailed = time.Time{}
	case len(failed) > 0 && failed[0] == transport.QUIC:
		c.quicFailed = now
	}
}

// unanswered reports whether a failed dial may have failed for want of a
// path (timeout, unreachable, refused, reset), so another transport may get
// through. A dial the hub answered and refused (a TLS alert, a close by
// the hub, an HTTP status) or whose hub this agent refused (wrong CA, wrong
// pin) would fail the same on the other transport.
func unanswered(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false // the agent stops
	}
	// Any answer counts, down every branch of a race's joined errors.
	answered := inErrorTree(err, func(te *quic.TransportError) bool { return te.Remote || te.ErrorCode.IsCryptoError() }) ||
		inErrorTree(err, func(ae *quic.ApplicationError) bool { return ae.Remote }) ||
		inErrorTree(err, func(ce *transport.ClosedError) bool { return ce.Remote }) ||
		inErrorTree(err, anyOf[*transport.AnsweredError]) || inErrorTree(err, anyOf[tls.AlertError]) ||
		inErrorTree(err, anyOf[*tls.CertificateVerificationError]) || inErrorTree(err, anyOf[x509.UnknownAuthorityError]) ||
		inErrorTree(err, anyOf[x509.HostnameError]) || errors.Is(err, protocol.ErrPeerIdentity)
	return !answered
}
