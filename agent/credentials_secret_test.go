package agent

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/agent/work"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

const (
	testSecret      = "flotilla-agent-credentials"
	testTokenSecret = "flotilla-agent-bootstrap-token"
)

// secretOf reads the agent's credential Secret from the member cluster.
func secretOf(t *testing.T, client kubernetes.Interface) *corev1.Secret {
	t.Helper()
	s, err := client.CoreV1().Secrets(work.DefaultSystemNamespace).Get(t.Context(), testSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("credential Secret: %v", err)
	}
	return s
}

// checkSecret checks that the Secret holds exactly the items names, a
// matching tls.crt and tls.key, and certificate serial serial.
func checkSecret(t *testing.T, s *corev1.Secret, serial string, names ...string) {
	t.Helper()
	if diff := cmp.Diff(names, slices.Sorted(maps.Keys(s.Data))); diff != "" {
		t.Errorf("items of Secret %s (-want +got):\n%s", s.Name, diff)
	}
	pair, err := tls.X509KeyPair(s.Data[credstore.CertFile], s.Data[credstore.KeyFile])
	if err != nil {
		t.Fatalf("Secret's tls.crt and tls.key: %v", err)
	}
	if got := pair.Leaf.SerialNumber.Text(16); got != serial {
		t.Errorf("Secret's tls.crt has serial %s, want %s", got, serial)
	}
	if s.Type != corev1.SecretTypeOpaque || s.Labels[work.LabelManagedBy] != work.ManagedBy {
		t.Errorf("Secret type %q labels %v, want Opaque and managed by the agent", s.Type, s.Labels)
	}
}

// TestCredentialsInASecret keeps the credentials in a Secret of a real
// member cluster: a join creates it, a renewal updates it, a restart
// reads it (and does not join again), and a restart after a crash in the
// middle of a renewal finishes or abandons it. (That a write racing another
// one is retried is credstore's TestSecretWriteRetriesAConflict.)
func TestCredentialsInASecret(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real member cluster")
	}
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	cluster := env.Clusters()[0]
	client, err := cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil, func(h *testHub) {
		// The joined certificate is past 80 % of its life: renewed at once.
		h.join = func(_ int, req *protocol.JoinRequest) protocol.Message {
			csr, err := parseCSR(req.CSR)
			if err != nil {
				return &protocol.Error{Code: protocol.CodeCSRRefused, Message: err.Error()}
			}
			now := time.Now()
			cert, _ := p.certFor(t, csr.PublicKey, csr.Subject.CommonName, now.Add(-1000*time.Second), now.Add(100*time.Second))
			return &protocol.JoinResponse{Certificate: cert, CACertificate: p.ca.CertPEM()}
		}
		h.renew = func(_ int, req *protocol.CertificateRenewRequest) protocol.Message { return renewed(t, p, req) }
	})
	cfg := Config{Hub: hub.addr(), ClusterName: cluster.Name, Kubeconfig: cluster.Kubeconfig, CertSecret: testSecret,
		BootstrapToken: testToken, BootstrapTokenSecret: testTokenSecret, HubCAHash: pki.Pin(p.ca.Cert), StatusInterval: 300 * time.Millisecond,
		Version: "test", Logger: testLogger(t)}
	// The token as the agent chart keeps it.
	if err := work.EnsureNamespace(t.Context(), client, work.DefaultSystemNamespace); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets(work.DefaultSystemNamespace).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: testTokenSecret}, Data: map[string][]byte{"token": []byte(testToken)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var serial string
	t.Run("a join creates the Secret, a renewal updates it", func(t *testing.T) {
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		run := startAgent(t, a)
		hub.waitFor(t, "a join request", clusterWait, isKind("join"))
		first := hub.waitConn(t, clusterWait)
		joined := secretOf(t, client)
		checkSecret(t, joined, peerSerial(first), credstore.CAFile, credstore.CertFile, credstore.KeyFile)
		token, err := client.CoreV1().Secrets(work.DefaultSystemNamespace).Get(t.Context(), testTokenSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(token.Data["token"]) != 0 {
			t.Errorf("after the join the token Secret has %q; want the token emptied", token.Data)
		}
		hub.waitFor(t, "a renewal request", waitTimeout, isKind("renewal"))
		second := hub.waitNewConn(t, first, "the renewal")
		serial = peerSerial(second)
		renewedSecret := secretOf(t, client)
		checkSecret(t, renewedSecret, serial, credstore.CAFile, credstore.CertFile, credstore.KeyFile)
		if renewedSecret.ResourceVersion == joined.ResourceVersion || serial == peerSerial(first) {
			t.Error("the renewal did not update the Secret")
		}
		run.cancel()
		if err := run.wait(t); err != nil {
			t.Errorf("Run = %v", err)
		}
	})

	t.Run("a restart reads it", func(t *testing.T) {
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		startAgent(t, a)
		c := hub.waitConn(t, clusterWait)
		if got := peerSerial(c); got != serial {
			t.Errorf("restarted agent connected with certificate %s, want the renewed %s", got, serial)
		}
		if n := hub.joins.Load(); n != 1 {
			t.Errorf("%d joins, want the first only", n)
		}
	})

	// What a crash in a renewal leaves, and what the next start makes of it.
	cn := protocol.ClusterCommonName(cluster.Name)
	current := p.issue(t, pki.Request{CommonName: cn, Usage: pki.ClientAuth})
	next := p.issue(t, pki.Request{CommonName: cn, Usage: pki.ClientAuth})
	for _, tc := range []struct {
		name  string
		items map[string][]byte
		want  *pki.KeyPair
		names []string
	}{
		{name: "no answer yet: the current pair stays, and the new key for the next attempt",
			items: map[string][]byte{credstore.CertFile: current.CertPEM, credstore.KeyFile: current.KeyPEM, credstore.NextKeyFile: next.KeyPEM},
			want:  current, names: []string{credstore.CAFile, credstore.CertFile, credstore.KeyFile, credstore.NextKeyFile}},
		{name: "answered, not installed: the new pair is installed",
			items: map[string][]byte{credstore.CertFile: current.CertPEM, credstore.KeyFile: current.KeyPEM, credstore.NextKeyFile: next.KeyPEM, credstore.NextCertFile: next.CertPEM},
			want:  next, names: []string{credstore.CAFile, credstore.CertFile, credstore.KeyFile}},
		{name: "key installed, certificate not",
			items: map[string][]byte{credstore.CertFile: current.CertPEM, credstore.KeyFile: next.KeyPEM, credstore.NextCertFile: next.CertPEM},
			want:  next, names: []string{credstore.CAFile, credstore.CertFile, credstore.KeyFile}},
	} {
		t.Run("crash in a renewal: "+tc.name, func(t *testing.T) {
			s := secretOf(t, client)
			s.Data = map[string][]byte{credstore.CAFile: p.ca.CertPEM()}
			maps.Copy(s.Data, tc.items)
			if _, err := client.CoreV1().Secrets(s.Namespace).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			a, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.tls.Certificates[0].Leaf.Raw; !bytes.Equal(got, mustLeaf(t, tc.want.CertPEM).Raw) {
				t.Error("the agent loaded another certificate than the expected one")
			}
			checkSecret(t, secretOf(t, client), mustLeaf(t, tc.want.CertPEM).SerialNumber.Text(16), tc.names...)
		})
	}
}

func mustLeaf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := parseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}
