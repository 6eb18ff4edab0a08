package agent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/agent/work"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// TestOwnerServiceAccount runs the agent on a real member cluster, whose
// controller-manager collects garbage: an agent without an owner leaves
// its Lease, certificate Secret and Work record unowned; the same agent
// upgraded to --owner-service-account adds the owner to each of them
// (and a later write of the record keeps it); deleting the ServiceAccount
// while the agent runs, then stopping it, as helm uninstall does, has the
// garbage collector delete them all, and what the Work applied stays.
func TestOwnerServiceAccount(t *testing.T) {
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
		h.join = func(_ int, req *protocol.JoinRequest) protocol.Message { return issued(t, p, nil, req) }
	})
	cfg := Config{Hub: hub.addr(), ClusterName: cluster.Name, Kubeconfig: cluster.Kubeconfig, CertSecret: testSecret,
		BootstrapToken: testToken, HubCAHash: pki.Pin(p.ca.Cert), StatusInterval: 300 * time.Millisecond, Version: "test",
		LeaderElection: LeaderElection{Enabled: true, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}}
	objects := ownableObjects(cfg, "good")

	// Before the upgrade: no owner.
	old := startReplica(t, "old", cfg)
	conn := hub.waitConn(t, clusterWait)
	waitWork[*protocol.WorkInventory](t, hub, conn.id, "the inventory", clusterWait, nil)
	sendWorkApplied(t, hub, conn, configMapWork(t, "good", "ConfigMap"))
	for _, o := range objects {
		if owners := o.owners(t, client); owners == nil || len(*owners) > 0 {
			t.Errorf("%s of the agent without an owner: owners %v, want it there without any", o.what, owners)
		}
	}
	old.cancel()
	if err := old.wait(t, waitTimeout); err != nil {
		t.Fatalf("Run of the agent without an owner = %v", err)
	}

	// The upgrade: the release's ServiceAccount owns them all.
	sa, err := client.CoreV1().ServiceAccounts(work.DefaultSystemNamespace).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: work.DefaultSystemNamespace, Name: "flotilla-agent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.OwnerServiceAccount = sa.Name
	upgraded := startReplica(t, "new", cfg)
	conn = hub.waitNewConn(t, conn, "the upgraded agent")
	for _, o := range objects {
		poll(t, waitTimeout, o.what+" owned by the ServiceAccount", func() bool { return o.ownedBy(t, client, sa.UID) })
	}
	next := configMapWork(t, "good", "ConfigMap")
	next.Generation = 2
	sendWorkApplied(t, hub, conn, next)
	if !objects[2].ownedBy(t, client, sa.UID) {
		t.Errorf("%s lost its owner when the agent wrote it again", objects[2].what)
	}

	// The uninstall: the ServiceAccount goes while the agent still runs
	// (what it writes meanwhile names the owner it read), then the agent.
	if err := client.CoreV1().ServiceAccounts(sa.Namespace).Delete(t.Context(), sa.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	upgraded.cancel()
	if err := upgraded.wait(t, waitTimeout); err != nil {
		t.Fatalf("Run of the upgraded agent = %v", err)
	}
	for _, o := range objects {
		poll(t, clusterWait, "the garbage collector to delete "+o.what, func() bool { return o.owners(t, client) == nil })
	}
	if _, err := client.CoreV1().ConfigMaps("default").Get(t.Context(), "good", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap the Work applied: %v, want it kept", err)
	}
}

// ownable is an object the agent makes for itself in its namespace.
type ownable struct {
	what string // kind and name
	get  func(t *testing.T, c kubernetes.Interface) (metav1.Object, error)
}

// owners are the object's owners, nil if it is gone.
func (o ownable) owners(t *testing.T, c kubernetes.Interface) *[]metav1.OwnerReference {
	t.Helper()
	obj, err := o.get(t, c)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("read %s: %v", o.what, err)
	}
	owners := obj.GetOwnerReferences()
	return &owners
}

// ownedBy reports whether the ServiceAccount of uid owns the object.
func (o ownable) ownedBy(t *testing.T, c kubernetes.Interface, uid types.UID) bool {
	t.Helper()
	owners := o.owners(t, c)
	if owners == nil {
		return false
	}
	for _, r := range *owners {
		if r.Kind == "ServiceAccount" && r.UID == uid && r.BlockOwnerDeletion != nil && !*r.BlockOwnerDeletion {
			return true
		}
	}
	return false
}

// ownableObjects are the election Lease, the certificate Secret and the
// record of Work workName that cfg's agent makes, in that order.
func ownableObjects(cfg Config, workName string) []ownable {
	cfg = cfg.withDefaults()
	ns, lease := cfg.SystemNamespace, cfg.LeaderElection.LeaseName
	return []ownable{
		{"Lease " + lease, func(t *testing.T, c kubernetes.Interface) (metav1.Object, error) {
			return c.CoordinationV1().Leases(ns).Get(t.Context(), lease, metav1.GetOptions{})
		}},
		{"Secret " + cfg.CertSecret, func(t *testing.T, c kubernetes.Interface) (metav1.Object, error) {
			return c.CoreV1().Secrets(ns).Get(t.Context(), cfg.CertSecret, metav1.GetOptions{})
		}},
		{"Work record ConfigMap " + workName, func(t *testing.T, c kubernetes.Interface) (metav1.Object, error) {
			return c.CoreV1().ConfigMaps(ns).Get(t.Context(), workName, metav1.GetOptions{})
		}},
	}
}

// sendWorkApplied sends w on conn and waits until the agent applied it.
func sendWorkApplied(t *testing.T, hub *testHub, conn *hubConn, w *protocol.WorkUpsert) {
	t.Helper()
	if err := conn.sendWork(w); err != nil {
		t.Fatal(err)
	}
	applied := waitWork(t, hub, conn.id, "WorkApplied of "+w.Name, clusterWait, func(m *protocol.WorkApplied) bool {
		return m.Name == w.Name && m.Generation == w.Generation
	})
	if !applied.Applied {
		t.Fatalf("WorkApplied %+v, want applied", applied)
	}
}
