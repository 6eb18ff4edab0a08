package transport

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/quic-go/quic-go"
)

// quicConn is a Conn over QUIC.
type quicConn struct{ c *quic.Conn }

// FromQUIC wraps a QUIC connection.
func FromQUIC(c *quic.Conn) Conn { return quicConn{c} }

func (q quicConn) OpenStreamSync(ctx context.Context) (Stream, error) {
	s, err := q.c.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	return quicStream{s}, nil
}

func (q quicConn) AcceptStream(ctx context.Context) (Stream, error) {
	s, err := q.c.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	return quicStream{s}, nil
}

func (q quicConn) SendDatagram(b []byte) error { return q.c.SendDatagram(b) }
func (q quicConn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return q.c.ReceiveDatagram(ctx)
}
func (q quicConn) Datagrams() bool { return q.c.ConnectionState().SupportsDatagrams.Remote }
func (q quicConn) CloseWithError(code quic.ApplicationErrorCode, reason string) error {
	return q.c.CloseWithError(code, reason)
}
func (q quicConn) Context() context.Context { return q.c.Context() }
func (q quicConn) RemoteAddr() net.Addr     { return q.c.RemoteAddr() }
func (q quicConn) TLS() tls.ConnectionState { return q.c.ConnectionState().TLS }
func (q quicConn) PacketsReceived() uint64  { return q.c.ConnectionStats().PacketsReceived }
func (q quicConn) Kind() Kind               { return QUIC }

// quicStream is a Stream over QUIC.
type quicStream struct{ *quic.Stream }

func (s quicStream) CancelRead()  { s.Stream.CancelRead(0) }
func (s quicStream) CancelWrite() { s.Stream.CancelWrite(0) }

// QUICListener hands out a QUIC listener's connections as Conns.
type QUICListener struct{ *quic.Listener }

// Accept waits for the next connection.
func (l QUICListener) Accept(ctx context.Context) (Conn, error) {
	c, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return FromQUIC(c), nil
}
