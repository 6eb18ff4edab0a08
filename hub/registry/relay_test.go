package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/relay"
	"github.com/flotilla-io/flotilla/protocol"
)

// relayRegister makes the registry know the clusters (a join, then the
// registration an agent's first hello would make) without a session of
// its own: their sessions come from another replica.
func relayRegister(f *registryFixture, names ...string) {
	f.t.Helper()
	for _, name := range names {
		f.join(name)
		if _, err := f.reg.submit(f.t.Context(), updateOp{register: &protocol.Hello{ClusterName: name}}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// relaySession is a live session of cluster, connected at connectedAt
// and last renewed at renewed (zero: never), as a replica relays it.
func relaySession(cluster, session string, connectedAt, renewed time.Time) relay.Session {
	return relay.Session{Cluster: cluster, Session: session, Remote: "198.51.100.7:4000", Transport: "quic", AgentVersion: "v-test",
		LeaseSeconds: 40, ConnectedAt: connectedAt, LastRenewal: renewed, AgentTime: renewed}
}

// relayApply applies a batch and fails the test if it names clusters the
// registry does not know.
func relayApply(f *registryFixture, b *relay.Batch) {
	f.t.Helper()
	if unknown := f.reg.ApplyRelayed(b); unknown != 0 {
		f.t.Fatalf("ApplyRelayed: %d sessions of unknown clusters, want 0", unknown)
	}
}

// relayStored flushes the registry and returns the Cluster as stored.
func relayStored(f *registryFixture, name string) *v1alpha1.Cluster {
	f.t.Helper()
	f.flush()
	c, err := f.reg.clusters.Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func relayConnectedTo(c *v1alpha1.Cluster) string {
	if c.Status.Agent == nil {
		return ""
	}
	return c.Status.Agent.ConnectedTo
}

// relayEntrySession is the registry's session of a cluster and the
// replica it attributes it to.
func relayEntrySession(f *registryFixture, name string) (session, replica string) {
	f.t.Helper()
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	e, ok := f.reg.entries[name]
	if !ok {
		f.t.Fatalf("cluster %s unknown to the registry", name)
	}
	return e.session, e.replica
}

func relayRenewTime(f *registryFixture, name string) time.Time {
	f.t.Helper()
	l, err := f.reg.GetLease(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Spec.RenewTime.Time
}

// TestRegistryRelayedRenewal: a relayed session connects its cluster to
// the replica that serves it, and the replica's stamp of the last
// renewal is the lease's (a stamp from the future is taken as now), so
// the lease expires at that stamp plus the grace period.
func TestRegistryRelayedRenewal(t *testing.T) {
	for _, tt := range []struct {
		name  string
		stamp time.Duration // relative to the batch's arrival
		want  time.Duration // last renewal, relative to the arrival
	}{
		{"a moment before now", -700 * time.Millisecond, -700 * time.Millisecond},
		{"in the future is clamped to now", 5 * time.Second, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
			relayRegister(f, "edge-1")
			clk.Step(10 * time.Second)
			now := clk.Now()
			relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Full: true,
				Sessions: []relay.Session{relaySession("edge-1", "hub-b-1", now.Add(-5*time.Second), now.Add(tt.stamp))}})

			renewed := now.Add(tt.want)
			c := relayStored(f, "edge-1")
			if got := relayConnectedTo(c); got != "hub-b" {
				t.Errorf("connectedTo = %q, want hub-b", got)
			}
			if got := readyOf(c); got != metav1.ConditionTrue {
				t.Errorf("Ready = %q after a relayed renewal, want True", got)
			}
			if a := f.cluster("edge-1").Status.Agent; a == nil || a.ConnectedAt == nil || !a.ConnectedAt.Time.Equal(now.Add(-5*time.Second)) {
				t.Errorf("status.agent %+v, want connectedAt the session's start, now-5s", a)
			}
			if got := relayRenewTime(f, "edge-1"); !got.Equal(renewed) {
				t.Errorf("lease renewTime = now%+v, want now%+v", got.Sub(now), tt.want)
			}
			if session, replica := relayEntrySession(f, "edge-1"); session != "hub-b-1" || replica != "replica-b" {
				t.Errorf("registry session %q of replica %q, want hub-b-1 of replica-b", session, replica)
			}

			expiry := renewed.Add(40 * time.Second)
			f.advance(expiry.Add(-time.Millisecond).Sub(clk.Now()))
			if got := readyOf(relayStored(f, "edge-1")); got != metav1.ConditionTrue {
				t.Fatalf("a millisecond before the last renewal + grace: stored Ready %q, want True", got)
			}
			f.advance(time.Millisecond)
			if got := readyOf(relayStored(f, "edge-1")); got != metav1.ConditionUnknown {
				t.Fatalf("at the last renewal + grace: stored Ready %q, want Unknown", got)
			}
		})
	}
}

func TestRegistryRelayedStatus(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	relayRegister(f, "edge-1")
	clk.Step(time.Second)
	s := relaySession("edge-1", "hub-b-1", t0, clk.Now())
	s.Status = &protocol.ClusterStatus{ObservedAt: t0, KubernetesVersion: "v1.37.2", APIServerHealthy: true, NodesTotal: 3, NodesReady: 2,
		Allocatable: map[string]string{"cpu": "24"}}
	relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Sessions: []relay.Session{s}})
	c := relayStored(f, "edge-1")
	if diff := cmp.Diff(&v1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 2}, c.Status.NodeSummary); diff != "" {
		t.Errorf("stored nodeSummary (-want +got):\n%s", diff)
	}
	if c.Status.KubernetesVersion != "v1.37.2" {
		t.Errorf("stored kubernetesVersion %q, want v1.37.2", c.Status.KubernetesVersion)
	}
	if c.Status.ResourceSummary == nil || c.Status.ResourceSummary.Allocatable.Cpu().String() != "24" {
		t.Errorf("stored resourceSummary %+v, want 24 CPUs allocatable", c.Status.ResourceSummary)
	}

	// A later batch without a report keeps it.
	clk.Step(time.Second)
	relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Sessions: []relay.Session{relaySession("edge-1", "hub-b-1", t0, clk.Now())}})
	if got := relayStored(f, "edge-1").Status.NodeSummary; got == nil || got.TotalNum != 3 {
		t.Errorf("after a batch without a report nodeSummary = %+v, want 3 nodes", got)
	}
}

