package agent

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// oneAnswerRelay forwards a client's UDP to target and only the first
// datagram back: the hub answered, and the handshake then stalls, as on
// a hub too busy to finish it.
func oneAnswerRelay(t *testing.T, target string) string {
	t.Helper()
	front, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.Dial("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close(); back.Close() })
	client := make(chan net.Addr, 1)
	go func() {
		buf := make([]byte, 2048)
		first := true
		for {
			n, from, err := front.ReadFrom(buf)
			if err != nil {
				return
			}
			if first {
				client <- from
				first = false
			}
			if _, err := back.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		n, err := back.Read(buf)
		if err != nil {
			return
		}
		select {
		case to := <-client:
			_, _ = front.WriteTo(buf[:n], to)
		case <-time.After(5 * time.Second):
		}
	}()
	return front.LocalAddr().String()
}

// TestDialQUICGivesUpOnlyOnSilence: a QUIC dial with silentFor gives up
// after it when nothing came back (UDP blocked), but not when the hub
// answered and is slow to finish the handshake.
func TestDialQUICGivesUpOnlyOnSilence(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil)
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	clientTLS := protocol.ClientTLSConfig(p.tlsCertificate(t, pki.Request{CommonName: "cluster:edge-1", Usage: pki.ClientAuth}), p.pool, "127.0.0.1")
	const silentFor = 300 * time.Millisecond
	tests := []struct {
		name        string
		hub         string
		wait        time.Duration // the caller's own limit
		wantSilence bool          // the error says nothing came back
		minTook     time.Duration
	}{
		{name: "nothing comes back", hub: silent.LocalAddr().String(), wait: 10 * time.Second, wantSilence: true},
		{name: "the hub answered, then stalls", hub: oneAnswerRelay(t, hub.addr()), wait: 2 * time.Second, minTook: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Agent{cfg: Config{Hub: tt.hub}}
			ctx, cancel := context.WithTimeout(t.Context(), tt.wait)
			defer cancel()
			start := time.Now()
			conn, release, err := a.dialQUIC(ctx, tt.hub, clientTLS, func(err error) error { return err }, silentFor)
			took := time.Since(start)
			if err == nil {
				conn.CloseWithError(0, "")
				release()
				t.Fatal("dial succeeded")
			}
			if got := strings.Contains(err.Error(), "no answer over QUIC within"); got != tt.wantSilence {
				t.Errorf("error %q; want it to say nothing came back: %v", err, tt.wantSilence)
			}
			if tt.wantSilence && (took < silentFor || took > tt.wait/2) {
				t.Errorf("gave up after %v, want about %v", took, silentFor)
			}
			if took < tt.minTook-50*time.Millisecond {
				t.Errorf("gave up after %v, want the caller's %v: the hub had answered", took, tt.minTook)
			}
			if !tt.wantSilence && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want the caller's deadline", err)
			}
		})
	}
}
