package agentserver

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/internal/netlimit"
)

// TestWebSocketListenerLimits: the fallback closes a connection beyond
// its source's cap at once, one that never sends a ClientHello after the
// header timeout, and one idle after a request after the idle timeout.
func TestWebSocketListenerLimits(t *testing.T) {
	hubTLS, _ := gateTestTLS(t)
	limits := netlimit.ServerLimits{Limits: netlimit.Limits{MaxConns: 8, MaxConnsPerSource: 2},
		ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}
	ws := serveWebSocket(t, hubTLS, limits, newHandshakeGate(HandshakeLimits{Max: 4}, discardLogger()))
	addr := ws.Addr().String()

	silent := make([]net.Conn, 3)
	dialed := time.Now()
	for i := range silent {
		var err error
		if silent[i], err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		defer silent[i].Close()
	}
	// Each read returns when the hub closes: at once for the third, after
	// the header timeout (no ClientHello) for the others.
	if took := waitClosed(t, silent[2], dialed); took >= limits.ReadHeaderTimeout {
		t.Errorf("the connection beyond its source's cap closed after %v, want at once", took)
	}
	for i, c := range silent[:2] {
		if took := waitClosed(t, c, dialed); took < limits.ReadHeaderTimeout*3/4 {
			t.Errorf("silent connection %d closed after %v, before the header timeout", i, took)
		}
	}
	// The server counts once its Close returns, a moment after ours.
	waitGate(t, "1 refused, 2 timed out, none open", func() bool { return ws.Stats() == netlimit.Stats{Refused: 1, TimedOut: 2} })

	idle, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) // no client certificate, as an attacker
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET / HTTP/1.1\r\nHost: hub\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if took := waitClosed(t, idle, time.Now()); took < limits.IdleTimeout*3/4 {
		t.Errorf("an idle connection closed after %v, before the idle timeout", took)
	}
	waitGate(t, "3 timed out, none open", func() bool { return ws.Stats() == netlimit.Stats{Refused: 1, TimedOut: 3} })
}

// waitClosed reads c until the hub closes it (at most 10 s) and returns
// how long after start that was.
func waitClosed(t *testing.T, c net.Conn, start time.Time) time.Duration {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // the answer to a request
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s still open after 10 s", c.LocalAddr())
		}
		return time.Since(start)
	}
}
