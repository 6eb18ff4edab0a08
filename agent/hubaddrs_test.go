package agent

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// TestDialAnyMovesToALiveReplica: with the replica of the last session
// dead (a socket that answers nothing), a dial reaches the next one after
// the stagger, not after QUIC's timeouts, and prefers it from then on.
func TestDialAnyMovesToALiveReplica(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	p := newTestPKI(t)
	live := startTestHub(t, p.hubTLS(t), nil)
	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	clientTLS := protocol.ClientTLSConfig(p.tlsCertificate(t, pki.Request{CommonName: "cluster:edge-1", Usage: pki.ClientAuth}), p.pool, "127.0.0.1")
	a := &Agent{cfg: Config{Hub: dead.LocalAddr().String() + ", " + live.addr()}}

	start := time.Now()
	conn, release, err := a.dialAny(t.Context(), transport.QUIC, clientTLS, func(err error) error { return err }, 0)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	took := time.Since(start)
	conn.CloseWithError(protocol.CloseNormal, "")
	release()
	t.Logf("connected to the live replica after %v", took)
	if took < hubStagger || took > hubStagger+2*time.Second {
		t.Errorf("connected after %v; want the stagger (%v) and a handshake", took, hubStagger)
	}
	if diff := cmp.Diff([]string{live.addr(), dead.LocalAddr().String()}, a.hubAddrs(transport.QUIC)); diff != "" {
		t.Errorf("order of the next dial (-want +got):\n%s", diff)
	}
	if got := a.lastHubAddr(transport.QUIC); got != live.addr() {
		t.Errorf("last hub %q, want %q", got, live.addr())
	}
}

// TestDialAnyReportsEveryFailure: when no replica answers, the error names
// each one.
func TestDialAnyReportsEveryFailure(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	p := newTestPKI(t)
	var addrs []string
	for range 2 {
		silent, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		addrs = append(addrs, silent.LocalAddr().String())
	}
	clientTLS := protocol.ClientTLSConfig(p.tlsCertificate(t, pki.Request{CommonName: "cluster:edge-1", Usage: pki.ClientAuth}), p.pool, "127.0.0.1")
	a := &Agent{cfg: Config{Hub: addrs[0] + "," + addrs[1]}}
	_, _, err := a.dialAny(t.Context(), transport.QUIC, clientTLS, func(err error) error { return err }, 200*time.Millisecond)
	if err == nil {
		t.Fatal("dial succeeded")
	}
	for _, addr := range addrs {
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("error %q does not name %s", err, addr)
		}
	}
	if !unanswered(t.Context(), err) {
		t.Errorf("no replica answered, but the error does not say so: %v", err)
	}
}
