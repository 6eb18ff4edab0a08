package agentserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/quicflood"
	"github.com/flotilla-io/flotilla/transport"
)

// gateStep is one event at the gate: a first packet from addr, as quic-go
// presents it (verifySource, then admit if no Retry is asked), or the end
// of an admitted handshake.
type gateStep struct {
	addr      string
	validated bool // the packet carries a valid Retry token
	end       int  // >0: the handshake admitted at this step (1-based) ends
	want      string
}

// TestHandshakeGateDecisions: which first packets get a Retry, which are
// admitted, which refused, and what each source's count allows.
func TestHandshakeGateDecisions(t *testing.T) {
	v4 := func(i int) string { return fmt.Sprintf("192.0.2.%d:4433", i) }
	for _, tc := range []struct {
		name   string
		limits HandshakeLimits
		steps  []gateStep
	}{
		{"below the threshold no Retry", HandshakeLimits{Max: 8, RetryThreshold: 2, PerSource: 4}, []gateStep{
			{addr: v4(1), want: "admitted"},
			{addr: v4(2), want: "admitted"},
			{addr: v4(3), want: "retry"},
			{addr: v4(3), validated: true, want: "admitted"},
		}},
		{"a handshake that ends gives its place back", HandshakeLimits{Max: 8, RetryThreshold: 1, PerSource: 4}, []gateStep{
			{addr: v4(1), want: "admitted"},
			{addr: v4(2), want: "retry"},
			{end: 1},
			{addr: v4(2), want: "admitted"},
		}},
		{"validated handshakes are capped per source", HandshakeLimits{Max: 8, RetryThreshold: 1, PerSource: 2}, []gateStep{
			{addr: v4(1), validated: true, want: "admitted"},
			{addr: v4(1), validated: true, want: "admitted"},
			{addr: v4(1), validated: true, want: "source busy"},
			{addr: v4(2), validated: true, want: "admitted"},
			{end: 1},
			{addr: v4(1), validated: true, want: "admitted"},
		}},
		{"one IPv6 /64 is one source", HandshakeLimits{Max: 8, RetryThreshold: 1, PerSource: 1}, []gateStep{
			{addr: "[2001:db8:1:2::1]:443", validated: true, want: "admitted"},
			{addr: "[2001:db8:1:2::ffff]:443", validated: true, want: "source busy"},
			{addr: "[2001:db8:1:3::1]:443", validated: true, want: "admitted"},
		}},
		{"an unvalidated source beyond its share gets a Retry below the threshold", HandshakeLimits{Max: 8, RetryThreshold: 8, PerSource: 2}, []gateStep{
			{addr: v4(1), want: "admitted"},
			{addr: v4(1), want: "admitted"},
			{addr: v4(1), want: "retry"},
			{addr: v4(2), want: "admitted"},
		}},
		{"spoofed packets from a victim's address leave it its validated share", HandshakeLimits{Max: 8, RetryThreshold: 8, PerSource: 2}, []gateStep{
			{addr: v4(9), want: "admitted"},
			{addr: v4(9), want: "admitted"},
			{addr: v4(9), want: "retry"},
			{addr: v4(9), validated: true, want: "admitted"},
			{addr: v4(9), validated: true, want: "admitted"},
		}},
		{"at the limit even validated ones are refused", HandshakeLimits{Max: 2, RetryThreshold: 1, PerSource: 4}, []gateStep{
			{addr: v4(1), want: "admitted"},
			{addr: v4(2), validated: true, want: "admitted"},
			{addr: v4(3), validated: true, want: "hub busy"},
			{addr: v4(4), want: "retry"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runGateSteps(t, newHandshakeGate(tc.limits, discardLogger()), tc.steps)
		})
	}
}

func runGateSteps(t *testing.T, gate *handshakeGate, steps []gateStep) {
	t.Helper()
	admitted := map[int]*ticket{}
	retries := 0
	for i, s := range steps {
		if s.end > 0 {
			admitted[s.end].abandon()
			continue
		}
		addr, err := net.ResolveUDPAddr("udp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		got := "retry"
		if s.validated || !gate.verifySource(addr) {
			got = admitOutcome(t, gate, &quic.ClientInfo{RemoteAddr: addr, AddrVerified: s.validated}, admitted, i+1)
		} else {
			retries++
		}
		if got != s.want {
			t.Errorf("step %d (%s, validated %v): %s, want %s", i+1, s.addr, s.validated, got, s.want)
		}
	}
	if got := gate.retries.Load(); got != int64(retries) {
		t.Errorf("retries counted %d, want %d", got, retries)
	}
}

// admitOutcome admits info at the gate and names the outcome; the ticket
// of an admitted handshake is kept under step.
func admitOutcome(t *testing.T, gate *handshakeGate, info *quic.ClientInfo, admitted map[int]*ticket, step int) string {
	t.Helper()
	ctx, err := gate.admit(t.Context(), info)
	switch {
	case err == nil:
		admitted[step] = ctx.Value(ticketKey{}).(*ticket)
		return "admitted"
	case errors.Is(err, errHubBusy):
		return "hub busy"
	case errors.Is(err, errSourceBusy):
		return "source busy"
	}
	return err.Error()
}

// TestSpoofedInitialsHoldAtMostTheThreshold: Initial packets from many
// addresses that never answer fill the gate only up to the Retry
// threshold; an agent that answers the Retry gets in at once, with its
// address validated.
func TestSpoofedInitialsHoldAtMostTheThreshold(t *testing.T) {
	hubTLS, agentTLS := gateTestTLS(t)
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	gate := newHandshakeGate(HandshakeLimits{Max: 16, RetryThreshold: 4, PerSource: 4}, discardLogger())
	tr := &quic.Transport{Conn: udp, ConnContext: gate.admit, VerifySourceAddress: gate.verifySource}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	conf := protocol.QUICConfig()
	conf.HandshakeIdleTimeout = time.Minute // the flood holds its places for the whole test
	ln, err := tr.Listen(hubTLS, conf)
	if err != nil {
		t.Fatal(err)
	}
	const flood = 40
	spoofed := func(i int) net.IP { return net.IPv4(127, 1, byte(i/250), byte(1+i%250)) }
	if _, err := quicflood.Send(t.Context(), udp.LocalAddr().String(), flood, spoofed, protocol.ALPN); err != nil {
		t.Fatal(err)
	}
	waitGate(t, "4 in flight and the rest asked for a Retry", func() bool { return gate.held() == 4 && gate.retries.Load() == flood-4 })

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, udp.LocalAddr().String(), agentTLS, protocol.QUICConfig())
	if err != nil {
		t.Fatalf("an agent's dial while %d spoofed Initials wait: %v", flood, err)
	}
	defer conn.CloseWithError(0, "")
	if _, err := (gatedListener{transport.QUICListener{Listener: ln}}).Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gate.refused.Load() + gate.sourceLimited.Load(); got != 0 {
		t.Errorf("%d first packets refused, want none: the flood holds only the threshold's places", got)
	}
	if got := gate.held(); got != 4 {
		t.Errorf("in flight after the agent was accepted = %d, want the flood's 4", got)
	}
	if got := gate.retries.Load(); got <= flood-4 {
		t.Errorf("%d Retries, want more than the flood's %d: the agent's dial should have answered one", got, flood-4)
	}
}
