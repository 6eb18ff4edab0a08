package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// testHub is a TLS server with a WebSocketServer, on loopback.
type testHub struct {
	addr   string
	server *WebSocketServer
	pool   *x509.CertPool
	ca     *pki.CA
}

func startHub(t testing.TB) *testHub {
	t.Helper()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving := issue(t, ca, pki.Request{CommonName: "hub", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.ServerAuth, ValidFor: time.Hour})
	serving.Certificate = append(serving.Certificate, ca.Cert.Raw)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ws := NewWebSocketServer(ctx, protocol.ALPN, protocol.JoinALPN)
	srv := &http.Server{Handler: ws, TLSConfig: protocol.ServerWebSocketTLSConfig(serving, pool), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { cancel(); srv.Close(); <-done })
	return &testHub{addr: ln.Addr().String(), server: ws, pool: pool, ca: ca}
}

func issue(t testing.TB, ca *pki.CA, req pki.Request) tls.Certificate {
	t.Helper()
	kp, err := ca.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func (h *testHub) agentTLS(t testing.TB, cluster string) *tls.Config {
	t.Helper()
	cert := issue(t, h.ca, pki.Request{CommonName: protocol.ClusterCommonName(cluster), Usage: pki.ClientAuth, ValidFor: time.Hour})
	return protocol.ClientTLSConfig(cert, h.pool, "127.0.0.1")
}

// connect dials the hub and returns both ends.
func (h *testHub) connect(t testing.TB, conf *tls.Config) (agent, hub Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	accepted := make(chan Conn, 1)
	go func() {
		c, err := h.server.Accept(ctx)
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	agent, err := DialWebSocket(ctx, h.addr, conf)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	hub, ok := <-accepted
	if !ok {
		t.Fatal("the hub accepted no connection")
	}
	t.Cleanup(func() {
		_ = agent.CloseWithError(protocol.CloseNormal, "test done")
		_ = hub.CloseWithError(protocol.CloseNormal, "test done")
	})
	return agent, hub
}

func TestWebSocketSession(t *testing.T) {
	h := startHub(t)
	agent, hub := h.connect(t, h.agentTLS(t, "edge-1"))

	if got, err := protocol.ClusterFromConnectionState(hub.TLS()); err != nil || got != "edge-1" {
		t.Fatalf("hub side: cluster %q, %v; want edge-1", got, err)
	}
	if agent.TLS().NegotiatedProtocol != protocol.ALPN || len(agent.TLS().PeerCertificates) == 0 {
		t.Errorf("agent side TLS: protocol %q, %d peer certificates", agent.TLS().NegotiatedProtocol, len(agent.TLS().PeerCertificates))
	}
	if agent.Kind() != WebSocket || agent.Datagrams() || hub.Datagrams() {
		t.Errorf("kind %v, datagrams %v/%v; want websocket without datagrams", agent.Kind(), agent.Datagrams(), hub.Datagrams())
	}
	if err := agent.SendDatagram([]byte("x")); !errors.Is(err, errNoDatagrams) {
		t.Errorf("SendDatagram: %v, want %v", err, errNoDatagrams)
	}

	// Two streams, each a request and an answer, the agent's side closed
	// after its request as the join stream does.
	for _, text := range []string{"first", "second"} {
		str, err := agent.OpenStreamSync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := str.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
		str.Close()
		in, err := hub.AcceptStream(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(in)
		if err != nil || string(got) != text {
			t.Fatalf("hub read %q, %v; want %q", got, err, text)
		}
		if _, err := in.Write([]byte("re: " + text)); err != nil {
			t.Fatal(err)
		}
		in.Close()
		answer, err := io.ReadAll(str)
		if err != nil || string(answer) != "re: "+text {
			t.Fatalf("agent read %q, %v", answer, err)
		}
	}
	if agent.PacketsReceived() == 0 {
		t.Error("no reads counted on the agent side")
	}
}

func TestWebSocketCloseCarriesCodeAndReason(t *testing.T) {
	h := startHub(t)
	agent, hub := h.connect(t, h.agentTLS(t, "edge-1"))
	str, err := agent.OpenStreamSync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := str.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := hub.AcceptStream(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := hub.CloseWithError(protocol.CloseUnauthorized, "certificate superseded"); err != nil {
		t.Errorf("close: %v", err)
	}
	_, err = str.Read(make([]byte, 10))
	var ce *ClosedError
	if !errors.As(err, &ce) {
		t.Fatalf("read after the hub closed: %v, want a ClosedError", err)
	}
	want := ClosedError{Code: protocol.CloseUnauthorized, Reason: "certificate superseded", Remote: true}
	if diff := cmp.Diff(want, *ce); diff != "" {
		t.Errorf("the agent saw (-want +got):\n%s", diff)
	}
	select {
	case <-agent.Context().Done():
	case <-time.After(10 * time.Second):
		t.Error("the agent's connection context did not end")
	}
	if _, err := hub.AcceptStream(t.Context()); !errors.As(err, &ce) || ce.Remote {
		t.Errorf("accept on the closed hub side: %v, want a local ClosedError", err)
	}
}

func TestWebSocketCancelReadUnblocks(t *testing.T) {
	h := startHub(t)
	agent, _ := h.connect(t, h.agentTLS(t, "edge-1"))
	str, err := agent.OpenStreamSync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := str.Read(make([]byte, 1)); read <- err }()
	str.CancelRead()
	select {
	case err := <-read:
		if err == nil {
			t.Error("read returned no error after CancelRead")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CancelRead did not unblock a read")
	}
}

func TestWebSocketJoinWithoutCertificate(t *testing.T) {
	h := startHub(t)
	agent, hub := h.connect(t, protocol.JoinTLSConfig(pki.Pin(h.ca.Cert)))
	if hub.TLS().NegotiatedProtocol != protocol.JoinALPN || agent.TLS().NegotiatedProtocol != protocol.JoinALPN {
		t.Errorf("protocols hub %q, agent %q; want %q", hub.TLS().NegotiatedProtocol, agent.TLS().NegotiatedProtocol, protocol.JoinALPN)
	}
	if _, err := protocol.ClusterFromConnectionState(hub.TLS()); err == nil {
		t.Error("a join connection proved a cluster identity")
	}
}

func TestWebSocketRefusals(t *testing.T) {
	h := startHub(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// A session without a client certificate is let through TLS (a join
	// needs none) but proves no identity.
	noCert := protocol.ClientTLSConfig(tls.Certificate{}, h.pool, "127.0.0.1")
	noCert.Certificates = nil
	_, hub := h.connect(t, noCert)
	if _, err := protocol.ClusterFromConnectionState(hub.TLS()); err == nil {
		t.Error("a session without a certificate proved a cluster identity")
	}
	// The wrong pin fails the TLS handshake.
	other, err := pki.NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DialWebSocket(ctx, h.addr, protocol.JoinTLSConfig(pki.Pin(other.Cert))); !errors.Is(err, protocol.ErrPeerIdentity) {
		t.Errorf("join with the wrong pin: %v, want %v", err, protocol.ErrPeerIdentity)
	}
	// A plain HTTPS request is answered, not upgraded.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.pool}}}
	resp, err := client.Get("https://" + h.addr + WebSocketPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Errorf("plain GET: %s, want a 4xx", resp.Status)
	}
}

// freezer is a TCP relay that can stop forwarding: a peer that is gone
// without closing anything.
type freezer struct {
	addr   string
	frozen chan struct{}
}

func startFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{addr: ln.Addr().String(), frozen: make(chan struct{})}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				return
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go f.copy(out, in)
			go f.copy(in, out)
		}
	}()
	return f
}

// copy forwards until the freeze, then reads and drops.
func (f *freezer) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-f.frozen:
			continue
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// TestWebSocketCloseDoesNotWaitForAGonePeer: closing a connection whose
// peer no longer answers takes about closeHandshakeTimeout, not the
// WebSocket library's ten seconds.
func TestWebSocketCloseDoesNotWaitForAGonePeer(t *testing.T) {
	h := startHub(t)
	relay := startFreezer(t, h.addr)
	direct := h.addr
	h.addr = relay.addr
	_, hub := h.connect(t, h.agentTLS(t, "edge-1"))
	h.addr = direct
	close(relay.frozen)
	start := time.Now()
	_ = hub.CloseWithError(protocol.CloseGoingAway, "hub shutting down")
	if took := time.Since(start); took > closeHandshakeTimeout+time.Second {
		t.Errorf("closing took %v, want about %v", took, closeHandshakeTimeout)
	}
	select {
	case <-hub.Context().Done():
	default:
		t.Error("the connection's context did not end")
	}
}

// The hub's close code must reach the agent also while the agent is
// writing: a write can fail on the closed connection before the reader
// has returned the hub's close frame.
func TestWebSocketCloseCodeWhileWriting(t *testing.T) {
	h := startHub(t)
	agent, hub := h.connect(t, h.agentTLS(t, "edge-1"))
	writing := make(chan error, 1)
	go func() {
		for {
			str, err := agent.OpenStreamSync(t.Context())
			if err == nil {
				_, err = str.Write([]byte("x"))
			}
			if err != nil {
				writing <- err
				return
			}
		}
	}()
	if _, err := hub.AcceptStream(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := hub.CloseWithError(protocol.CloseProtocolError, "too many streams"); err != nil {
		t.Errorf("close: %v", err)
	}
	for name, err := range map[string]error{"write": <-writing, "accept": func() error { _, err := agent.AcceptStream(t.Context()); return err }()} {
		var ce *ClosedError
		if !errors.As(err, &ce) || ce.Code != protocol.CloseProtocolError || !ce.Remote {
			t.Errorf("%s after the hub closed: %v, want the hub's code %d", name, err, protocol.CloseProtocolError)
		}
	}
}

// A session that ends on this side (yamux's keep-alive timeout or a
// protocol error closes it) is reported as closed here, not by the peer.
func TestWebSocketLocalEndIsNotThePeers(t *testing.T) {
	h := startHub(t)
	for range 10 {
		agent, _ := h.connect(t, h.agentTLS(t, "edge-1"))
		agent.(*wsConn).mux.Close()
		_, err := agent.AcceptStream(t.Context())
		var ce *ClosedError
		if !errors.As(err, &ce) || ce.Remote {
			t.Fatalf("accept after this side's session ended: %v, want a local ClosedError", err)
		}
	}
}