// TestRegistryRelayedEnd: an ended session disconnects its cluster only if
// it is the one the registry has for it.
func TestRegistryRelayedEnd(t *testing.T) {
	for _, tt := range []struct {
		name          string
		from          relay.Batch // its sessions: the ended one
		ended         string      // session id
		wantConnected string
		wantSession   string
	}{
		{"the current session", relay.Batch{Replica: "replica-b", HubID: "hub-b"}, "hub-b-1", "", ""},
		{"an earlier session", relay.Batch{Replica: "replica-b", HubID: "hub-b"}, "hub-b-0", "hub-b", "hub-b-1"},
		{"another replica's session", relay.Batch{Replica: "replica-c", HubID: "hub-c"}, "hub-c-1", "hub-b", "hub-b-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
			relayRegister(f, "edge-1")
			relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Sessions: []relay.Session{relaySession("edge-1", "hub-b-1", t0, t0)}})
			if got := relayConnectedTo(relayStored(f, "edge-1")); got != "hub-b" {
				t.Fatalf("connectedTo = %q before the end, want hub-b", got)
			}
			clk.Step(time.Second)
			b := tt.from
			b.Sessions = []relay.Session{{Cluster: "edge-1", Session: tt.ended, Ended: "agent stopped"}}
			relayApply(f, &b)
			if got := relayConnectedTo(relayStored(f, "edge-1")); got != tt.wantConnected {
				t.Errorf("stored connectedTo = %q, want %q", got, tt.wantConnected)
			}
			if session, _ := relayEntrySession(f, "edge-1"); session != tt.wantSession {
				t.Errorf("registry session %q, want %q", session, tt.wantSession)
			}
		})
	}
}

