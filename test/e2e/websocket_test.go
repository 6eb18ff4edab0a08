package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// TestWebSocketTransport: an agent told to use the WebSocket
// (--transport=websocket) holds its session over TLS on TCP beside an
// agent on QUIC; its SIGKILL is detected as on QUIC (Unknown with
// unreachable:NoSchedule one grace period after its last renewal); and an
// agent that opens more streams than QUIC would let it is cut off over
// the WebSocket too, the other cluster untouched.
func TestWebSocketTransport(t *testing.T) {
	f := startFleet(t, 2)
	h := f.hub
	if err := f.agents["member-2"].Stop(); err != nil {
		t.Fatal(err)
	}
	c := f.env.Cluster("member-2")
	certDir := filepath.Join(filepath.Dir(h.dataDir), "certs-member-2")
	ws := runAgent(t, "member-2-websocket", filepath.Join(filepath.Dir(h.dataDir), "agent-member-2-websocket.log"),
		"--hub="+h.quicAddr, "--transport=websocket", "--cluster-name=member-2", "--kubeconfig="+c.Kubeconfig,
		"--cert-dir="+certDir, "--lease-duration="+testLeaseDuration.String(), "--status-interval=500ms")
	waitFor(t, 30*time.Second, "member-2 on the WebSocket, member-1 on QUIC", func() (bool, string) {
		m := h.metrics(t)
		return strings.Contains(m, "flotilla_connected_agents 2\n") && strings.Contains(m, "flotilla_connected_agents_websocket 1\n"),
			grepMetrics(m, "flotilla_connected_agents", "flotilla_connected_agents_websocket")
	})
	waitReady(t, h, "member-2", 30*time.Second)

	t.Run("a killed agent on the WebSocket is detected on time", func(t *testing.T) {
		killed := time.Now()
		if err := ws.Kill(); err != nil {
			t.Fatal(err)
		}
		var unknownAt time.Time
		waitFor(t, testGrace+10*time.Second, "member-2 Unknown with unreachable:NoSchedule", func() (bool, string) {
			cl := h.cluster(t, "member-2")
			if cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ClusterConditionReady); cond != nil {
				unknownAt = cond.LastTransitionTime.Time
			}
			return readyOf(cl) == metav1.ConditionUnknown && hasTaint(cl, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule), describe(cl)
		})
		// The last renewal went at most a renew interval (a quarter lease)
		// before the kill; Unknown comes one grace period after it. The
		// upper bound leaves 2 s for a loaded machine (race detector, three
		// API servers on two cores), as the hub-replica tests do: detection a
		// grace period late would still fail.
		after := unknownAt.Sub(killed)
		if after < testGrace-testLeaseDuration/4-time.Second || after > testGrace+2*time.Second {
			t.Errorf("Unknown %v after the kill, want about the grace period %v", after, testGrace)
		}
		t.Logf("WebSocket agent killed → Unknown %v later (grace %v)", after.Round(time.Millisecond), testGrace)
	})

	t.Run("too many streams over the WebSocket end the session", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		conn, err := transport.DialWebSocket(ctx, h.quicAddr, loadClientTLS(t, h.issueCert(t, "greedy"), "127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseWithError(protocol.CloseNormal, "test done")
		control, err := conn.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reader := sayHello(t, control, "greedy")
		// Streams that say nothing: each holds a slot of the hub's.
		for i := range 20 {
			str, err := conn.OpenStreamSync(ctx)
			if err == nil {
				_, err = str.Write([]byte{})
			}
			if err != nil {
				t.Logf("stream %d: %v", i+1, err)
				break
			}
		}
		var answer string
		for {
			m, err := reader.ReadMessage()
			var closed *transport.ClosedError
			if errors.As(err, &closed) {
				if answer == "" {
					answer = closed.Reason
				}
				if closed.Code != protocol.CloseProtocolError {
					t.Errorf("closed with code %d (%s), want %d", closed.Code, closed.Reason, protocol.CloseProtocolError)
				}
				break
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if e, ok := m.(*protocol.Error); ok {
				answer = e.Message
			}
		}
		if !strings.Contains(answer, "streams open at once") {
			t.Errorf("the hub said %q, want it to name the stream limit", answer)
		}
		if cl := h.cluster(t, "member-1"); readyOf(cl) != metav1.ConditionTrue {
			t.Errorf("member-1 is %s, want Ready", describe(cl))
		}
	})
}
