package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

func TestTransportChooserOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	quicFirst := []transport.Kind{transport.QUIC, transport.WebSocket}
	wsFirst := []transport.Kind{transport.WebSocket, transport.QUIC}
	tests := []struct {
		name  string
		mode  string
		steps func(c *transportChooser)
		at    time.Time
		want  []transport.Kind
	}{
		{name: "auto prefers QUIC", mode: TransportAuto, at: t0, want: quicFirst},
		{name: "quic only", mode: TransportQUIC, at: t0, want: []transport.Kind{transport.QUIC}},
		{name: "websocket only", mode: TransportWebSocket, at: t0, want: []transport.Kind{transport.WebSocket}},
		{name: "QUIC unanswered: straight to the fallback within the retry interval", mode: TransportAuto,
			steps: func(c *transportChooser) { c.connected(transport.WebSocket, []transport.Kind{transport.QUIC}, t0) },
			at:    t0.Add(59 * time.Second), want: wsFirst},
		{name: "QUIC unanswered: QUIC first again after the retry interval", mode: TransportAuto,
			steps: func(c *transportChooser) { c.connected(transport.WebSocket, []transport.Kind{transport.QUIC}, t0) },
			at:    t0.Add(time.Minute), want: quicFirst},
		{name: "QUIC connected again", mode: TransportAuto,
			steps: func(c *transportChooser) {
				c.connected(transport.WebSocket, []transport.Kind{transport.QUIC}, t0)
				c.connected(transport.QUIC, nil, t0.Add(time.Second))
			},
			at: t0.Add(2 * time.Second), want: quicFirst},
		{name: "the fallback connected first time: nothing learnt", mode: TransportAuto,
			steps: func(c *transportChooser) { c.connected(transport.WebSocket, nil, t0) },
			at:    t0.Add(time.Second), want: quicFirst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &transportChooser{mode: tt.mode, retry: time.Minute}
			if tt.steps != nil {
				tt.steps(c)
			}
			if diff := cmp.Diff(tt.want, c.order(tt.at)); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnanswered(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{name: "dial timed out", err: fmt.Errorf("dial: %w", context.DeadlineExceeded), want: true},
		{name: "QUIC handshake timeout", err: &quic.HandshakeTimeoutError{}, want: true},
		{name: "QUIC idle timeout", err: &quic.IdleTimeoutError{}, want: true},
		{name: "ICMP unreachable", err: &net.OpError{Op: "read", Net: "udp", Err: os.ErrDeadlineExceeded}, want: true},
		{name: "TCP refused", err: fmt.Errorf("dial tcp: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), want: true},
		{name: "the hub's TLS alert", err: &quic.TransportError{ErrorCode: quic.TransportErrorCode(0x100 + 42), Remote: true}, want: false},
		{name: "our TLS check failed", err: &quic.TransportError{ErrorCode: quic.TransportErrorCode(0x100 + 48)}, want: false},
		{name: "the hub closed the connection", err: &quic.ApplicationError{ErrorCode: protocol.CloseUnauthorized, Remote: true}, want: false},
		{name: "the hub closed the WebSocket", err: &transport.ClosedError{Code: protocol.CloseUnauthorized, Remote: true}, want: false},
		{name: "an HTTP answer", err: &transport.AnsweredError{Status: "404 Not Found", Err: errors.New("no upgrade")}, want: false},
		{name: "unknown CA over TCP", err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, want: false},
		{name: "wrong pin", err: fmt.Errorf("join: %w", protocol.ErrPeerIdentity), want: false},
		{name: "the agent stops", ctx: canceled, err: context.Canceled, want: false},
		// A race of dials joins their errors, in the order they failed.
		{name: "raced: a timeout, then the hub's close", err: errors.Join(&quic.IdleTimeoutError{}, &quic.ApplicationError{Remote: true}), want: false},
		{name: "raced: a local QUIC error, then the hub's alert", err: errors.Join(&quic.TransportError{ErrorCode: quic.ConnectionRefused}, &quic.TransportError{ErrorCode: quic.TransportErrorCode(0x100 + 42), Remote: true}), want: false},
		{name: "raced: both timed out", err: errors.Join(&quic.HandshakeTimeoutError{}, fmt.Errorf("dial: %w", context.DeadlineExceeded)), want: true},
	}
	for _, tt := range tests {
		ctx := tt.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		if got := unanswered(ctx, tt.err); got != tt.want {
			t.Errorf("%s: unanswered(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
