package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// testKubeconfig is enough for New; nothing dials it.
const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: member
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: admin
  user: {token: test}
contexts:
- name: member
  context: {cluster: member, user: admin}
current-context: member
`

func TestNewRejectsBadConfiguration(t *testing.T) {
	p := newTestPKI(t)
	for _, tc := range []struct {
		name string
		// change breaks one thing in a valid configuration.
		change func(t *testing.T, cfg *Config)
		want   []string // substrings of the error
	}{
		{"no hub", func(_ *testing.T, cfg *Config) { cfg.Hub = "" }, []string{"hub address is required"}},
		{"hub without port", func(_ *testing.T, cfg *Config) { cfg.Hub = "hub.example" }, []string{`hub address "hub.example"`}},
		{"hub without host", func(_ *testing.T, cfg *Config) { cfg.Hub = ":4443" }, []string{"host is empty"}},
		{"hub with a bad port", func(_ *testing.T, cfg *Config) { cfg.Hub = "hub:quic" }, []string{`port "quic"`}},
		{"unknown transport", func(_ *testing.T, cfg *Config) { cfg.Transport = "udp" }, []string{`transport "udp": want auto, quic or websocket`}},
		{"WebSocket address without port", func(_ *testing.T, cfg *Config) { cfg.HubWebSocket = "hub.example" },
			[]string{`WebSocket hub address "hub.example"`}},
		{"negative QUIC retry", func(_ *testing.T, cfg *Config) { cfg.QUICRetryInterval = -time.Second }, []string{"retry every -1s: must be positive"}},
		{"no cluster name", func(_ *testing.T, cfg *Config) { cfg.ClusterName = "" }, []string{"cluster name is required"}},
		{"cluster name not DNS-1123", func(_ *testing.T, cfg *Config) { cfg.ClusterName = "Member_1" },
			[]string{`cluster name "Member_1" is not a DNS-1123 subdomain`}},
		{"lease too short", func(_ *testing.T, cfg *Config) { cfg.LeaseDuration = 500 * time.Millisecond },
			[]string{"lease duration 500ms"}},
		{"negative status interval", func(_ *testing.T, cfg *Config) { cfg.StatusInterval = -time.Second },
			[]string{"status interval -1s"}},
		{"system namespace not a DNS-1123 label", func(_ *testing.T, cfg *Config) { cfg.SystemNamespace = "flotilla.system" },
			[]string{`system namespace "flotilla.system" is not a DNS-1123 label`}},
		{"owner ServiceAccount not DNS-1123", func(_ *testing.T, cfg *Config) { cfg.OwnerServiceAccount = "Agent_SA" },
			[]string{`owner ServiceAccount name "Agent_SA" is not a DNS-1123 subdomain`}},
		{"several problems at once", func(_ *testing.T, cfg *Config) { cfg.Hub, cfg.ClusterName = "", "" },
			[]string{"hub address is required", "cluster name is required"}},
		{"no CA file", func(t *testing.T, cfg *Config) { remove(t, cfg.CertDir, credstore.CAFile) },
			[]string{"read hub CA", credstore.CAFile, "no such file"}},
		{"CA file without certificates", func(t *testing.T, cfg *Config) {
			writeFile(t, filepath.Join(cfg.CertDir, credstore.CAFile), []byte("not PEM"))
		}, []string{credstore.CAFile, "no PEM certificate found"}},
		{"no client certificate", func(t *testing.T, cfg *Config) { remove(t, cfg.CertDir, credstore.CertFile) },
			[]string{"read client certificate", credstore.CertFile, "no such file"}},
		{"no client key", func(t *testing.T, cfg *Config) { remove(t, cfg.CertDir, credstore.KeyFile) },
			[]string{"read client key", credstore.KeyFile, "no such file"}},
		{"key of another certificate", func(t *testing.T, cfg *Config) {
			other := p.issue(t, pki.Request{CommonName: protocol.ClusterCommonName(testCluster), Usage: pki.ClientAuth})
			writeFile(t, filepath.Join(cfg.CertDir, credstore.KeyFile), other.KeyPEM)
		}, []string{credstore.CertFile, credstore.KeyFile, "private key does not match public key"}},
		{"certificate for another cluster", func(t *testing.T, cfg *Config) { cfg.CertDir = p.certDir(t, "cluster:member-2") },
			[]string{credstore.CertFile, `common name is "cluster:member-2", but cluster "member-1" needs "cluster:member-1"`}},
		{"expired certificate", func(t *testing.T, cfg *Config) {
			kp := p.issue(t, pki.Request{CommonName: protocol.ClusterCommonName(testCluster), Usage: pki.ClientAuth, ValidFor: time.Nanosecond})
			writeFile(t, filepath.Join(cfg.CertDir, credstore.CertFile), kp.CertPEM)
			writeFile(t, filepath.Join(cfg.CertDir, credstore.KeyFile), kp.KeyPEM)
		}, []string{credstore.CertFile, "expired at"}},
		{"missing kubeconfig", func(_ *testing.T, cfg *Config) { cfg.Kubeconfig = "/nonexistent/kubeconfig" },
			[]string{"load kubeconfig /nonexistent/kubeconfig"}},
		{"broken kubeconfig", func(t *testing.T, cfg *Config) { writeFile(t, cfg.Kubeconfig, []byte("clusters: [")) },
			[]string{"load kubeconfig", "error loading config file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig(t, p)
			tc.change(t, &cfg)
			a, err := New(cfg)
			if err == nil {
				t.Fatalf("New succeeded (%v), want an error", a)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New error = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestNewAcceptsGoodConfiguration(t *testing.T) {
	a, err := New(validConfig(t, newTestPKI(t)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if got, want := a.tls.ServerName, "127.0.0.1"; got != want {
		t.Errorf("TLS server name = %q, want %q", got, want)
	}
	if a.cfg.LeaseDuration != DefaultLeaseDuration || a.cfg.StatusInterval != DefaultStatusInterval ||
		a.cfg.SystemNamespace != "flotilla-system" {
		t.Errorf("defaults not applied: lease %v, status interval %v, system namespace %q",
			a.cfg.LeaseDuration, a.cfg.StatusInterval, a.cfg.SystemNamespace)
	}
}

// validConfig is a configuration New accepts.
func validConfig(t *testing.T, p *testPKI) Config {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, []byte(testKubeconfig))
	return Config{
		Hub:         "127.0.0.1:4443",
		ClusterName: testCluster,
		Kubeconfig:  kubeconfig,
		CertDir:     p.certDir(t, protocol.ClusterCommonName(testCluster)),
		Logger:      discard,
	}
}

func remove(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}
