package e2e

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// TestOnlyTheHubSignsAgentCertificates (the attack of a CSR creator): a ServiceAccount
// allowed only create and get on CertificateSigningRequests, with a real
// token against the hub's API, submits a renewal of running cluster
// victim's current certificate (the serial flotilla-viewer can read). On
// main the hub approved and signed it and the real agent was cut off; now
// admission refuses it, flotilla-admin's alike, and a request of another
// user that got into the store anyway is failed, never signed. victim
// keeps its session, its serial and Ready throughout; its agent
// certificate does not authenticate to the hub's Kubernetes API; and
// flotilla-admin cannot edit the serial with kubectl.
func TestOnlyTheHubSignsAgentCertificates(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.ClusterSpec{Name: "victim", Nodes: 1})
	h := startHub(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "victim")
	victim := runAgent(t, "victim", filepath.Join(dir, "agent-victim.log"),
		joinArgs(h, env.Cluster("victim"), certs, h.createToken(t, "--cluster", "victim"), h.pin(t))...)
	waitReady(t, h, "victim", 60*time.Second)
	serial := h.cluster(t, "victim").Annotations[v1alpha1.AnnotationAgentCertificateSerial]
	watch := watchCluster(t, h, "victim")
	connected := strings.Count(readFile(t, victim.LogPath), "msg=connected")
	admin := kubernetes.NewForConfigOrDie(h.restConfig(t))
	attempt := renewalOf(t, "victim", serial)

	t.Run("a CSR-only ServiceAccount's renewal is refused at admission", func(t *testing.T) {
		csrs := kubernetes.NewForConfigOrDie(csrOnlyServiceAccount(t, h, admin)).CertificatesV1().CertificateSigningRequests()
		_, err := csrs.Create(t.Context(), attempt, metav1.CreateOptions{})
		t.Logf("ServiceAccount creates a renewal of victim's certificate %s: %v", serial, err)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the hub (user flotilla:hub) creates them") {
			t.Errorf("ServiceAccount's renewal: %v; want Forbidden by admission, only the hub creates them", err)
		}
		other := attempt.DeepCopy()
		other.Name, other.Spec.SignerName = "not-for-agents", "example.com/other"
		if _, err := csrs.Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
			t.Errorf("ServiceAccount's request for another signer: %v; want it created (RBAC allows it)", err)
		}
	})

	t.Run("flotilla-admin's is refused too", func(t *testing.T) {
		_, err := admin.CertificatesV1().CertificateSigningRequests().Create(t.Context(), attempt, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `user "flotilla-admin" is not the hub`) {
			t.Errorf("flotilla-admin's renewal: %v; want Forbidden by admission", err)
		}
	})

	t.Run("a request of another user in the store is failed, never signed", func(t *testing.T) {
		// As one admitted before this version, or restored from a backup:
		// written straight into the store, it never met admission.
		stored := attempt.DeepCopy()
		stored.Name = "flotilla-agent-victim-stored"
		stored.Spec.Username = "cluster-admin-user"
		stored.Spec.Groups = []string{"system:masters", "system:authenticated"}
		putIntoStore(t, h, stored)
		var got *certificatesv1.CertificateSigningRequest
		waitFor(t, 30*time.Second, "the stored request failed", func() (bool, string) {
			var err error
			got, err = admin.CertificatesV1().CertificateSigningRequests().Get(t.Context(), stored.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(got.Status.Conditions) > 0 || len(got.Status.Certificate) > 0, "no condition yet"
		})
		last := got.Status.Conditions[len(got.Status.Conditions)-1]
		t.Logf("request of cluster-admin-user in the store: %s %s: %s; certificate %d bytes", last.Type, last.Reason, last.Message, len(got.Status.Certificate))
		if len(got.Status.Certificate) > 0 || last.Type != certificatesv1.CertificateFailed || last.Reason != "FlotillaRequestNotCreatedByHub" {
			t.Errorf("request of cluster-admin-user: %s %s, certificate %d bytes; want Failed FlotillaRequestNotCreatedByHub and none",
				last.Type, last.Reason, len(got.Status.Certificate))
		}
	})

	t.Run("victim keeps its session, serial and Ready", func(t *testing.T) {
		bad, events := watch.finish()
		after := h.cluster(t, "victim").Annotations[v1alpha1.AnnotationAgentCertificateSerial]
		sessions := strings.Count(readFile(t, victim.LogPath), "msg=connected")
		t.Logf("victim during the attacks: %d changes seen, %d not Ready; serial %s -> %s; sessions %d -> %d", events, len(bad), serial, after, connected, sessions)
		if len(bad) > 0 || after != serial || sessions != connected {
			t.Errorf("victim: not Ready %v, serial %s -> %s, sessions %d -> %d; want Ready, its serial and its session kept", bad, serial, after, connected, sessions)
		}
	})

	t.Run("the agent certificate does not authenticate to the Kubernetes API", func(t *testing.T) {
		cfg := rest.AnonymousClientConfig(h.restConfig(t))
		cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = filepath.Join(certs, "tls.crt"), filepath.Join(certs, "tls.key")
		_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
		t.Logf("victim's agent certificate on the hub's Kubernetes API: %v", err)
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("victim's agent certificate on the hub's API: %v; want 401 Unauthorized", err)
		}
	})

	t.Run("flotilla-admin cannot edit the serial", func(t *testing.T) {
		for _, args := range [][]string{
			{"annotate", "cluster", "victim", "--overwrite", v1alpha1.AnnotationAgentCertificateSerial + "=abc"},
			{"annotate", "cluster", "victim", v1alpha1.AnnotationAgentCertificateSerial + "-"},
		} {
			out, err := kubectl(t, h.kubeconfig(), args...)
			t.Logf("kubectl %s: %s", strings.Join(args, " "), strings.TrimSpace(out))
			if err == nil || !strings.Contains(out, "only the hub (user flotilla:hub) writes them") {
				t.Errorf("kubectl %s: %v; want refused by admission:\n%s", strings.Join(args, " "), err, out)
			}
		}
		if got := h.cluster(t, "victim").Annotations[v1alpha1.AnnotationAgentCertificateSerial]; got != serial {
			t.Errorf("serial %s after the edits, want %s", got, serial)
		}
		mustKubectl(t, h.kubeconfig(), "label", "cluster", "victim", "site=store-7") // the rest of a Cluster stays the operator's
	})
}

