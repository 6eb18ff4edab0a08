package replicas

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/hub/internal/testapi"
	"github.com/flotilla-io/flotilla/hub/registry"
	"github.com/flotilla-io/flotilla/hub/relay"
	"github.com/flotilla-io/flotilla/protocol"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// The package's tests share one embedded API server.
func TestMain(m *testing.M) { testapi.Main(m) }

// relayFixture is a Relay of replica "replica-a" (hub ID "hub-a")
// on a fake clock, whose send records the batches (decoded) and fails
// while fail is set.
type relayFixture struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	relay *Relay

	mu   sync.Mutex
	sent []sentBatch
	fail error
}

type sentBatch struct {
	to    string
	batch *relay.Batch
}

func newRelayFixture(t *testing.T, clk *clocktesting.FakeClock) *relayFixture {
	t.Helper()
	f := &relayFixture{t: t, clock: clk}
	send := func(to string, msg []byte) error {
		b, err := relay.Decode(msg)
		if err != nil {
			t.Errorf("the relay sent a batch that does not decode: %v", err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sent = append(f.sent, sentBatch{to: to, batch: b})
		return f.fail
	}
	known := func(string) *v1alpha1.Cluster { return nil }
	f.relay = NewRelay("hub-a", "replica-a", nil, known, send, clk, slog.New(slog.NewTextHandler(t.Output(), nil)))
	return f
}

// connect is the agent's hello to this replica, session "hub-a-"+name.
func (f *relayFixture) connect(name string) {
	f.t.Helper()
	hello := &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: name, AgentVersion: "v-test", LeaseDurationSeconds: 40}
	if err := f.relay.Connect(f.t.Context(), hello, "hub-a-"+name, "192.0.2.1:4000", "quic"); err != nil {
		f.t.Fatal(err)
	}
}

// renew renews name's lease with the agent's clock agentSkew ahead and
// returns the stamp.
func (f *relayFixture) renew(name string, agentSkew time.Duration) time.Time {
	f.t.Helper()
	stamp, err := f.relay.Renew(name, "agent-"+name, f.clock.Now().Add(agentSkew))
	if err != nil {
		f.t.Fatal(err)
	}
	return stamp
}

// flush flushes the relay and returns the batches it sent, sessions by
// cluster.
func (f *relayFixture) flush() []sentBatch {
	f.t.Helper()
	f.relay.flush()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.sent
	f.sent = nil
	for _, s := range out {
		if s.batch != nil {
			slices.SortFunc(s.batch.Sessions, func(a, b relay.Session) int { return strings.Compare(a.Cluster, b.Cluster) })
		}
	}
	return out
}

// flushOne flushes the relay and returns the one batch it must have sent
// to want.
func (f *relayFixture) flushOne(to string) *relay.Batch {
	f.t.Helper()
	sent := f.flush()
	if len(sent) != 1 || sent[0].to != to || sent[0].batch == nil {
		f.t.Fatalf("flush sent %d batches %+v, want one to %s", len(sent), sent, to)
	}
	return sent[0].batch
}

func (f *relayFixture) flushNone() {
	f.t.Helper()
	if sent := f.flush(); len(sent) != 0 {
		f.t.Fatalf("flush sent %d batches, want none: %+v", len(sent), sent)
	}
}

// ignoreSeq leaves batch numbers to TestSessionRelayNumbersBatches.
var ignoreSeq = cmpopts.IgnoreFields(relay.Batch{}, "Seq")

// TestSessionRelayNumbersBatches: every batch sent, heartbeats and failed
// ones included, has the next number.
func TestSessionRelayNumbersBatches(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRelayFixture(t, clk)
	f.relay.SetLeader("leader-x")
	f.connect("edge-1")
	var seqs []uint64
	seqs = append(seqs, f.flushOne("leader-x").Seq)
	f.fail = errors.New("down")
	clk.Step(relayHeartbeat)
	seqs = append(seqs, f.flushOne("leader-x").Seq)
	f.fail = nil
	clk.Step(relayInterval)
	seqs = append(seqs, f.flushOne("leader-x").Seq)
	if diff := cmp.Diff([]uint64{1, 2, 3}, seqs); diff != "" {
		t.Errorf("batch numbers (-want +got):\n%s", diff)
	}
}

// TestSessionRelayFollowsTheElector: the elector's view of the leader,
// not the order of its notifications, says where batches go; a new
// leader gets every session.
func TestSessionRelayFollowsTheElector(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRelayFixture(t, clk)
	leader := "leader-y"
	leaderOf := func() string { return leader }
	f.relay.leaderOf.Store(&leaderOf)
	f.relay.SetLeader("leader-x") // a late notification
	f.connect("edge-1")
	if b := f.flushOne("leader-y"); !b.Full {
		t.Errorf("first batch to leader-y not full")
	}
	leader = "leader-z"
	clk.Step(relayInterval)
	if b := f.flushOne("leader-z"); !b.Full {
		t.Errorf("first batch to leader-z not full")
	}
	f.relay.RequestFull()
	clk.Step(relayInterval)
	if b := f.flushOne("leader-z"); !b.Full {
		t.Errorf("batch after a resync request not full")
	}
}

// relayLive is a session of the fixture as the relay lists it, connected
// at connectedAt.
func relayLive(name string, connectedAt time.Time) relay.Session {
	return relay.Session{Cluster: name, Session: "hub-a-" + name, Remote: "192.0.2.1:4000", Transport: "quic", AgentVersion: "v-test",
		LeaseSeconds: 40, ConnectedAt: connectedAt}
}

// TestSessionRelayStandingBy: standing by, the relay stamps renewals
// itself and sends the leader every session first, then what changed.
func TestSessionRelayStandingBy(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRelayFixture(t, clk)
	f.connect("edge-1")
	f.connect("edge-2")
	clk.Step(2 * time.Second)
	stamp := f.renew("edge-1", 300*time.Millisecond)
	if !stamp.Equal(clk.Now()) {
		t.Errorf("Renew stamped t0%+v, want now (t0%+v)", stamp.Sub(t0), clk.Now().Sub(t0))
	}
	report := &protocol.ClusterStatus{ObservedAt: t0.Add(time.Second), KubernetesVersion: "v1.37.2", APIServerHealthy: true, NodesTotal: 3, NodesReady: 3,
		Allocatable: map[string]string{"cpu": "24"}}
	if err := f.relay.Status("edge-1", report); err != nil {
		t.Fatal(err)
	}
	f.relay.SetLeader("leader-x")

	edge1 := relayLive("edge-1", t0)
	edge1.LastRenewal, edge1.AgentTime, edge1.Status = stamp, stamp.Add(300*time.Millisecond), report
	want := &relay.Batch{Replica: "replica-a", HubID: "hub-a", Full: true, Sessions: []relay.Session{edge1, relayLive("edge-2", t0)}}
	if diff := cmp.Diff(want, f.flushOne("leader-x"), ignoreSeq); diff != "" {
		t.Errorf("first batch (-want +got):\n%s", diff)
	}

	clk.Step(relayInterval)
	f.flushNone()

	stamp = f.renew("edge-1", 0)
	edge1.LastRenewal, edge1.AgentTime, edge1.Status = stamp, stamp, nil // the report was sent
	want = &relay.Batch{Replica: "replica-a", HubID: "hub-a", Sessions: []relay.Session{edge1}}
	if diff := cmp.Diff(want, f.flushOne("leader-x"), ignoreSeq); diff != "" {
		t.Errorf("batch after a renewal (-want +got):\n%s", diff)
	}
	f.flushNone()

	// Silent for relayHeartbeat, it says so.
	clk.Step(relayHeartbeat)
	want = &relay.Batch{Replica: "replica-a", HubID: "hub-a", Sessions: nil}
	if diff := cmp.Diff(want, f.flushOne("leader-x"), ignoreSeq); diff != "" {
		t.Errorf("heartbeat batch (-want +got):\n%s", diff)
	}
	f.flushNone()

	// Every relayFullInterval, all sessions again.
	clk.Step(relayFullInterval)
	want = &relay.Batch{Replica: "replica-a", HubID: "hub-a", Full: true, Sessions: []relay.Session{edge1, relayLive("edge-2", t0)}}
	if diff := cmp.Diff(want, f.flushOne("leader-x"), ignoreSeq); diff != "" {
		t.Errorf("batch after the full interval (-want +got):\n%s", diff)
	}
	if got := f.relay.sent.Load(); got != 4 {
		t.Errorf("%d batches counted as sent, want 4", got)
	}
}

// TestSessionRelayEndStandingBy: a session that ends while the replica
// stands by is no longer live and goes to the leader with the next batch.
func TestSessionRelayEndStandingBy(t *testing.T) {
	for _, tt := range []struct {
		name  string
		end   func(r *Relay)
		ended relay.Session
	}{
		{"disconnect", func(r *Relay) { r.Disconnect("edge-1", "hub-a-edge-1", "agent stopped") },
			relay.Session{Cluster: "edge-1", Session: "hub-a-edge-1", Ended: "agent stopped"}},
		{"drop", func(r *Relay) { r.DropSession("edge-1", "hub-a-edge-1") },
			relay.Session{Cluster: "edge-1", Session: "hub-a-edge-1", Dropped: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			f := newRelayFixture(t, clk)
			f.relay.SetLeader("leader-x")
			f.connect("edge-1")
			f.connect("edge-2")
			f.flushOne("leader-x")
			clk.Step(time.Second)
			tt.end(f.relay)
			if got := f.relay.sessionCount(); got != 1 {
				t.Errorf("%d live sessions after the end, want 1", got)
			}
			want := &relay.Batch{Replica: "replica-a", HubID: "hub-a", Sessions: []relay.Session{tt.ended}}
			if diff := cmp.Diff(want, f.flushOne("leader-x"), ignoreSeq); diff != "" {
				t.Errorf("batch after the end (-want +got):\n%s", diff)
			}
			f.flushNone()
			// And the next full batch no longer lists it.
			clk.Step(relayFullInterval)
			want = &relay.Batch{Replica: "replica-a", HubID: "hub-a", Full: true, Sessions: []relay.Session{relayLive("edge-2", t0)}}
			if diff := cmp.Diff(want, f.flushOne("leader-x"), ignoreSeq); diff != "" {
				t.Errorf("full batch after the end (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSessionRelayNoLeaderToSendTo: without a leader, or while it leads
// itself, the relay sends nothing; a leader named later gets every
// session.
func TestSessionRelayNoLeaderToSendTo(t *testing.T) {
	for _, tt := range []struct {
		name   string
		leader string
	}{
		{"no leader", ""},
		{"this replica leads", "replica-a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			f := newRelayFixture(t, clk)
			f.relay.SetLeader(tt.leader)
			f.connect("edge-1")
			f.renew("edge-1", 0)
			f.flushNone()
			clk.Step(relayFullInterval)
			f.flushNone()

			f.relay.SetLeader("leader-y")
			b := f.flushOne("leader-y")
			if !b.Full || len(b.Sessions) != 1 || b.Sessions[0].Cluster != "edge-1" {
				t.Errorf("first batch to a new leader: %+v, want a full one listing edge-1", b)
			}
		})
	}
}

// TestSessionRelaySendError: a batch that could not be sent is made good
// by the next one, which lists every session.
func TestSessionRelaySendError(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRelayFixture(t, clk)
	f.relay.SetLeader("leader-x")
	f.connect("edge-1")
	f.connect("edge-2")
	f.flushOne("leader-x")

	clk.Step(time.Second)
	stamp := f.renew("edge-1", 0)
	report := &protocol.ClusterStatus{ObservedAt: t0, APIServerHealthy: true, NodesTotal: 2, NodesReady: 2}
	if err := f.relay.Status("edge-1", report); err != nil {
		t.Fatal(err)
	}
	f.relay.DropSession("edge-2", "hub-a-edge-2")
	f.fail = errors.New("no route to leader-x")
	if b := f.flushOne("leader-x"); b.Full {
		t.Errorf("the failed batch was full, want only what changed")
	}
	f.fail = nil
	clk.Step(relayInterval)
	// The next batch lists every session and what the failed one carried:
	// the report and the dropped session.
	edge1 := relayLive("edge-1", t0)
	edge1.LastRenewal, edge1.AgentTime, edge1.Status = stamp, stamp, report
	dropped := relay.Session{Cluster: "edge-2", Session: "hub-a-edge-2", Dropped: true}
	want := &relay.Batch{Replica: "replica-a", HubID: "hub-a", Full: true, Sessions: []relay.Session{edge1, dropped}}
	if diff := cmp.Diff(want, f.flushOne("leader-x"), ignoreSeq); diff != "" {
		t.Errorf("batch after a failed one (-want +got):\n%s", diff)
	}
	f.flushNone()
	if sent, failed := f.relay.sent.Load(), f.relay.failed.Load(); sent != 2 || failed != 1 {
		t.Errorf("counted %d batches sent and %d failed, want 2 and 1", sent, failed)
	}
}

// TestSessionRelayAttach: once the replica leads, its registry takes
// every live session with its last renewal and report, and every call
// goes straight to it.
func TestSessionRelayAttach(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	reg := newRegistry(t, clk, "edge-1", "edge-2")
	f := newRelayFixture(t, clk)
	f.relay.SetLeader("leader-x")
	f.connect("edge-1")
	f.connect("edge-2")
	f.connect("ended")
	f.flushOne("leader-x")
	clk.Step(3 * time.Second)
	renewed := f.renew("edge-1", 0)
	if err := f.relay.Status("edge-1", &protocol.ClusterStatus{ObservedAt: clk.Now(), APIServerHealthy: true, NodesTotal: 5, NodesReady: 4}); err != nil {
		t.Fatal(err)
	}
	f.relay.Disconnect("ended", "hub-a-ended", "agent stopped")
	clk.Step(2 * time.Second)

	f.relay.Attach(reg)
	c := stored(t, reg, "edge-1")
	if got := connectedTo(c); got != "hub-a" {
		t.Errorf("edge-1 connectedTo = %q after attach, want hub-a", got)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionReady); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("edge-1 Ready = %+v after attach, want True", cond)
	}
	if diff := cmp.Diff(&v1alpha1.NodeSummary{TotalNum: 5, ReadyNum: 4}, c.Status.NodeSummary); diff != "" {
		t.Errorf("edge-1 nodeSummary after attach (-want +got):\n%s", diff)
	}
	if got := renewTime(t, reg, "edge-1"); !got.Equal(renewed) {
		t.Errorf("edge-1 lease renewTime t0%+v after attach, want the relay's stamp t0%+v", got.Sub(t0), renewed.Sub(t0))
	}
	if got := connectedTo(stored(t, reg, "edge-2")); got != "hub-a" {
		t.Errorf("edge-2 connectedTo = %q after attach, want hub-a", got)
	}
	if got := reg.RelayedSessions(); got != 0 {
		t.Errorf("%d sessions attributed to another replica after attach, want none: they are this hub's own", got)
	}

	clk.Step(time.Second)
	stamp := f.renew("edge-2", 0)
	if !stamp.Equal(clk.Now()) {
		t.Errorf("Renew after attach stamped t0%+v, want now t0%+v", stamp.Sub(t0), clk.Now().Sub(t0))
	}
	if got := renewTime(t, reg, "edge-2"); !got.Equal(stamp) {
		t.Errorf("edge-2 lease renewTime t0%+v, want the registry's stamp t0%+v", got.Sub(t0), stamp.Sub(t0))
	}
	if _, err := f.relay.Renew("stranger", "agent", clk.Now()); !errors.Is(err, registry.ErrUnknownCluster) {
		t.Errorf("Renew of a cluster the registry does not know: %v, want ErrUnknownCluster (from the registry)", err)
	}
	f.flushNone()

	f.relay.Disconnect("edge-2", "hub-a-edge-2", "agent stopped")
	if got := connectedTo(stored(t, reg, "edge-2")); got != "" {
		t.Errorf("edge-2 connectedTo = %q after a disconnect (the session the relay handed over), want none", got)
	}
	f.flushNone()
}

// newRegistry is a registry with the clusters named, on the package's API
// server, its writer running until the test ends.
func newRegistry(t *testing.T, clk *clocktesting.FakeClock, clusters ...string) *registry.Registry {
	t.Helper()
	api := testapi.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	recorder := controller.StartEventRecorder(ctx, api.Kube)
	for _, name := range clusters {
		if _, err := api.Flotilla.FlotillaV1alpha1().Clusters().Create(t.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	reg, err := registry.New(t.Context(), registry.API{Flotilla: api.Flotilla, Kube: api.Kube, Recorder: recorder},
		registry.Config{Health: health.DefaultConfig(t0.Add(-time.Hour)), FlushInterval: time.Hour, LeaseFlushInterval: time.Hour, MaxClockSkew: 2 * time.Second, HubID: "hub-test"},
		clk, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		reg.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return reg
}

// stored flushes the registry and returns the Cluster as stored.
func stored(t *testing.T, reg *registry.Registry, name string) *v1alpha1.Cluster {
	t.Helper()
	if err := reg.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := testapi.Shared(t).Flotilla.FlotillaV1alpha1().Clusters().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func connectedTo(c *v1alpha1.Cluster) string {
	if c.Status.Agent == nil {
		return ""
	}
	return c.Status.Agent.ConnectedTo
}

// renewTime is the renewTime of the cluster's lease in the registry.
func renewTime(t *testing.T, reg *registry.Registry, name string) time.Time {
	t.Helper()
	l, err := reg.GetLease(name)
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// TestSessionRelayReplacedAfterSent: a replacement noted after the new
// session was sent goes with the next batch.
func TestSessionRelayReplacedAfterSent(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRelayFixture(t, clk)
	f.relay.SetLeader("leader-x")
	f.connect("edge-1")
	f.flushOne("leader-x")
	f.relay.SessionReplaced("edge-1", "192.0.2.9:1", "192.0.2.1:4000")
	clk.Step(relayInterval)
	b := f.flushOne("leader-x")
	if len(b.Sessions) != 1 || b.Sessions[0].Replaced != "192.0.2.9:1" {
		t.Errorf("batch after the replacement: %+v, want edge-1 replaced from 192.0.2.9:1", b.Sessions)
	}
}
