package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// clusterWait bounds waits that involve the member cluster's API server.
const clusterWait = 60 * time.Second

// statusFacts are the parts of a ClusterStatus the member cluster decides.
type statusFacts struct {
	Healthy      bool
	Version      string
	Nodes, Ready int32
	CPU          string
}

func factsOf(s *protocol.ClusterStatus) statusFacts {
	return statusFacts{s.APIServerHealthy, s.KubernetesVersion, s.NodesTotal, s.NodesReady, s.Allocatable["cpu"]}
}

func isStatus(healthy bool) func(hubEvent) bool {
	return func(e hubEvent) bool { return e.kind == "status" && e.status.APIServerHealthy == healthy }
}

// TestAgentWithMemberCluster runs the agent against a real member cluster
// and a test hub over QUIC on loopback: lease renewals, status through an
// API server outage, reconnection after the hub drops the connection, and a
// graceful shutdown.
func TestAgentWithMemberCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real member cluster")
	}
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	cluster := env.Clusters()[0]
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil)
	a, err := New(Config{
		Hub:            hub.addr(),
		ClusterName:    cluster.Name,
		Kubeconfig:     cluster.Kubeconfig,
		CertDir:        p.certDir(t, protocol.ClusterCommonName(cluster.Name)),
		StatusInterval: 300 * time.Millisecond,
		Version:        "test",
		Logger:         testLogger(t),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	run := startAgent(t, a)

	hello := hub.waitFor(t, "Hello", waitTimeout, isKind("hello")).hello
	if hello.ClusterName != cluster.Name {
		t.Errorf("Hello names cluster %q, want %q", hello.ClusterName, cluster.Name)
	}
	// Status is reported when it changes (the first report of a session
	// may come before the node watch has synced): wait for the one with
	// the nodes, then for renewals, which keep coming.
	want := statusFacts{Healthy: true, Version: "v1.37.2", Nodes: 3, Ready: 3, CPU: "24"}
	up := hub.waitFor(t, "a healthy ClusterStatus with the nodes", clusterWait, func(e hubEvent) bool {
		return isStatus(true)(e) && factsOf(e.status) == want
	}).status
	checkRenewals(t, hub, 3)
	if diff := cmp.Diff(want, factsOf(up)); diff != "" {
		t.Errorf("status of a healthy cluster (-want +got):\n%s", diff)
	}
	if _, ok := up.Allocated["pods"]; !ok {
		t.Errorf("allocated %v has no pod count", up.Allocated)
	}

	if err := cluster.StopAPIServer(); err != nil {
		t.Fatalf("stop API server: %v", err)
	}
	down := hub.waitFor(t, "an unhealthy ClusterStatus", clusterWait, isStatus(false)).status
	want.Healthy = false // the last known numbers stay
	if diff := cmp.Diff(want, factsOf(down)); diff != "" {
		t.Errorf("status while the API server is down (-want +got):\n%s", diff)
	}
	if down.HealthMessage == "" || down.HealthMessage == "ok" {
		t.Errorf("health message %q does not say what failed", down.HealthMessage)
	}
	t.Logf("health message while down: %s", down.HealthMessage)

	if err := cluster.StartAPIServer(t.Context()); err != nil {
		t.Fatalf("start API server: %v", err)
	}
	hub.waitFor(t, "a healthy ClusterStatus after the restart", clusterWait, isStatus(true))

	first := hub.waitConn(t, waitTimeout)
	first.conn.CloseWithError(0x10, "test: dropping the connection")
	second := hub.waitReconnect(t, first, "the hub dropped the connection")

	run.cancel()
	checkGoodbye(t, hub, second.id, run)
}
