package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
	"github.com/quic-go/quic-go"
)

const (
	// closeCodeBase maps an application close code onto the WebSocket
	// close codes applications may use (4000–4999), so the peer reads the
	// code and reason as QUIC would carry them.
	closeCodeBase = 4000
	// maxCloseReason is what a WebSocket close frame carries (125 bytes,
	// less the code).
	maxCloseReason = 123
	// keepAliveInterval matches QUIC's keep-alive (protocol.QUICConfig):
	// it holds NAT and proxy mappings and finds a dead peer.
	keepAliveInterval = 10 * time.Second
	// maxIncomingStreams bounds the streams a peer may have waiting to be
	// accepted, as QUIC's MaxIncomingStreams does.
	maxIncomingStreams = 8
	// closeHandshakeTimeout bounds the wait for the peer's answer to a
	// close frame.
	closeHandshakeTimeout = time.Second
	// readEndWait bounds how long a session that ended on a failed write
	// waits for its reader to return the peer's close frame.
	readEndWait = time.Second
)

// errNoDatagrams: the WebSocket transport carries no datagrams.
var errNoDatagrams = errors.New("the WebSocket transport carries no datagrams")

// wsConn is a Conn over a WebSocket whose binary messages carry a yamux
// session.
type wsConn struct {
	ws     *websocket.Conn
	mux    *yamux.Session
	raw    *countingConn
	tls    tls.ConnectionState
	remote net.Addr
	ctx    context.Context
	cancel context.CancelFunc
	// cut closes the TCP connection under the WebSocket: the library's
	// wait for the peer's close frame ends only with it.
	cut func()

	closeOnce sync.Once
	closed    atomic.Pointer[ClosedError]
}

// newWSConn starts the yamux session of ws, a client's when client is
// true. tlsState is the TLS connection's, with NegotiatedProtocol set to
// the WebSocket subprotocol; cut closes the connection under ws.
func newWSConn(ws *websocket.Conn, tlsState tls.ConnectionState, remote net.Addr, cut func(), client bool) (*wsConn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &wsConn{ws: ws, tls: tlsState, remote: remote, ctx: ctx, cancel: cancel, cut: cut}
	c.raw = &countingConn{Conn: websocket.NetConn(ctx, ws, websocket.MessageBinary), readEnded: make(chan struct{})}
	cfg := yamux.DefaultConfig()
	cfg.AcceptBacklog = maxIncomingStreams
	cfg.KeepAliveInterval = keepAliveInterval
	cfg.ConnectionWriteTimeout = keepAliveInterval
	cfg.LogOutput = io.Discard
	start := yamux.Server
	if client {
		start = yamux.Client
	}
	mux, err := start(c.raw, cfg)
	if err != nil {
		cancel()
		ws.CloseNow()
		return nil, fmt.Errorf("start stream multiplexing: %w", err)
	}
	c.mux = mux
	go c.watch()
	return c, nil
}

// watch records why the session ended, once it has, and ends Context.
func (c *wsConn) watch() {
	select {
	case <-c.mux.CloseChan():
	case <-c.ctx.Done():
	}
	if c.closed.Load() == nil {
		// When the peer closes, the WebSocket library shuts the
		// connection before its reader returns the close frame, so a
		// write can end the session first: the frame says why.
		wait := time.NewTimer(readEndWait)
		select {
		case <-c.raw.readEnded:
		case <-wait.C:
		}
		wait.Stop()
	}
	c.closed.CompareAndSwap(nil, c.raw.closedBy())
	c.cancel()
}

func (c *wsConn) OpenStreamSync(ctx context.Context) (Stream, error) {
	// yamux opens at once (its window, not a stream count, is the limit).
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := c.mux.OpenStream()
	if err != nil {
		return nil, c.translate(err)
	}
	return &wsStream{s: s, conn: c}, nil
}

func (c *wsConn) AcceptStream(ctx context.Context) (Stream, error) {
	s, err := c.mux.AcceptStreamWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.translate(err)
	}
	return &wsStream{s: s, conn: c}, nil
}

func (c *wsConn) SendDatagram([]byte) error { return errNoDatagrams }

func (c *wsConn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.ctx.Done():
		return nil, c.closed.Load()
	}
}

func (c *wsConn) Datagrams() bool { return false }

