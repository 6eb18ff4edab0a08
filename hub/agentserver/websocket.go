package agentserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// WebSocketOff, as Config.WebSocketAddr, turns the WebSocket fallback off.
const WebSocketOff = "off"

// webSocketListener takes agents over the WebSocket fallback (TLS on TCP)
// for sites where UDP is blocked: the same sessions and joins as QUIC.
type webSocketListener struct {
	*transport.WebSocketServer
	ln     net.Listener
	capped *netlimit.Listener // under ln: the caps on connections
	server *http.Server
}

// Defaults of the WebSocket fallback's caps on connections before their
// upgrade (after it, a connection is the agent server's, which checks its
// certificate or its join at once): sites behind one NAT or proxy reach
// the hub from one address, a handful at a time but for a restart.
const (
	DefaultWebSocketMaxConns          = 4096
	DefaultWebSocketMaxConnsPerSource = 64
)

// DefaultWebSocketLimits are the fallback's caps and timeouts where
// Config.WebSocket leaves them zero.
var DefaultWebSocketLimits = netlimit.DefaultServerLimits(DefaultWebSocketMaxConns, DefaultWebSocketMaxConnsPerSource)

// webSocketConfig is where and how the fallback listens.
type webSocketConfig struct {
	// addr: empty means the port QUIC is bound to (udp), on TCP.
	addr      string
	udp       net.Addr
	cert      tls.Certificate
	clientCAs *x509.CertPool
	limits    netlimit.ServerLimits
}

// listenWebSocket listens at cfg.addr; an empty one means the port QUIC is
// bound to, on TCP, and then a failure to listen is a warning (the hub
// runs without the fallback), not an error. It returns nil when addr is
// WebSocketOff or the default cannot be had.
func listenWebSocket(ctx context.Context, cfg webSocketConfig, handshakes *handshakeGate, logger *slog.Logger) (*webSocketListener, error) {
	addr, udp := cfg.addr, cfg.udp
	if addr == WebSocketOff {
		return nil, nil
	}
	explicit := addr != ""
	if !explicit {
		u, ok := udp.(*net.UDPAddr)
		if !ok {
			return nil, fmt.Errorf("QUIC listens on %v, not a UDP address", udp)
		}
		addr = net.JoinHostPort(u.IP.String(), strconv.Itoa(u.Port))
		if u.IP.IsUnspecified() {
			addr = ":" + strconv.Itoa(u.Port)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if explicit {
			return nil, fmt.Errorf("--websocket-addr %s: listen: %w", addr, err)
		}
		logger.Warn("no WebSocket fallback for agents whose UDP is blocked: QUIC's port is taken on TCP (give --websocket-addr)", "addr", addr, "err", err)
		return nil, nil
	}
	ws := transport.NewWebSocketServer(ctx, protocol.ALPN, protocol.JoinALPN)
	mux := http.NewServeMux()
	mux.Handle(transport.WebSocketPath, ws)
	// HTTP/1.1 only: the WebSocket upgrade needs nothing else, and an
	// HTTP/2 connection would hold its handshake place for its whole life
	// (onConnState never hears it become active).
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	server := &http.Server{
		Protocols:      protocols,
		Handler:        mux,
		TLSConfig:      protocol.ServerWebSocketTLSConfig(cfg.cert, cfg.clientCAs),
		MaxHeaderBytes: 16 << 10,
		// TLS handshake errors of scanners would otherwise go to stderr.
		ErrorLog:    slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnState:   onConnState,
	}
	cfg.limits.Apply(server)
	capped := netlimit.NewListener(ln, "websocket", cfg.limits.Limits, logger, nil)
	return &webSocketListener{WebSocketServer: ws, ln: gatedTCPListener{Listener: capped, gate: handshakes, ctx: ctx}, capped: capped, server: server}, nil
}

// Stats are the fallback's connection counts (before their upgrade).
func (l *webSocketListener) Stats() netlimit.Stats { return l.capped.Stats() }

// Addr is where the fallback listens.
func (l *webSocketListener) Addr() net.Addr { return l.ln.Addr() }

// serve serves TLS until close.
func (l *webSocketListener) serve(logger *slog.Logger) {
	if err := l.server.ServeTLS(l.ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		logger.Error("WebSocket listener for agents stopped", "err", err)
	}
}

// close stops listening. Upgraded connections are the agent server's:
// it says goodbye to each before this runs.
func (l *webSocketListener) close() { _ = l.server.Close() }