// TestRegistryRelayedFullBatch: a full batch ends the sessions the
// registry attributes to its replica and it no longer lists, and no
// others.
func TestRegistryRelayedFullBatch(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	relayRegister(f, "listed", "unlisted", "other-replica")
	f.connect("local")
	f.renew("local")
	relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Full: true, Sessions: []relay.Session{
		relaySession("listed", "hub-b-1", t0, t0), relaySession("unlisted", "hub-b-2", t0, t0)}})
	relayApply(f, &relay.Batch{Replica: "replica-c", HubID: "hub-c", Full: true, Sessions: []relay.Session{
		relaySession("other-replica", "hub-c-1", t0, t0)}})
	names := []string{"listed", "unlisted", "other-replica", "local"}
	connected := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, name := range names {
			out[name] = relayConnectedTo(relayStored(f, name))
		}
		return out
	}
	want := map[string]string{"listed": "hub-b", "unlisted": "hub-b", "other-replica": "hub-c", "local": "hub-test"}
	if diff := cmp.Diff(want, connected()); diff != "" {
		t.Fatalf("connectedTo before (-want +got):\n%s", diff)
	}

	clk.Step(time.Second)
	relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Full: true, Sessions: []relay.Session{relaySession("listed", "hub-b-1", t0, clk.Now())}})
	want["unlisted"] = ""
	if diff := cmp.Diff(want, connected()); diff != "" {
		t.Errorf("connectedTo after a full batch without unlisted (-want +got):\n%s", diff)
	}

	// A batch that is not full lists what changed only.
	relayApply(f, &relay.Batch{Replica: "replica-c", HubID: "hub-c", Sessions: nil})
	if diff := cmp.Diff(want, connected()); diff != "" {
		t.Errorf("connectedTo after an empty batch that is not full (-want +got):\n%s", diff)
	}
}

// TestRegistryRelayedOlderSession: a relayed session that began before
// the cluster's current one is the agent's past and changes nothing; a
// newer one takes over.
func TestRegistryRelayedOlderSession(t *testing.T) {
	for _, tt := range []struct {
		name        string
		connectedAt time.Duration // since t0; the local session began at t0+10s
		wantTo      string
		wantRenewal bool
	}{
		{"older", 5 * time.Second, "hub-test", false},
		{"newer", 11 * time.Second, "hub-b", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
			relayRegister(f, "edge-1")
			clk.Step(10 * time.Second)
			f.connect("edge-1") // no renewal yet
			clk.Step(2 * time.Second)
			s := relaySession("edge-1", "hub-b-1", t0.Add(tt.connectedAt), clk.Now().Add(-time.Second))
			s.Status = &protocol.ClusterStatus{ObservedAt: t0, APIServerHealthy: true, NodesTotal: 7, NodesReady: 7}
			relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Sessions: []relay.Session{s}})

			c := relayStored(f, "edge-1")
			if got := relayConnectedTo(c); got != tt.wantTo {
				t.Errorf("connectedTo = %q, want %q", got, tt.wantTo)
			}
			_, err := f.reg.GetLease("edge-1")
			if renewed := err == nil; renewed != tt.wantRenewal {
				t.Errorf("lease renewed: %v, want %v", renewed, tt.wantRenewal)
			}
			if got := c.Status.NodeSummary != nil; got != tt.wantRenewal {
				t.Errorf("relayed status applied: %v, want %v", got, tt.wantRenewal)
			}
		})
	}
}