// CloseWithError sends code and reason in the WebSocket close frame and
// ends the session. It waits for the peer's close frame, a round trip, but
// at most closeHandshakeTimeout: then the connection is cut (a peer that
// is gone must not hold up the hub's shutdown).
func (c *wsConn) CloseWithError(code quic.ApplicationErrorCode, reason string) error {
	c.closed.CompareAndSwap(nil, &ClosedError{Code: code, Reason: reason})
	var err error
	c.closeOnce.Do(func() {
		if len(reason) > maxCloseReason {
			reason = reason[:maxCloseReason]
		}
		// The library waits up to 5 s for the peer's close frame, and
		// ending our reads' context does not end that wait when no read
		// of ours is under way: closing the TCP connection does.
		cut := time.AfterFunc(closeHandshakeTimeout, func() {
			c.cancel()
			c.cut()
		})
		defer cut.Stop()
		err = c.ws.Close(websocket.StatusCode(closeCodeBase+int(code)), reason)
		c.mux.Close()
		c.cancel()
	})
	return err
}

func (c *wsConn) Context() context.Context { return c.ctx }
func (c *wsConn) RemoteAddr() net.Addr     { return c.remote }
func (c *wsConn) TLS() tls.ConnectionState { return c.tls }
func (c *wsConn) PacketsReceived() uint64  { return c.raw.reads.Load() }
func (c *wsConn) Kind() Kind               { return WebSocket }

// translate turns an error of a closed session into why it closed. While
// the session lives an error stands as it is: io.EOF on a stream is the
// peer's end of that stream.
func (c *wsConn) translate(err error) error {
	if err == nil {
		return nil
	}
	// A failed write to the connection ends the session, but yamux
	// hands the error to the writer before it marks itself closed.
	if c.ctx.Err() != nil || c.mux.IsClosed() || c.raw.writeFailed.Load() {
		if ce := c.closed.Load(); ce != nil {
			return ce
		}
		// watch records why before it ends the context.
		<-c.ctx.Done()
		if ce := c.closed.Load(); ce != nil {
			return ce
		}
		return c.raw.closedBy()
	}
	return err
}

// wsStream is a Stream of a wsConn.
type wsStream struct {
	s    *yamux.Stream
	conn *wsConn
}

func (s *wsStream) Read(b []byte) (int, error) {
	n, err := s.s.Read(b)
	if err != nil && n == 0 {
		err = s.conn.translate(err)
	}
	return n, err
}

func (s *wsStream) Write(b []byte) (int, error) {
	n, err := s.s.Write(b)
	return n, s.conn.translate(err)
}

func (s *wsStream) Close() error                       { return s.s.Close() }
func (s *wsStream) SetReadDeadline(t time.Time) error  { return s.s.SetReadDeadline(t) }
func (s *wsStream) SetWriteDeadline(t time.Time) error { return s.s.SetWriteDeadline(t) }

// CancelRead makes a blocked Read return at once.
func (s *wsStream) CancelRead() { _ = s.s.SetReadDeadline(time.Unix(1, 0)) }

// CancelWrite makes a blocked Write return and ends the stream.
func (s *wsStream) CancelWrite() {
	_ = s.s.SetWriteDeadline(time.Unix(1, 0))
	_ = s.s.Close()
}

// countingConn counts reads of the WebSocket and keeps the first error,
// which says how the peer closed it; readEnded is closed once it is kept.
type countingConn struct {
	net.Conn
	reads     atomic.Uint64
	firstErr  atomic.Pointer[error]
	readEnded chan struct{}
	// closing is set once this side closes the connection (yamux does on
	// a keep-alive timeout or a protocol error): the reads fail then
	// because of it, not because of the peer.
	closing atomic.Bool
	// writeFailed is set once a write to the connection fails: yamux
	// ends the session then.
	writeFailed atomic.Bool
}

func (c *countingConn) Close() error {
	c.closing.Store(true)
	return c.Conn.Close()
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.writeFailed.Store(true)
	}
	return n, err
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.reads.Add(1)
	}
	if err != nil && c.firstErr.CompareAndSwap(nil, &err) {
		close(c.readEnded)
	}
	return n, err
}

// closedBy says how the connection ended, as far as reads tell.
func (c *countingConn) closedBy() *ClosedError {
	p := c.firstErr.Load()
	if p == nil {
		return &ClosedError{Reason: "connection closed"}
	}
	err := *p
	var ce websocket.CloseError
	switch {
	case errors.As(err, &ce) && ce.Code >= closeCodeBase && ce.Code < closeCodeBase+1000:
		return &ClosedError{Code: quic.ApplicationErrorCode(ce.Code - closeCodeBase), Reason: ce.Reason, Remote: true}
	case c.closing.Load() && !errors.As(err, &ce):
		return &ClosedError{Reason: "connection closed"}
	case errors.Is(err, io.EOF):
		return &ClosedError{Reason: "peer closed the connection", Remote: true}
	default:
		return &ClosedError{Reason: "connection lost: " + err.Error(), Remote: true}
	}
}
