package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/test/netbed"
)

// fallbackYAML places a ConfigMap on member-1.
const fallbackYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: over-tcp, namespace: fallback}
data: {generation: "1"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: over-tcp, namespace: fallback}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: over-tcp}]
  placement:
    clusterAffinity: {clusterNames: [member-1]}
`

// TestUDPBlocked: behind a NAT router that drops every UDP packet of the
// edge site, the agent (--transport=auto, the default) joins and holds its
// session over the hub's WebSocket fallback (TLS on TCP), and Work reaches
// the member; once UDP passes again the session moves to QUIC within the
// retry interval, the cluster Ready throughout; blocked again mid-session,
// the agent finds its way back to the WebSocket.
func TestUDPBlocked(t *testing.T) {
	const fallbackAfter, retryEvery = 2 * time.Second, 3 * time.Second
	var start time.Time // when the agent starts
	f := startNATFleetWith(t, 1, natFleetOptions{
		prepare: func(bed *netbed.Bed) {
			if err := bed.BlockUDP(t.Context(), 1, true); err != nil {
				t.Fatal(err)
			}
		},
		agentArgs: func(*netbed.Bed, int) []string {
			start = time.Now()
			return []string{"--quic-fallback-after=" + fallbackAfter.String(), "--quic-retry-interval=" + retryEvery.String()}
		},
	})
	bed, a, client := f.bed, f.agents["member-1"], f.clients["member-1"]
	t.Logf("UDP blocked: joined and Ready over the WebSocket %v after the agent started", time.Since(start).Round(time.Millisecond))
	// onWebSocket: the hub counts member-1 on the WebSocket (want "1") or
	// not ("0"), and its Cluster says the same.
	onWebSocket := func(want string) func() (bool, string) {
		transport := map[string]string{"1": "websocket", "0": "quic"}[want]
		return func() (bool, string) {
			m := f.hub.metrics(t)
			var got string
			if a := f.hub.cluster(t, "member-1").Status.Agent; a != nil {
				got = a.Transport
			}
			return strings.Contains(m, "flotilla_connected_agents 1\n") && strings.Contains(m, "flotilla_connected_agents_websocket "+want+"\n") && got == transport,
				grepMetrics(m, "flotilla_connected_agents", "flotilla_connected_agents_websocket") + "; status.agent.transport " + got
		}
	}
	waitFor(t, 10*time.Second, "member-1 connected over the WebSocket", onWebSocket("1"))
	log, err := os.ReadFile(a.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	// The join finds QUIC unanswered and falls back; the session that
	// follows goes straight to the WebSocket.
	if !strings.Contains(string(log), "connected over the fallback transport") || !regexp.MustCompile(`msg=connected .*transport=websocket`).Match(log) {
		t.Errorf("the agent log does not say it joined and connected over the WebSocket:\n%s", log)
	}

	f.apply("fallback.yaml", fallbackYAML)
	waitFor(t, 30*time.Second, "the ConfigMap on member-1, sent over the WebSocket", func() (bool, string) {
		cm, err := client.CoreV1().ConfigMaps("fallback").Get(t.Context(), "over-tcp", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not there"
		}
		return err == nil && cm.Data["generation"] == "1", errString(err)
	})

	t.Run("UDP passes again: the session moves to QUIC", func(t *testing.T) {
		since := readySince(t, f.hub, "member-1")
		mon := monitorReady(t, f.hub, "member-1")
		if err := bed.BlockUDP(t.Context(), 1, false); err != nil {
			t.Fatal(err)
		}
		unblocked := time.Now()
		waitFor(t, retryEvery+fallbackAfter+10*time.Second, "member-1 connected over QUIC", onWebSocket("0"))
		t.Logf("on QUIC %v after UDP passed again (retry interval %v)", time.Since(unblocked).Round(time.Millisecond), retryEvery)
		mon.stop(t)
		if got := readySince(t, f.hub, "member-1"); !got.Equal(since) {
			t.Errorf("member-1's Ready condition changed at %v while the session moved", got)
		}
		log, _ := os.ReadFile(a.LogPath)
		if !strings.Contains(string(log), "moving the session to it") {
			t.Errorf("the agent log does not say it moved to QUIC:\n%s", log)
		}
	})

	t.Run("UDP blocked mid-session: back on the WebSocket", func(t *testing.T) {
		if err := bed.BlockUDP(t.Context(), 1, true); err != nil {
			t.Fatal(err)
		}
		blocked := time.Now()
		waitFor(t, 60*time.Second, "member-1 back on the WebSocket", onWebSocket("1"))
		waitReady(t, f.hub, "member-1", 30*time.Second)
		t.Logf("UDP blocked mid-session: on the WebSocket and Ready %v later (lease %v, grace %v)",
			time.Since(blocked).Round(time.Millisecond), testLeaseDuration, testGrace)
	})
}
