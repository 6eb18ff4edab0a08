package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/quic-go/quic-go"
)

// Kind names a transport, as logs, metrics and flags spell it.
type Kind string

const (
	// QUIC is the preferred transport.
	QUIC Kind = "quic"
	// WebSocket is the fallback over TCP/TLS.
	WebSocket Kind = "websocket"
)

// Kinds are the transports, preferred first.
func Kinds() []Kind { return []Kind{QUIC, WebSocket} }

// Conn is one agent connection, on either transport.
type Conn interface {
	// OpenStreamSync opens a bidirectional stream, waiting while the peer's
	// stream limit is reached.
	OpenStreamSync(ctx context.Context) (Stream, error)
	// AcceptStream waits for the next stream the peer opens.
	AcceptStream(ctx context.Context) (Stream, error)
	// SendDatagram sends an unreliable datagram; ReceiveDatagram waits for
	// one. Only where Datagrams reports true.
	SendDatagram(b []byte) error
	ReceiveDatagram(ctx context.Context) ([]byte, error)
	// Datagrams reports whether the peer takes datagrams.
	Datagrams() bool
	// CloseWithError closes the connection; the peer sees code and reason.
	CloseWithError(code quic.ApplicationErrorCode, reason string) error
	// Context ends when the connection is closed.
	Context() context.Context
	RemoteAddr() net.Addr
	// TLS is the connection's TLS state. NegotiatedProtocol is the agent
	// protocol chosen (protocol.ALPN or protocol.JoinALPN) on both
	// transports: over a WebSocket it is the WebSocket subprotocol.
	TLS() tls.ConnectionState
	// PacketsReceived counts what arrived from the peer (QUIC packets,
	// reads of the TCP connection): evidence that the peer is alive.
	PacketsReceived() uint64
	Kind() Kind
}

// Stream is one bidirectional stream of a Conn.
type Stream interface {
	io.Reader
	io.Writer
	// Close ends this side's writing; reading goes on.
	io.Closer
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
	// CancelRead stops reading: a blocked Read returns.
	CancelRead()
	// CancelWrite abandons what is not yet written.
	CancelWrite()
}

// ClosedError is how a WebSocket connection reports that it was closed,
// as *quic.ApplicationError does for QUIC.
type ClosedError struct {
	Code   quic.ApplicationErrorCode
	Reason string
	// Remote: the peer closed it.
	Remote bool
}

func (e *ClosedError) Error() string {
	who := "local"
	if e.Remote {
		who = "remote"
	}
	return fmt.Sprintf("connection closed (%s, code %d): %s", who, e.Code, e.Reason)
}
