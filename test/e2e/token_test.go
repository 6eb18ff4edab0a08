package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flotilla-io/flotilla/internal/pki"
)

// TestBootstrapTokens: flotilla-hub token create on the hub's machine and
// flotilla token with a kubeconfig make standard bootstrap tokens and print
// the join command with the hub's agent address and CA pin; RBAC decides
// who may.
func TestBootstrapTokens(t *testing.T) {
	h := startHub(t)
	ca, err := pki.LoadCA(filepath.Join(h.dataDir, "pki", "ca.crt"), filepath.Join(h.dataDir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	token := regexp.MustCompile(`bootstrapToken=([a-z0-9]{6})\.([a-z0-9]{16})`)

	out, err := exec.Command(filepath.Join(binDir, "flotilla-hub"), "token", "create", "--data-dir", h.dataDir, "--cluster", "edge-9", "--ttl", "1h").CombinedOutput()
	if err != nil {
		t.Fatalf("flotilla-hub token create: %v\n%s", err, out)
	}
	m := token.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no token in:\n%s", out)
	}
	for _, want := range []string{
		"--set hub.address=" + h.quicAddr + " ", // the hub's bound --quic-addr
		"--set hub.caCertHash=" + pki.Pin(ca.Cert) + " ",
		"--set cluster.name=edge-9 ",
		"joins only cluster edge-9",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("flotilla-hub token create printed:\n%s\nwant %q", out, want)
		}
	}
	list := mustFlotilla(t, h, "token", "list")
	if !strings.Contains(list, m[1]) || strings.Contains(list, m[2]) {
		t.Errorf("token list (want the ID, not the secret):\n%s", list)
	}

	// A viewer may not make tokens, and a refused create stores nothing.
	bindRole(t, h, "vera", "flotilla-viewer")
	viewer := userKubeconfig(t, h, "vera")
	cmd := exec.Command(filepath.Join(binDir, "flotilla"), "--kubeconfig", viewer, "token", "create")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "forbidden") {
		t.Errorf("viewer's token create: %v\n%s", err, out)
	}
	if n := strings.Count(mustFlotilla(t, h, "token", "list"), "\n"); n != 2 {
		t.Errorf("after the viewer's attempt, token list has %d lines, want header and one token", n)
	}
	if out := mustFlotilla(t, h, "token", "delete", m[1]); !strings.Contains(out, "bootstrap token "+m[1]+" deleted") {
		t.Errorf("token delete printed %q", out)
	}
}
