package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/flotilla-io/flotilla/protocol"
)

// WebSocketPath is where the hub takes agent connections over TCP.
const WebSocketPath = "/flotilla/v1/agent"

// handshakeTimeout bounds the TLS handshake, as QUIC's
// HandshakeIdleTimeout does.
const handshakeTimeout = 10 * time.Second

// DialWebSocket connects to the hub at hostport over TLS and a WebSocket.
// tlsConf is the one the agent would give QUIC: its first NextProtos entry
// is the agent protocol, asked for as the WebSocket subprotocol (the TLS
// connection itself speaks HTTP/1.1). HTTPS_PROXY and NO_PROXY are
// honoured, so the connection can leave through an HTTP proxy.
func DialWebSocket(ctx context.Context, hostport string, tlsConf *tls.Config) (Conn, error) {
	if len(tlsConf.NextProtos) == 0 {
		return nil, errors.New("the TLS configuration names no agent protocol")
	}
	subprotocol := tlsConf.NextProtos[0]
	conf := tlsConf.Clone()
	conf.NextProtos = []string{"http/1.1"}
	var dialed underlyingConn
	client := &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialed.dial,
		TLSClientConfig:     conf,
		TLSHandshakeTimeout: handshakeTimeout,
		DisableKeepAlives:   true,
	}}
	ws, resp, err := websocket.Dial(ctx, "wss://"+hostport+WebSocketPath, &websocket.DialOptions{
		HTTPClient:   client,
		Subprotocols: []string{subprotocol},
	})
	if err != nil {
		return nil, explainDialError(err, resp)
	}
	if ws.Subprotocol() != subprotocol || resp.TLS == nil {
		ws.CloseNow()
		return nil, fmt.Errorf("the server at %s does not speak %s over WebSocket (it chose %q)", hostport, subprotocol, ws.Subprotocol())
	}
	state := *resp.TLS
	state.NegotiatedProtocol = subprotocol
	remote, err := net.ResolveTCPAddr("tcp", hostport)
	if err != nil {
		remote = &net.TCPAddr{}
	}
	return newWSConn(ws, state, remote, dialed.close, true)
}

// AnsweredError is a WebSocket dial that a server answered over HTTP
// without upgrading: it is reachable, and said no.
type AnsweredError struct {
	Status string
	Err    error
}

func (e *AnsweredError) Error() string {
	return fmt.Sprintf("the server answered %s instead of a WebSocket: %v", e.Status, e.Err)
}
func (e *AnsweredError) Unwrap() error { return e.Err }

// explainDialError says what the hub answered, if it answered over HTTP.
func explainDialError(err error, resp *http.Response) error {
	if resp == nil {
		return err
	}
	return &AnsweredError{Status: resp.Status, Err: err}
}

// WebSocketServer takes agent connections over WebSocket: mount it as
// the handler of a TLS server (at WebSocketPath) and take the
// connections with Accept.
type WebSocketServer struct {
	subprotocols []string
	conns        chan Conn
	done         <-chan struct{}
}

// NewWebSocketServer returns a server for the agent protocols
// subprotocols (protocol.ALPN, protocol.JoinALPN). It stops handing out
// connections when ctx ends.
func NewWebSocketServer(ctx context.Context, subprotocols ...string) *WebSocketServer {
	return &WebSocketServer{subprotocols: subprotocols, conns: make(chan Conn), done: ctx.Done()}
}

// ServeHTTP upgrades an agent's request and holds it while the
// connection lives.
func (s *WebSocketServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil || r.URL.Path != WebSocketPath {
		http.Error(w, "this is a Flotilla hub's agent endpoint: agents connect over TLS at "+WebSocketPath, http.StatusNotFound)
		return
	}
	hijacked := &hijackRecorder{ResponseWriter: w}
	ws, err := websocket.Accept(hijacked, r, &websocket.AcceptOptions{Subprotocols: s.subprotocols})
	if err != nil {
		return // Accept answered the request
	}
	sub := ws.Subprotocol()
	if !slices.Contains(s.subprotocols, sub) {
		ws.Close(websocket.StatusPolicyViolation, "no Flotilla agent protocol offered")
		return
	}
	state := *r.TLS
	state.NegotiatedProtocol = sub
	remote, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		remote = &net.TCPAddr{}
	}
	c, err := newWSConn(ws, state, remote, hijacked.conn.close, false)
	if err != nil {
		return
	}
	select {
	case s.conns <- c:
	case <-s.done:
		_ = c.CloseWithError(protocol.CloseGoingAway, "hub shutting down")
		return
	}
	<-c.Context().Done()
}

// Accept waits for the next agent connection.
func (s *WebSocketServer) Accept(ctx context.Context) (Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// underlyingConn holds the TCP connection under a WebSocket, to cut it
// when the close handshake takes too long.
type underlyingConn struct {
	mu   sync.Mutex
	conn net.Conn
}

// dial is an http.Transport's DialContext that records the connection
// (the proxy's, when the request goes through one: closing it ends the
// tunnel too).
func (u *underlyingConn) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err == nil {
		u.set(conn)
	}
	return conn, err
}

func (u *underlyingConn) set(conn net.Conn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.conn = conn
}

func (u *underlyingConn) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn != nil {
		_ = u.conn.Close()
	}
}

// hijackRecorder is the ResponseWriter given to websocket.Accept: it
// records the connection the upgrade takes over.
type hijackRecorder struct {
	http.ResponseWriter
	conn underlyingConn
}

func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err == nil {
		h.conn.set(conn)
	}
	return conn, rw, err
}
