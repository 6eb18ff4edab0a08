package protocol

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/internal/pki"
)

// TLS alert numbers (RFC 8446), which QUIC reports as 0x100 + alert.
const (
	alertUnknownCA             = 48
	alertNoApplicationProtocol = 120
)

func listenHub(t *testing.T, p *testPKI) *quic.Listener {
	t.Helper()
	// quic-go logs once if it cannot get large UDP buffers; irrelevant here.
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	ln, err := quic.ListenAddr("127.0.0.1:0", ServerTLSConfig(p.issue(t, "hub", pki.ServerAuth), p.pool), QUICConfig())
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

type hubResult struct {
	conn *quic.Conn
	err  error
	saw  hubSaw
}

// hubSaw is what the hub learned from the agent.
type hubSaw struct {
	Cluster string
	Kind    StreamKind
	Hello   Message
}

// serveHello plays the hub for one connection: accept, identify the cluster,
// read the control stream's kind and Hello, answer with welcome. On failure it
// closes the connection so the client's read does not hang.
func serveHello(ctx context.Context, ln *quic.Listener, welcome *Welcome) hubResult {
	res := handleHello(ctx, ln, welcome)
	if res.err != nil && res.conn != nil {
		res.conn.CloseWithError(1, res.err.Error())
	}
	return res
}

func handleHello(ctx context.Context, ln *quic.Listener, welcome *Welcome) (res hubResult) {
	conn, err := ln.Accept(ctx)
	if err != nil {
		return hubResult{err: fmt.Errorf("accept: %w", err)}
	}
	res.conn = conn
	if res.saw.Cluster, res.err = ClusterFromConnectionState(conn.ConnectionState().TLS); res.err != nil {
		return res
	}
	str, err := conn.AcceptStream(ctx)
	if err != nil {
		res.err = fmt.Errorf("accept stream: %w", err)
		return res
	}
	if res.saw.Kind, res.err = ReadStreamKind(str); res.err != nil {
		return res
	}
	if res.saw.Hello, res.err = NewReader(str, 0).ReadMessage(); res.err != nil {
		return res
	}
	res.err = WriteMessage(str, welcome)
	return res
}

func TestQUICControlStream(t *testing.T) {
	p := newTestPKI(t)
	ln := listenHub(t, p)
	welcome := &Welcome{ProtocolVersion: Version, HubID: "hub-0", HubTime: time.Now().UTC(),
		LeaseDurationSeconds: 40, RenewIntervalMillis: 10000}
	hubDone := make(chan hubResult, 1)
	go func() { hubDone <- serveHello(t.Context(), ln, welcome) }()

	clientCfg := ClientTLSConfig(p.issue(t, ClusterCommonName("member-1"), pki.ClientAuth), p.pool, hubServerName)
	conn, err := quic.DialAddr(t.Context(), ln.Addr().String(), clientCfg, QUICConfig())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "test done") })
	str, err := conn.OpenStreamSync(t.Context())
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	hello := &Hello{ProtocolVersion: Version, ClusterName: "member-1", AgentVersion: "test"}
	if err := WriteStreamKind(str, StreamControl); err != nil {
		t.Fatal(err)
	}
	if err := WriteMessage(str, hello); err != nil {
		t.Fatal(err)
	}
	got, err := NewReader(str, 0).ReadMessage()
	if err != nil {
		conn.CloseWithError(1, "no welcome") // unblocks the hub if it still waits
		t.Fatalf("read welcome: %v (hub: %v)", err, (<-hubDone).err)
	}

	res := <-hubDone
	if res.conn != nil {
		t.Cleanup(func() { res.conn.CloseWithError(0, "test done") })
	}
	if res.err != nil {
		t.Fatalf("hub: %v", res.err)
	}
	if diff := cmp.Diff(welcome, got); diff != "" {
		t.Errorf("welcome (-sent +received):\n%s", diff)
	}
	if diff := cmp.Diff(hubSaw{Cluster: "member-1", Kind: StreamControl, Hello: hello}, res.saw); diff != "" {
		t.Errorf("hub saw (-want +got):\n%s", diff)
	}
}

func TestQUICWrongALPN(t *testing.T) {
	p := newTestPKI(t)
	ln := listenHub(t, p)
	clientCfg := ClientTLSConfig(p.issue(t, ClusterCommonName("member-1"), pki.ClientAuth), p.pool, hubServerName)
	clientCfg.NextProtos = []string{"flotilla/0"}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), clientCfg, QUICConfig())
	if err == nil {
		conn.CloseWithError(0, "")
		t.Fatal("dial with the wrong ALPN succeeded")
	}
	checkTLSAlert(t, err, alertNoApplicationProtocol)
}

// With TLS 1.3 the client finishes its side of the handshake before the hub
// checks the client certificate, so the rejection only shows on the first
// read. This is why the agent waits for Welcome before counting as connected.
func TestQUICUntrustedClientCertificate(t *testing.T) {
	p := newTestPKI(t)
	ln := listenHub(t, p)
	stranger := newTestPKI(t)
	clientCfg := ClientTLSConfig(stranger.issue(t, ClusterCommonName("member-1"), pki.ClientAuth), p.pool, hubServerName)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), clientCfg, QUICConfig())
	if err != nil {
		t.Logf("dial failed: %v", err)
		checkTLSAlert(t, err, alertUnknownCA)
		return
	}
	defer conn.CloseWithError(0, "")
	str, err := conn.OpenStreamSync(ctx)
	if err == nil {
		if err = WriteStreamKind(str, StreamControl); err == nil {
			_, err = NewReader(str, 0).ReadMessage()
		}
	}
	if err == nil {
		t.Fatal("hub accepted a certificate from another CA")
	}
	checkTLSAlert(t, err, alertUnknownCA)
}

func checkTLSAlert(t *testing.T, err error, alert uint8) {
	t.Helper()
	var te *quic.TransportError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a QUIC transport error", err, err)
	}
	if want := quic.TransportErrorCode(0x100 + uint64(alert)); te.ErrorCode != want {
		t.Errorf("error code %v, want %v (%v)", te.ErrorCode, want, tls.AlertError(alert))
	}
}
