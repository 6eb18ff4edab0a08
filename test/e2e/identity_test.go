package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/process"
)

// victimSecretYAML places a Secret on cluster victim alone: what an
// impostor of victim would receive.
const victimSecretYAML = `apiVersion: v1
kind: Secret
metadata: {name: db-password, namespace: vault}
stringData: {password: hunter2}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: db-password-to-victim, namespace: vault}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Secret, name: db-password}]
  placement: {clusterAffinity: {clusterNames: [victim]}}
`

// TestClusterIdentityCannotBeTaken (the attack of a second token): cluster victim
// joined with its own token; other tokens — unbound, reusable, or bound to
// victim without --replace — try to join as victim from another member
// cluster. Each is refused with a reason the agent logs; victim keeps its
// session, its serial and Ready throughout, and the impostor gets no
// certificate and no Work. A used single-use token cannot join again; a
// token made with --replace can, and the hub records an event.
func TestClusterIdentityCannotBeTaken(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.ClusterSpec{Name: "victim", Nodes: 1}, membercluster.ClusterSpec{Name: "attacker", Nodes: 1})
	h := startHub(t)
	pin := h.pin(t)
	dir := t.TempDir()
	victimMember, attackerMember := env.Cluster("victim"), env.Cluster("attacker")
	attackerClient, err := attackerMember.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	victimClient, err := victimMember.Clientset()
	if err != nil {
		t.Fatal(err)
	}

	victimToken := h.createToken(t, "--cluster", "victim")
	victimCerts := filepath.Join(dir, "victim")
	victim := runAgent(t, "victim", filepath.Join(dir, "agent-victim.log"), joinArgs(h, victimMember, victimCerts, victimToken, pin)...)
	waitReady(t, h, "victim", 60*time.Second)
	f := &fleet{t: t, hub: h, env: env, dir: dir}
	f.apply("secret.yaml", victimSecretYAML)
	waitFor(t, 30*time.Second, "the Secret on victim", func() (bool, string) {
		_, err := victimClient.CoreV1().Secrets("vault").Get(t.Context(), "db-password", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	serial := h.cluster(t, "victim").Annotations[v1alpha1.AnnotationAgentCertificateSerial]
	t.Logf("victim joined with its own token: serial %s, Ready", serial)

	t.Run("other tokens cannot join as victim", func(t *testing.T) {
		watch := watchCluster(t, h, "victim")
		connected := strings.Count(readFile(t, victim.LogPath), "msg=connected")
		for _, tt := range []struct{ name, want string }{
			{"unbound token", ""},
			{"token bound to victim, no --replace", "--cluster=victim"},
			{"reusable token", "--reusable"},
		} {
			var args []string
			if tt.want != "" {
				args = append(args, tt.want)
			}
			token := h.createToken(t, args...)
			certDir := filepath.Join(dir, "impostor-"+strings.ReplaceAll(tt.name, " ", "-"))
			got := impersonate(t, h, attackerMember, attackerClient, certDir, token, pin)
			t.Logf("%s joining as victim: %s", tt.name, got)
			if got.certificate || got.session || got.secret || !got.refused {
				t.Errorf("%s: the impostor got %s; want it refused, with nothing", tt.name, got)
			}
			if !strings.Contains(got.reason, "ClusterIdentityTaken") || !strings.Contains(got.reason, "--replace") {
				t.Errorf("%s: the agent logged %q; want the reason, ClusterIdentityTaken, and how to replace", tt.name, got.reason)
			}
		}
		bad, events := watch.finish()
		after := h.cluster(t, "victim").Annotations[v1alpha1.AnnotationAgentCertificateSerial]
		sessions := strings.Count(readFile(t, victim.LogPath), "msg=connected")
		t.Logf("victim during the attacks: %d changes seen, %d not Ready %v; serial %s -> %s; sessions %d -> %d",
			events, len(bad), bad, serial, after, connected, sessions)
		if len(bad) > 0 || after != serial || sessions != connected {
			t.Errorf("victim during the attacks: not Ready %v, serial %s -> %s, sessions %d -> %d; want Ready throughout, its serial and its one session kept",
				bad, serial, after, connected, sessions)
		}
	})

	t.Run("a used token cannot join again", func(t *testing.T) {
		out := runRefusedAgent(t, joinArgs(h, victimMember, filepath.Join(dir, "again"), victimToken, pin), "TokenRefused")
		t.Logf("victim's own token, used, joining again: %s", lineWith(out, "the hub refused"))
		if !strings.Contains(out, "does not exist") {
			t.Errorf("a used token: want it gone from the hub (does not exist):\n%s", out)
		}
	})

	t.Run("--replace re-joins victim and records an event", func(t *testing.T) {
		token := h.createToken(t, "--cluster", "victim", "--replace")
		certs := filepath.Join(dir, "victim-reinstalled")
		runAgent(t, "victim", filepath.Join(dir, "agent-victim-reinstalled.log"), joinArgs(h, victimMember, certs, token, pin)...)
		waitFor(t, 30*time.Second, "the replacement's serial on victim", func() (bool, string) {
			if _, err := os.Stat(filepath.Join(certs, "tls.crt")); err != nil {
				return false, err.Error()
			}
			got := h.cluster(t, "victim").Annotations[v1alpha1.AnnotationAgentCertificateSerial]
			return got == serialOf(t, filepath.Join(certs, "tls.crt")), got
		})
		waitFor(t, 30*time.Second, "the old agent's session cut", func() (bool, string) {
			log, _ := os.ReadFile(victim.LogPath)
			return strings.Contains(string(log), "superseded"), process.TailFile(victim.LogPath, 3)
		})
		waitReady(t, h, "victim", 30*time.Second)
		waitFor(t, 30*time.Second, "the AgentCertificateReplaced event", func() (bool, string) {
			n := eventCount(t, h, "Cluster", "default", "victim", "AgentCertificateReplaced")
			return n == 1, fmt.Sprintf("%d events", n)
		})
		t.Logf("--replace: serial %s -> %s, event AgentCertificateReplaced recorded", serial, h.cluster(t, "victim").Annotations[v1alpha1.AnnotationAgentCertificateSerial])
		if out := mustFlotilla(t, h, "token", "list"); strings.Contains(out, token[:6]) {
			t.Errorf("the replace token is still listed after its join:\n%s", out)
		}
	})
}

// impostorOutcome is what an agent joining as victim got.
type impostorOutcome struct {
	refused     bool   // the agent stopped with a refusal
	reason      string // the refusal it logged
	certificate bool   // it holds a certificate
	session     bool   // it connected as victim
	secret      bool   // victim's Secret reached the attacker's cluster
}

func (o impostorOutcome) String() string {
	return fmt.Sprintf("refused=%t certificate=%t session=%t victim's Secret=%t reason=%q", o.refused, o.certificate, o.session, o.secret, o.reason)
}

// impersonate runs an agent that joins as victim with token from the
// attacker's member cluster, until it stops or victim's Secret reaches it
// (at most 45 s), and says what it got.
func impersonate(t *testing.T, h *hub, attacker *membercluster.Cluster, client kubernetes.Interface, certDir, token, pin string) impostorOutcome {
	t.Helper()
	// What an earlier impostor got must not count for this one.
	if err := client.CoreV1().Secrets("vault").Delete(t.Context(), "db-password", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	args := joinArgs(h, attacker, certDir, token, pin)
	args = append(args, "--cluster-name=victim") // the last one wins
	a := runAgent(t, "impostor", certDir+".log", args...)
	var got impostorOutcome
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) && !a.HasExited() && !got.secret {
		_, err := client.CoreV1().Secrets("vault").Get(t.Context(), "db-password", metav1.GetOptions{})
		got.secret = err == nil
		time.Sleep(100 * time.Millisecond)
	}
	if err := a.Stop(); err != nil {
		t.Error(err)
	}
	log, _ := os.ReadFile(a.LogPath)
	got.refused = a.HasExited() && strings.Contains(string(log), "refused")
	got.reason = lineWith(string(log), "the hub refused")
	_, err := os.Stat(filepath.Join(certDir, "tls.crt"))
	got.certificate = err == nil
	got.session = strings.Contains(string(log), "msg=connected")
	return got
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// lineWith is the first line of s that contains sub, or "".
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
