package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// TestRotationKeepsTheClusterReady: with one-minute certificates, a joined
// agent renews its certificate over its session at 80 % of its lifetime
// and reconnects with it; the cluster never leaves Ready, the Cluster
// records the new serial, and the old certificate is refused once the new
// one is in use.
func TestRotationKeepsTheClusterReady(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	c := env.Cluster("member-1")
	h := startHub(t, "--agent-cert-ttl=1m")
	dir := t.TempDir()
	certDir := filepath.Join(dir, "member-1")
	token := h.createToken(t, "--cluster", "member-1")
	logPath := filepath.Join(dir, "agent-member-1.log")
	runAgent(t, "member-1", logPath, joinArgs(h, c, certDir, token, h.pin(t))...)
	waitReady(t, h, "member-1", 60*time.Second)
	first := serialOf(t, filepath.Join(certDir, "tls.crt"))
	oldTLS := loadClientTLS(t, certDir, "127.0.0.1")
	joinedAt := time.Now()

	// Ready, without taints, at every poll from now on.
	stillReady := func() string {
		cl := h.cluster(t, "member-1")
		if readyOf(cl) != metav1.ConditionTrue || len(cl.Spec.Taints) > 0 {
			t.Fatalf("member-1 left Ready during the rotation: %s", describe(cl))
		}
		return cl.Annotations[v1alpha1.AnnotationAgentCertificateSerial]
	}
	var renewed string
	waitFor(t, 90*time.Second, "the agent to renew its certificate", func() (bool, string) {
		recorded := stillReady()
		renewed = serialOf(t, filepath.Join(certDir, "tls.crt"))
		return renewed != first && recorded == renewed, "tls.crt serial " + renewed + ", recorded " + recorded
	})
	// 80 % of the 66 s from NotBefore (back-dated 6 s) to NotAfter.
	if took := time.Since(joinedAt); took < 30*time.Second {
		t.Errorf("renewed %v after the join, want about 47 s", took)
	}
	waitFor(t, 20*time.Second, "the first session with the new certificate to retire the old one", func() (bool, string) {
		stillReady()
		previous := h.cluster(t, "member-1").Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial]
		return previous == "", "previous serial " + previous
	})
	var hello strings.Builder
	if err := protocol.WriteMessage(&hello, &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: "member-1", AgentVersion: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := exchange(t, h.quicAddr, oldTLS, []byte(hello.String())); err == nil || !strings.Contains(err.Error(), "superseded") {
		t.Errorf("a session with the renewed certificate %s: %v, want it refused as superseded", first, err)
	}
	// A few more seconds of Ready on the new certificate.
	until := time.Now().Add(5 * time.Second)
	waitFor(t, 10*time.Second, "five more seconds of Ready", func() (bool, string) {
		stillReady()
		return time.Now().After(until), "waiting"
	})
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"certificate renewed", "reconnecting with the renewed certificate"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("agent log lacks %q", want)
		}
	}
}