// TestRegistryReplicaLost: the clusters a lost replica served get a grace
// period and a lease duration from the loss to reconnect; those of other
// replicas expire on time, and a renewal after the loss ends the grace.
// Grace 40 s, leases of 40 s; every cluster last renewed at t0+10s, the
// replica last heard of at t0+20s.
func TestRegistryReplicaLost(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	names := []string{"lost", "moved", "renewed", "other-replica", "local"}
	relayRegister(f, names...)
	clk.Step(10 * time.Second)
	now := clk.Now()
	relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Full: true, Sessions: []relay.Session{
		relaySession("lost", "hub-b-1", t0, now), relaySession("moved", "hub-b-2", t0, now), relaySession("renewed", "hub-b-3", t0, now)}})
	relayApply(f, &relay.Batch{Replica: "replica-c", HubID: "hub-c", Full: true, Sessions: []relay.Session{relaySession("other-replica", "hub-c-1", t0, now)}})
	f.connect("local")
	f.renew("local")

	// replica-b was last heard of at t0+20s; the loss is noticed a
	// second later.
	clk.Step(11 * time.Second)
	lostAt := t0.Add(20 * time.Second)
	if n := f.reg.ReplicaLost("replica-b", lostAt); n != 3 {
		t.Errorf("ReplicaLost(replica-b) = %d clusters, want 3", n)
	}
	if n := f.reg.ReplicaLost("replica-b", lostAt); n != 0 {
		t.Errorf("ReplicaLost(replica-b) again = %d clusters, want 0", n)
	}
	connected := map[string]string{}
	for _, name := range names {
		connected[name] = relayConnectedTo(relayStored(f, name))
	}
	if diff := cmp.Diff(map[string]string{"lost": "", "moved": "", "renewed": "", "other-replica": "hub-c", "local": "hub-test"}, connected); diff != "" {
		t.Errorf("connectedTo after the loss (-want +got):\n%s", diff)
	}
	f.reg.mu.Lock()
	if got := f.reg.entries["lost"].obs.ReplicaLostAt; !got.Equal(lostAt) {
		t.Errorf("lost: replicaLostAt t0%+v, want t0%+v", got.Sub(t0), lostAt.Sub(t0))
	}
	if got := f.reg.entries["other-replica"].obs.ReplicaLostAt; !got.IsZero() {
		t.Errorf("other-replica: replicaLostAt t0%+v, want none", got.Sub(t0))
	}
	f.reg.mu.Unlock()

	// At t0+25s, moved reconnects through replica-c and renews at t0+26s;
	// renewed renews (here) at t0+25s without a new session.
	clk.Step(4 * time.Second)
	relayApply(f, &relay.Batch{Replica: "replica-c", HubID: "hub-c", Sessions: []relay.Session{
		relaySession("moved", "hub-c-2", clk.Now(), time.Time{})}})
	if _, err := f.reg.Renew("renewed", "agent-renewed", clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	relayApply(f, &relay.Batch{Replica: "replica-c", HubID: "hub-c", Sessions: []relay.Session{
		relaySession("moved", "hub-c-2", t0.Add(25*time.Second), clk.Now())}})

	const T, U = metav1.ConditionTrue, metav1.ConditionUnknown
	steps := []struct {
		at   time.Duration // since t0
		want map[string]metav1.ConditionStatus
	}{
		// other-replica and local: renewed at t0+10s, grace 40 s.
		{50*time.Second - time.Millisecond, map[string]metav1.ConditionStatus{"lost": T, "moved": T, "renewed": T, "other-replica": T, "local": T}},
		{50 * time.Second, map[string]metav1.ConditionStatus{"lost": T, "moved": T, "renewed": T, "other-replica": U, "local": U}},
		// renewed: at t0+25s, plus the grace.
		{65*time.Second - time.Millisecond, map[string]metav1.ConditionStatus{"lost": T, "moved": T, "renewed": T, "other-replica": U, "local": U}},
		{65 * time.Second, map[string]metav1.ConditionStatus{"lost": T, "moved": T, "renewed": U, "other-replica": U, "local": U}},
		// moved: at t0+26s, plus the grace.
		{66*time.Second - time.Millisecond, map[string]metav1.ConditionStatus{"lost": T, "moved": T, "renewed": U, "other-replica": U, "local": U}},
		{66 * time.Second, map[string]metav1.ConditionStatus{"lost": T, "moved": U, "renewed": U, "other-replica": U, "local": U}},
		// lost: the loss at t0+20s, plus the grace and a lease duration.
		{100*time.Second - time.Millisecond, map[string]metav1.ConditionStatus{"lost": T, "moved": U, "renewed": U, "other-replica": U, "local": U}},
		{100 * time.Second, map[string]metav1.ConditionStatus{"lost": U, "moved": U, "renewed": U, "other-replica": U, "local": U}},
	}
	for _, st := range steps {
		f.advance(t0.Add(st.at).Sub(clk.Now()))
		got := map[string]metav1.ConditionStatus{}
		for _, name := range names {
			got[name] = readyOf(relayStored(f, name))
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("at t0+%v, stored Ready (-want +got):\n%s", st.at, diff)
		}
	}
}

// TestRegistryReplicaLostHeardLater: a replica last heard of "after" now
// (another clock) is lost as of now.
func TestRegistryReplicaLostHeardLater(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	relayRegister(f, "edge-1")
	relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Sessions: []relay.Session{relaySession("edge-1", "hub-b-1", t0, t0)}})
	clk.Step(10 * time.Second)
	if n := f.reg.ReplicaLost("replica-b", clk.Now().Add(time.Minute)); n != 1 {
		t.Fatalf("ReplicaLost = %d clusters, want 1", n)
	}
	// The loss at t0+10s, plus the grace and a lease duration.
	f.advance(t0.Add(90*time.Second - time.Millisecond).Sub(clk.Now()))
	if got := readyOf(relayStored(f, "edge-1")); got != metav1.ConditionTrue {
		t.Fatalf("at t0+90s-1ms stored Ready %q, want True", got)
	}
	f.advance(time.Millisecond)
	if got := readyOf(relayStored(f, "edge-1")); got != metav1.ConditionUnknown {
		t.Fatalf("at t0+90s stored Ready %q, want Unknown", got)
	}
}