// renewalOf is the request an attacker makes: a renewal of cluster's
// certificate serial, for a key of the attacker's.
func renewalOf(t *testing.T, cluster, serial string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "cluster:" + cluster}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent-" + cluster + "-attack", Labels: map[string]string{"flotilla.io/cluster": cluster},
			Annotations: map[string]string{"flotilla.io/renewal-of": serial}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: v1alpha1.AgentSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

// csrOnlyServiceAccount makes ServiceAccount default/csr-maker, allowed
// create and get on CertificateSigningRequests and nothing else, and
// returns a client with a token of it, as a pod would hold.
func csrOnlyServiceAccount(t *testing.T, h *hub, admin kubernetes.Interface) *rest.Config {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "csr-maker", Namespace: "default"}}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "csr-maker"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "csr-maker"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "csr-maker"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "csr-maker", Namespace: "default"}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "csr-maker", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(h.restConfig(t))
	cfg.BearerToken = tr.Status.Token
	// RBAC's cache has the binding once the ServiceAccount may get a request.
	client := kubernetes.NewForConfigOrDie(cfg).CertificatesV1().CertificateSigningRequests()
	waitFor(t, 10*time.Second, "the ServiceAccount's RBAC", func() (bool, string) {
		_, err := client.Get(ctx, "none", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	return cfg
}

// putIntoStore writes csr into the hub's embedded etcd, where the API
// server keeps CertificateSigningRequests, past admission.
func putIntoStore(t *testing.T, h *hub, csr *certificatesv1.CertificateSigningRequest) {
	t.Helper()
	csr.UID = types.UID(uuid.NewUUID())
	csr.CreationTimestamp = metav1.Now()
	data, err := json.Marshal(csr)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "unix://" + filepath.Join(h.dataDir, "etcd", "client.sock")
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Put(t.Context(), "/registry/certificatesigningrequests/"+csr.Name, string(data)); err != nil {
		t.Fatalf("put %s into etcd: %v", csr.Name, err)
	}
}
