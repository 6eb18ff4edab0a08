package agentserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quic-go/quic-go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/agent"
	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// gateTestTLS returns the hub's TLS configuration, made as the hub makes
// it, and an agent's.
func gateTestTLS(t *testing.T) (hub, agentConf *tls.Config) {
	t.Helper()
	hubCA, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServingCertificate(hubCA, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := hubCA.Issue(pki.Request{CommonName: protocol.ClusterCommonName("edge-1"), Usage: pki.ClientAuth, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	client, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return protocol.ServerTLSConfig(serving, ca.Pool(hubCA)), protocol.ClientTLSConfig(client, ca.Pool(hubCA), "127.0.0.1")
}

// TestHandshakeGateRefusesBeyondTheLimit: with one handshake allowed, a
// connection whose handshake is done but not yet accepted holds the gate,
// so the next is refused at once with what agents read as "hub busy"; once
// the hub accepts the first, a new one gets in.
func TestHandshakeGateRefusesBeyondTheLimit(t *testing.T) {
	hubTLS, agentTLS := gateTestTLS(t)
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	gate := newHandshakeGate(HandshakeLimits{Max: 1}, discardLogger())
	tr := &quic.Transport{Conn: udp, ConnContext: gate.admit}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	ln, err := tr.Listen(hubTLS, protocol.QUICConfig())
	if err != nil {
		t.Fatal(err)
	}
	accept := gatedListener{transport.QUICListener{Listener: ln}}
	dial := func() (*quic.Conn, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		return quic.DialAddr(ctx, udp.LocalAddr().String(), agentTLS, protocol.QUICConfig())
	}

	first, err := dial()
	if err != nil {
		t.Fatalf("first dial: %v", err)
	}
	defer first.CloseWithError(0, "")
	_, err = dial()
	if !agent.HubBusy(err) {
		t.Fatalf("second dial while the first is not accepted: %v, want the hub busy", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := accept.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	// The refused agent's first flight takes two packets (its ClientHello
	// carries a post-quantum key share); under load the second may arrive
	// after the place was freed and hold it until the server's handshake
	// timeout. So the next agent may be told "busy" for that long, as a
	// real agent would be, and dials again.
	var third *quic.Conn
	for {
		third, err = dial()
		if err == nil || !agent.HubBusy(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("dial after the first was accepted: %v", err)
	}
	defer third.CloseWithError(0, "")
	if _, err := accept.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gate.held(); got != 0 {
		t.Errorf("in flight after both were accepted = %d, want 0", got)
	}
}

// A connection that ends before the hub accepts it gives its place back.
func TestHandshakeGateReleasesAnEndedConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := newHandshakeGate(HandshakeLimits{Max: 1}, discardLogger())
		ctx, cancel := context.WithCancel(t.Context())
		connCtx, err := gate.admit(ctx, &quic.ClientInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gate.admit(t.Context(), &quic.ClientInfo{}); err == nil {
			t.Fatal("a second handshake was admitted beyond the limit of 1")
		}
		cancel()
		synctest.Wait() // context.AfterFunc releases on a goroutine of its own
		if got := gate.held(); got != 0 {
			t.Fatalf("in flight = %d after the connection ended, want 0", got)
		}
		// Released twice (ended, then accepted late) counts once.
		connCtx.Value(ticketKey{}).(*ticket).release()
		if got := gate.held(); got != 0 {
			t.Errorf("in flight = %d after a second release, want 0", got)
		}
		if got := gate.abandoned.Load(); got != 1 {
			t.Errorf("abandoned = %d, want 1", got)
		}
	})
}

// TestHandshakeGateHoldsBackTCP: the WebSocket fallback shares the gate.
// With one handshake allowed, a TCP connection that sends nothing holds
// the place, so the next TLS handshake waits (its connection is not even
// accepted); once the silent one closes, the waiting handshake completes,
// and its first request gives the place back.
func TestHandshakeGateHoldsBackTCP(t *testing.T) {
	hubTLS, agentTLS := gateTestTLS(t)
	gate := newHandshakeGate(HandshakeLimits{Max: 1}, discardLogger())
	addr := serveWebSocket(t, hubTLS, netlimit.ServerLimits{}, gate).Addr().String()

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitInFlight(t, gate, 1)

	agentTLS = agentTLS.Clone()
	agentTLS.NextProtos = []string{"http/1.1"}
	handshaken := make(chan *tls.Conn, 1)
	failed := make(chan error, 1)
	go func() {
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: agentTLS}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		c, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			failed <- err
			return
		}
		handshaken <- c.(*tls.Conn)
	}()
	// A window to see the wait: a handshake let through too early
	// completes in milliseconds here.
	select {
	case c := <-handshaken:
		c.Close()
		t.Fatal("a TLS handshake completed while the only place was held")
	case err := <-failed:
		t.Fatalf("TLS dial while the place was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	silent.Close() // its handshake fails: the place is free
	var c *tls.Conn
	select {
	case c = <-handshaken:
	case err := <-failed:
		t.Fatalf("TLS dial after the place was freed: %v", err)
	}
	defer c.Close()
	if got := gate.held(); got != 1 {
		t.Errorf("in flight after the handshake, before its first request = %d, want 1", got)
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: hub\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitInFlight(t, gate, 0)
}

// waitInFlight waits up to 10 s for the gate to hold want handshakes.
func waitInFlight(t *testing.T, gate *handshakeGate, want int) {
	t.Helper()
	waitGate(t, fmt.Sprintf("%d in flight", want), func() bool { return gate.held() == want })
}

// waitGate polls cond for up to 10 s.
func waitGate(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("not %s after 10 s", what)
	}
}

// serveWebSocket serves the fallback on a free loopback port with
// hubTLS's certificate and client CAs, limits and gate, until the test
// ends.
func serveWebSocket(t *testing.T, hubTLS *tls.Config, limits netlimit.ServerLimits, gate *handshakeGate) *webSocketListener {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	cfg := webSocketConfig{addr: "127.0.0.1:0", cert: hubTLS.Certificates[0], clientCAs: hubTLS.ClientCAs, limits: limits}
	ws, err := listenWebSocket(t.Context(), cfg, gate, logger)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); ws.serve(logger) }()
	t.Cleanup(func() { ws.close(); <-served })
	return ws
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The WebSocket server offers HTTP/1.1 only: an HTTP/2 connection would
// hold its handshake place for its whole life.
func TestWebSocketListenerRefusesHTTP2(t *testing.T) {
	hubTLS, agentTLS := gateTestTLS(t)
	ws := serveWebSocket(t, hubTLS, netlimit.ServerLimits{}, newHandshakeGate(HandshakeLimits{Max: 4}, discardLogger()))
	agentTLS = agentTLS.Clone()
	agentTLS.NextProtos = []string{"h2"} // a client that speaks nothing else
	c, err := tls.Dial("tcp", ws.Addr().String(), agentTLS)
	if err != nil {
		return // refused: no protocol in common
	}
	defer c.Close()
	if got := c.ConnectionState().NegotiatedProtocol; got == "h2" {
		t.Errorf("negotiated %q, want no HTTP/2", got)
	}
}