// TestRegistryRelayedUnknownClusters: ApplyRelayed counts the live
// sessions of clusters the registry does not know, and applies the rest.
func TestRegistryRelayedUnknownClusters(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sessions []relay.Session
		want     int
	}{
		{"none", nil, 0},
		{"all known", []relay.Session{relaySession("known", "hub-b-1", t0, t0)}, 0},
		{"two unknown", []relay.Session{relaySession("known", "hub-b-1", t0, t0), relaySession("stranger-1", "hub-b-2", t0, t0),
			relaySession("stranger-2", "hub-b-3", t0, t0)}, 2},
		{"ended sessions are not counted", []relay.Session{relaySession("stranger-1", "hub-b-2", t0, t0),
			{Cluster: "stranger-2", Session: "hub-b-3", Ended: "agent stopped"}, {Cluster: "stranger-3", Session: "hub-b-4", Dropped: true}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
			relayRegister(f, "known")
			if got := f.reg.ApplyRelayed(&relay.Batch{Replica: "replica-b", HubID: "hub-b", Full: true, Sessions: tt.sessions}); got != tt.want {
				t.Errorf("ApplyRelayed = %d unknown, want %d", got, tt.want)
			}
			if _, err := f.reg.GetCluster("stranger-1"); err == nil {
				t.Errorf("a relayed session registered an unknown cluster")
			}
		})
	}
}

// TestRegistrySupersedesAcrossReplicas: one session per cluster across
// the replicas. A relayed session newer than the local one ends the
// local one; a relayed session older than the current one is itself
// ended on its replica; a local session replacing a local one is the
// agent server's business, not the registry's.
func TestRegistrySupersedesAcrossReplicas(t *testing.T) {
	type ended struct{ cluster, session, replica string }
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	ends := make(chan ended, 8)
	f.reg.SetSupersede(func(cluster, session, replica, reason string) {
		if !strings.Contains(reason, "one session per cluster") {
			t.Errorf("reason %q", reason)
		}
		ends <- ended{cluster, session, replica}
	})
	next := func(what string) ended {
		t.Helper()
		// The registry calls the hook before ApplyRelayed returns.
		select {
		case e := <-ends:
			return e
		default:
			t.Fatalf("%s: no session ended", what)
			return ended{}
		}
	}

	f.connect("edge-1") // session-edge-1, on this hub
	clk.Step(time.Second)
	relayApply(f, &relay.Batch{Replica: "replica-b", HubID: "hub-b", Sessions: []relay.Session{relaySession("edge-1", "hub-b/1", clk.Now(), time.Time{})}})
	if got, want := next("a newer relayed session"), (ended{"edge-1", "session-edge-1", ""}); got != want {
		t.Errorf("ended %+v, want %+v", got, want)
	}

	// An older session of replica-c shows up: it is the one to end.
	relayApply(f, &relay.Batch{Replica: "replica-c", HubID: "hub-c", Sessions: []relay.Session{relaySession("edge-1", "hub-c/9", t0, time.Time{})}})
	if got, want := next("an older relayed session"), (ended{"edge-1", "hub-c/9", "replica-c"}); got != want {
		t.Errorf("ended %+v, want %+v", got, want)
	}
	if session, replica := relayEntrySession(f, "edge-1"); session != "hub-b/1" || replica != "replica-b" {
		t.Errorf("edge-1 served by %s on %q, want hub-b/1 on replica-b", session, replica)
	}

	// Local replacing local: nothing from the registry.
	f.connect("edge-2")
	hello := &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: "edge-2", AgentVersion: "v-test", LeaseDurationSeconds: 40}
	if err := f.reg.Connect(t.Context(), hello, "session-edge-2-again", "192.0.2.2:4000", "quic"); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ends:
		t.Errorf("a local replacement ended %+v", e)
	default:
	}
}
