package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/process"
)

// createToken runs flotilla-hub token create --token-only with args.
func (h *hub) createToken(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "flotilla-hub"), append([]string{"token", "create", "--data-dir", h.dataDir, "--token-only"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("flotilla-hub token create: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// pin is the hub CA's pin, as an operator would copy it from the join
// command.
func (h *hub) pin(t *testing.T) string {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(h.dataDir, "pki", "ca.crt"), filepath.Join(h.dataDir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	return pki.Pin(ca.Cert)
}

// joinArgs are an agent's flags to join cluster c with token and pin into
// an empty certificate folder.
func joinArgs(h *hub, c *membercluster.Cluster, certDir, token, pin string) []string {
	return []string{"--hub=" + h.quicAddr, "--cluster-name=" + c.Name, "--kubeconfig=" + c.Kubeconfig, "--cert-dir=" + certDir,
		"--bootstrap-token=" + token, "--hub-ca-hash=" + pin, "--lease-duration=" + testLeaseDuration.String(), "--status-interval=500ms"}
}

// runRefusedAgent runs an agent that must stop on its own with an error
// mentioning want, and returns its output.
func runRefusedAgent(t *testing.T, args []string, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "flotilla-agent"), args...)
	cmd.Env = append(os.Environ(), "QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), want) {
		t.Fatalf("agent: %v (context %v), want it to stop with %q:\n%s", err, ctx.Err(), want, out)
	}
	return string(out)
}

func serialOf(t *testing.T, certFile string) string {
	t.Helper()
	data, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.Text(16)
}

// TestJoinWithBootstrapToken: an agent with a token and the CA pin and no
// certificate joins, is registered with its token's metadata and turns Ready;
// bad tokens and a wrong pin are refused with a reason on the agent's side
// and register nothing; a newer join with a --replace token supersedes
// the older certificate.
func TestJoinWithBootstrapToken(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	c := env.Cluster("member-1")
	h := startHub(t)
	pin := h.pin(t)
	dir := t.TempDir()

	t.Run("refused: wrong pin, deleted token, token for another cluster", func(t *testing.T) {
		other, err := pki.NewCA("other", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		good := h.createToken(t)
		out := runRefusedAgent(t, joinArgs(h, c, filepath.Join(dir, "wrong-pin"), good, pki.Pin(other.Cert)), "CA pin")
		if strings.Contains(out, good[7:]) {
			t.Errorf("the agent printed the token's secret:\n%s", out)
		}
		deleted := h.createToken(t)
		mustFlotilla(t, h, "token", "delete", deleted)
		runRefusedAgent(t, joinArgs(h, c, filepath.Join(dir, "deleted"), deleted, pin), "TokenRefused")
		bound := h.createToken(t, "--cluster", "edge-elsewhere")
		runRefusedAgent(t, joinArgs(h, c, filepath.Join(dir, "bound"), bound, pin), `joins only cluster "edge-elsewhere"`)
		for _, sub := range []string{"wrong-pin", "deleted", "bound"} {
			if _, err := os.Stat(filepath.Join(dir, sub, "tls.crt")); !os.IsNotExist(err) {
				t.Errorf("%s: a refused join wrote tls.crt (%v)", sub, err)
			}
		}
		if got := h.cluster(t, "member-1"); got != nil {
			t.Errorf("refused joins registered member-1: %s", describe(got))
		}
	})

	certDir := filepath.Join(dir, "member-1")
	t.Run("joins, registers with its token's metadata, turns Ready", func(t *testing.T) {
		token := h.createToken(t, "--cluster", "member-1", "--ttl", "10m", "--provider=kwok", "--region=eu-1", "--zone=eu-1a", "--label=site=store-7")
		runAgent(t, "member-1", filepath.Join(dir, "agent-member-1.log"), joinArgs(h, c, certDir, token, pin)...)
		waitReady(t, h, "member-1", 60*time.Second)
		cl := h.cluster(t, "member-1")
		if diff := cmp.Diff(v1alpha1.ClusterSpec{Provider: "kwok", Region: "eu-1", Zone: "eu-1a"}, cl.Spec); diff != "" || cl.Labels["site"] != "store-7" {
			t.Errorf("registered (-want +got):\n%s\nlabels %v", diff, cl.Labels)
		}
		if got, want := cl.Annotations[v1alpha1.AnnotationAgentCertificateSerial], serialOf(t, filepath.Join(certDir, "tls.crt")); got != want {
			t.Errorf("recorded serial %q, the agent's certificate has %s", got, want)
		}
		csrs := mustKubectl(t, h.kubeconfig(), "get", "csr", "-o", "custom-columns=SIGNER:.spec.signerName,CONDITION:.status.conditions[0].type")
		if !regexp.MustCompile(`flotilla.io/agent\s+Approved`).MatchString(csrs) {
			t.Errorf("kubectl get csr:\n%s", csrs)
		}
	})

	t.Run("a newer join supersedes the older certificate", func(t *testing.T) {
		// The first certificate's agent runs again...
		first := runAgent(t, "member-1", filepath.Join(dir, "agent-first.log"), "--hub="+h.quicAddr, "--cluster-name=member-1",
			"--kubeconfig="+c.Kubeconfig, "--cert-dir="+certDir, "--lease-duration="+testLeaseDuration.String())
		waitFor(t, 30*time.Second, "the first agent connected", func() (bool, string) {
			log, _ := os.ReadFile(first.LogPath)
			return strings.Contains(string(log), "msg=connected"), process.TailFile(first.LogPath, 3)
		})
		// ...when member-1 joins again with another key, with a token made
		// to replace its certificate: a new serial.
		token := h.createToken(t, "--cluster", "member-1", "--replace")
		second := filepath.Join(dir, "second")
		args := joinArgs(h, c, second, token, pin)
		ctx, cancel := context.WithCancel(t.Context())
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "flotilla-agent"), args...)
		cmd.Env = append(os.Environ(), "QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the second join's certificate", func() (bool, string) {
			_, err := os.Stat(filepath.Join(second, "tls.crt"))
			return err == nil, "no tls.crt yet"
		})
		cancel()
		_ = cmd.Wait()
		waitFor(t, 10*time.Second, "the new serial on the Cluster", func() (bool, string) {
			got := h.cluster(t, "member-1").Annotations[v1alpha1.AnnotationAgentCertificateSerial]
			return got == serialOf(t, filepath.Join(second, "tls.crt")), got
		})
		// The first certificate's live session ends, and it opens no other.
		waitFor(t, 30*time.Second, "the first agent's session cut", func() (bool, string) {
			log, _ := os.ReadFile(first.LogPath)
			return strings.Contains(string(log), "superseded"), process.TailFile(first.LogPath, 3)
		})
		var hello strings.Builder
		if err := protocol.WriteMessage(&hello, &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: "member-1", AgentVersion: "old"}); err != nil {
			t.Fatal(err)
		}
		err := exchange(t, h.quicAddr, loadClientTLS(t, certDir, "127.0.0.1"), []byte(hello.String()))
		if err == nil || !strings.Contains(err.Error(), "superseded") {
			t.Errorf("a session with the superseded certificate: %v, want it refused as superseded", err)
		}
		// Offline issuance records its serial too.
		offline := h.issueCert(t, "member-1")
		if got, want := h.cluster(t, "member-1").Annotations[v1alpha1.AnnotationAgentCertificateSerial], serialOf(t, filepath.Join(offline, "tls.crt")); got != want {
			t.Errorf("after certs issue the recorded serial is %q, want the new certificate's %s", got, want)
		}

		// Deleting the Cluster revokes even the newest certificate, and
		// ends its live session.
		a := runAgent(t, "member-1", filepath.Join(dir, "agent-offline.log"), "--hub="+h.quicAddr, "--cluster-name=member-1",
			"--kubeconfig="+c.Kubeconfig, "--cert-dir="+offline, "--lease-duration="+testLeaseDuration.String())
		waitFor(t, 30*time.Second, "the agent with the offline certificate connected", func() (bool, string) {
			cl := h.cluster(t, "member-1")
			return cl != nil && cl.Status.Agent != nil && cl.Status.Agent.ConnectedTo != "", describe(cl)
		})
		mustKubectl(t, h.kubeconfig(), "delete", "cluster", "member-1", "--wait=true")
		waitFor(t, 30*time.Second, "the agent's session revoked", func() (bool, string) {
			log, _ := os.ReadFile(a.LogPath)
			return strings.Contains(string(log), "its certificates are revoked"), process.TailFile(a.LogPath, 5)
		})
		err = exchange(t, h.quicAddr, loadClientTLS(t, offline, "127.0.0.1"), []byte(hello.String()))
		if err == nil || !strings.Contains(err.Error(), "not registered") {
			t.Errorf("a session of a deleted cluster: %v, want it refused as not registered", err)
		}
	})
}
