package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// TestWorkStreamOnAFakeCluster: the agent opens the work stream with its
// inventory, confirms at once the delete of a Work it does not know, and
// ends the session when the hub breaks the protocol on the work stream.
func TestWorkStreamOnAFakeCluster(t *testing.T) {
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil)
	a := newTestAgent(t, p, hub.addr(), fakeCluster(1), healthy)
	run := startAgent(t, a)

	first := hub.waitConn(t, waitTimeout)
	inv := waitWork[*protocol.WorkInventory](t, hub, first.id, "the inventory", waitTimeout, nil)
	if len(inv.Works) != 0 {
		t.Errorf("inventory of a new agent = %v, want none", inv.Works)
	}
	if err := first.sendWork(&protocol.WorkDelete{Name: "ghost"}); err != nil {
		t.Fatal(err)
	}
	waitWork(t, hub, first.id, "WorkDeleted of an unknown Work", waitTimeout, func(d *protocol.WorkDeleted) bool { return d.Name == "ghost" })

	if err := first.sendWork(&protocol.LeaseAck{Seq: 1, HubTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	second := hub.waitNewConn(t, first, "a LeaseAck on the work stream")
	waitWork[*protocol.WorkInventory](t, hub, second.id, "the inventory on the new connection", waitTimeout, nil)
	run.cancel()
	checkGoodbye(t, hub, second.id, run)
}

// TestAgentAppliesWork drives the work stream over QUIC against a real
// member cluster: an upsert is applied and answered, its health follows,
// a new session starts with the inventory and a status snapshot, and a
// delete removes the objects before it is confirmed.
func TestAgentAppliesWork(t *testing.T) {
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
	hub := startTestHub(t, p.hubTLS(t), nil)
	a, err := New(Config{Hub: hub.addr(), ClusterName: cluster.Name, Kubeconfig: cluster.Kubeconfig,
		CertDir: p.certDir(t, protocol.ClusterCommonName(cluster.Name)), SystemNamespace: "flotilla-test",
		Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	run := startAgent(t, a)

	first := hub.waitConn(t, waitTimeout)
	waitWork[*protocol.WorkInventory](t, hub, first.id, "the inventory", clusterWait, nil)
	if err := first.sendWork(shopWork(t)); err != nil {
		t.Fatal(err)
	}
	applied := waitWork(t, hub, first.id, "WorkApplied", clusterWait, func(a *protocol.WorkApplied) bool { return a.Name == "shop" })
	if !applied.Applied || applied.Generation != 1 {
		t.Fatalf("WorkApplied = %+v, want generation 1 applied", applied)
	}
	waitWork(t, hub, first.id, "a WorkStatus with 2 ready replicas", clusterWait, func(s *protocol.WorkStatus) bool {
		return s.Name == "shop" && s.Manifests[0].Health == protocol.HealthHealthy && readyReplicas(t, s.Manifests[0]) == 2
	})
	if _, err := client.CoreV1().ConfigMaps("flotilla-test").Get(t.Context(), "shop", metav1.GetOptions{}); err != nil {
		t.Errorf("record of the Work in the configured system namespace: %v", err)
	}

	first.conn.CloseWithError(0x10, "test: dropping the connection")
	second := hub.waitNewConn(t, first, "the hub dropped the connection")
	inv := waitWork[*protocol.WorkInventory](t, hub, second.id, "the inventory after reconnecting", clusterWait, nil)
	if diff := cmp.Diff([]protocol.WorkRef{{Name: "shop", Generation: 1}}, inv.Works); diff != "" {
		t.Errorf("inventory after reconnecting (-want +got):\n%s", diff)
	}
	snapshot := waitWork[*protocol.WorkStatus](t, hub, second.id, "the status snapshot", clusterWait, nil)
	if snapshot.Name != "shop" || snapshot.Manifests[0].Health != protocol.HealthHealthy {
		t.Errorf("status snapshot = %+v, want shop Healthy", snapshot)
	}

	if err := second.sendWork(&protocol.WorkDelete{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	waitWork(t, hub, second.id, "WorkDeleted", clusterWait, func(d *protocol.WorkDeleted) bool { return d.Name == "shop" })
	_, err = client.AppsV1().Deployments("shop").Get(t.Context(), "shop", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get the Deployment after WorkDeleted: %v, want NotFound", err)
	}
	run.cancel()
	checkGoodbye(t, hub, second.id, run)
	if left := agentGoroutines(); len(left) > 0 {
		t.Errorf("goroutines left behind by Run: %v", left)
	}
}

// shopWork is a Work with a 2-replica Deployment in a new namespace.
func shopWork(t *testing.T) *protocol.WorkUpsert {
	t.Helper()
	labels := map[string]any{"app": "shop"}
	deployment, err := json.Marshal(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "shop", "namespace": "shop"},
		"spec": map[string]any{
			"replicas": 2,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "shop", "image": "shop:1"}}},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &protocol.WorkUpsert{Name: "shop", Generation: 1, Binding: "default/shop", Manifests: []json.RawMessage{deployment}}
}

func readyReplicas(t *testing.T, r protocol.ManifestResult) int64 {
	t.Helper()
	var status struct{ ReadyReplicas int64 }
	if len(r.Status) > 0 {
		if err := json.Unmarshal(r.Status, &status); err != nil {
			t.Fatal(err)
		}
	}
	return status.ReadyReplicas
}

// TestAgentFencesWhenAcksStop: a hub that stops acknowledging renewals
// (the connection still up) cuts the agent off; after stopAfterSeconds the
// agent fences the Work, ends the session although its lease has not run
// out, and reports the Work fenced in the next inventory; the hub's upsert
// restores it.
func TestAgentFencesWhenAcksStop(t *testing.T) {
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
	// A lease of 10 s: the session would outlive the fencing time.
	longLease := func(*protocol.Hello) protocol.Message {
		return &protocol.Welcome{ProtocolVersion: protocol.Version, HubID: "test-hub", HubTime: time.Now(),
			LeaseDurationSeconds: 10, RenewIntervalMillis: 100}
	}
	hub := startTestHub(t, p.hubTLS(t), longLease)
	a, err := New(Config{Hub: hub.addr(), ClusterName: cluster.Name, Kubeconfig: cluster.Kubeconfig,
		CertDir: p.certDir(t, protocol.ClusterCommonName(cluster.Name)), Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	run := startAgent(t, a)
	replicas := func() int32 {
		d, err := client.AppsV1().Deployments("shop").Get(t.Context(), "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the Deployment: %v", err)
		}
		return *d.Spec.Replicas
	}

	first := hub.waitConn(t, waitTimeout)
	waitWork[*protocol.WorkInventory](t, hub, first.id, "the inventory", clusterWait, nil)
	shop := shopWork(t)
	shop.StopAfterSeconds = 1
	if err := first.sendWork(shop); err != nil {
		t.Fatal(err)
	}
	if applied := waitWork(t, hub, first.id, "WorkApplied", clusterWait, func(a *protocol.WorkApplied) bool { return a.Name == "shop" }); !applied.Applied {
		t.Fatalf("not applied: %s", applied.Message)
	}
	// Acks keep coming past the fencing time: nothing is fenced.
	hub.waitFor(t, "renewals for 1.5 s", waitTimeout, func(e hubEvent) bool {
		return e.kind == "renew" && e.conn == first.id && e.renew.Seq >= 15
	})
	if r := replicas(); r != 2 {
		t.Fatalf("the Deployment has %d replicas while the hub answers, want 2", r)
	}

	hub.muteAcks.Store(true)
	second := hub.waitNewConn(t, first, "the agent fenced the Work")
	hub.muteAcks.Store(false)
	if r := replicas(); r != 0 {
		t.Errorf("the Deployment has %d replicas after the fence, want 0", r)
	}
	inv := waitWork[*protocol.WorkInventory](t, hub, second.id, "the inventory after the fence", clusterWait, nil)
	if diff := cmp.Diff([]protocol.WorkRef{{Name: "shop", Generation: 1, Fenced: true}}, inv.Works); diff != "" {
		t.Errorf("inventory after the fence (-want +got):\n%s", diff)
	}
	if err := second.sendWork(shop); err != nil {
		t.Fatal(err)
	}
	waitWork(t, hub, second.id, "the restore applied", clusterWait, func(a *protocol.WorkApplied) bool { return a.Name == "shop" && a.Applied })
	if r := replicas(); r != 2 {
		t.Errorf("the Deployment has %d replicas after the restore, want 2", r)
	}
	run.cancel()
	checkGoodbye(t, hub, second.id, run)
}
