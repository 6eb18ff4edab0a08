package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"

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

// TestDialQUICRacesTheAddressesOfOneName: hub replicas behind one name
// that resolves to several addresses are raced like a list, so a dead
// first address costs the stagger, and the error of a failed dial names
// every address.
func TestDialQUICRacesTheAddressesOfOneName(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	p := newTestPKI(t)
	live := startTestHub(t, p.hubTLS(t), nil)
	port := silentTwin(t, live.addr())
	resolved := []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")}
	a := &Agent{lookupIP: func(_ context.Context, _, host string) ([]netip.Addr, error) {
		if host != "localhost" {
			return nil, fmt.Errorf("no such host %q", host)
		}
		return resolved, nil
	}}
	clientTLS := protocol.ClientTLSConfig(p.tlsCertificate(t, pki.Request{CommonName: "cluster:edge-1", Usage: pki.ClientAuth}), p.pool, "localhost")
	explain := func(err error) error { return err }

	start := time.Now()
	conn, release, err := a.dialQUIC(t.Context(), "localhost:"+port, clientTLS, explain, 0)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	took := time.Since(start)
	if got := conn.RemoteAddr().String(); got != live.addr() {
		t.Errorf("connected to %s, want the live address %s", got, live.addr())
	}
	conn.CloseWithError(0, "")
	release()
	t.Logf("connected to the second address after %v", took)
	if took < hubStagger || took > hubStagger+2*time.Second {
		t.Errorf("connected after %v; want the stagger (%v) and a handshake", took, hubStagger)
	}

	resolved = resolved[:2] // IPv6 loopback and the dead one: no answer
	_, _, err = a.dialQUIC(t.Context(), "localhost:"+port, clientTLS, explain, 200*time.Millisecond)
	if err == nil {
		t.Fatal("dial succeeded with no live address")
	}
	for _, addr := range []string{"127.0.0.2:" + port, "[::1]:" + port} {
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("error %q does not name %s", err, addr)
		}
	}
}

// IPv4 first, each family in the resolver's order.
func TestResolveUDPOrder(t *testing.T) {
	lookup := func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("::ffff:192.0.2.1"), netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("192.0.2.1")}, nil
	}
	addrs, err := resolveUDP(t.Context(), "hub.example:7443", lookup)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range addrs {
		got = append(got, a.String())
	}
	want := []string{"192.0.2.2:7443", "192.0.2.1:7443", "[2001:db8::1]:7443", "[2001:db8::2]:7443"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

// A hub reached over IPv6 gets a dial from an IPv6 socket.
func TestDialQUICReachesAnIPv6Hub(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	p := newTestPKI(t)
	ln, err := quic.ListenAddr("[::1]:0", p.hubTLS(t), protocol.QUICConfig())
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			if _, err := ln.Accept(context.Background()); err != nil {
				return
			}
		}
	}()
	a := &Agent{lookupIP: func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("::1")}, nil
	}}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	clientTLS := protocol.ClientTLSConfig(p.tlsCertificate(t, pki.Request{CommonName: "cluster:edge-1", Usage: pki.ClientAuth}), p.pool, "localhost")
	conn, release, err := a.dialQUIC(t.Context(), "localhost:"+port, clientTLS, func(err error) error { return err }, 0)
	if err != nil {
		t.Fatalf("dial over IPv6: %v", err)
	}
	conn.CloseWithError(0, "")
	release()
}

// An address whose hub refuses the dial as busy ends the race: the other
// addresses of the name may be the same hub, refusing as well.
func TestDialQUICStopsAtABusyAddress(t *testing.T) {
	p := newTestPKI(t)
	busy := startTestHub(t, p.hubTLS(t), nil, func(h *testHub) {
		h.admit = func(context.Context, *quic.ClientInfo) (context.Context, error) {
			return nil, errors.New("too many handshakes in flight")
		}
	})
	port := silentTwin(t, busy.addr())
	a := &Agent{lookupIP: func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}, nil
	}}
	clientTLS := protocol.ClientTLSConfig(p.tlsCertificate(t, pki.Request{CommonName: "cluster:edge-1", Usage: pki.ClientAuth}), p.pool, "localhost")
	start := time.Now()
	_, _, err := a.dialQUIC(t.Context(), "localhost:"+port, clientTLS, func(err error) error { return err }, 5*time.Second)
	took := time.Since(start)
	if !HubBusy(err) {
		t.Fatalf("dial: %v, want the hub busy", err)
	}
	// The silent address would hold the race for its 5 s.
	if took > 2*time.Second {
		t.Errorf("the busy refusal was returned after %v, want at once", took)
	}
}

// silentTwin opens a UDP socket that answers nothing on 127.0.0.2 and
// hubAddr's port (a dead replica under the same name as the hub at
// hubAddr, 127.0.0.1), until the test ends; it returns the port.
func silentTwin(t *testing.T, hubAddr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(hubAddr)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.2", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	return port
}
