package registry

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/lease"
	"github.com/flotilla-io/flotilla/protocol"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// registryFixture is a registry on the package's real API server with a
// fake clock. Deadlines are fired by the test (fireDue) instead of the
// timer loop, and flushes are explicit, so every step is deterministic.
// A second fixture in the same test is the hub restarted.
type registryFixture struct {
	t        *testing.T
	clock    *clocktesting.FakeClock
	api      API
	reg      *Registry
	shutdown func() // stops the writer (which flushes); idempotent
}

func newRegistryFixture(t *testing.T, clk *clocktesting.FakeClock, hubStarted time.Time, options ...func(*Config)) *registryFixture {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	api := sharedAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	api.Recorder = controller.StartEventRecorder(ctx, api.Kube)
	cfg := Config{Health: health.DefaultConfig(hubStarted), FlushInterval: time.Hour, LeaseFlushInterval: time.Hour, MaxClockSkew: 2 * time.Second, HubID: "hub-test"}
	for _, option := range options {
		option(&cfg)
	}
	reg, err := New(t.Context(), api, cfg, clk, logger)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { reg.runWriter(ctx) })
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	t.Cleanup(shutdown)
	return &registryFixture{t: t, clock: clk, api: api, reg: reg, shutdown: shutdown}
}

// join creates the Cluster, as a join or certs issue does before its
// agent's first connection.
func (f *registryFixture) join(name string) {
	f.t.Helper()
	_, err := f.api.Flotilla.FlotillaV1alpha1().Clusters().Create(f.t.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
}

// connect is the agent's hello (its cluster joined first, if need be).
func (f *registryFixture) connect(name string) {
	f.t.Helper()
	f.join(name)
	hello := &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: name, AgentVersion: "v-test", LeaseDurationSeconds: 40}
	if err := f.reg.Connect(f.t.Context(), hello, "session-"+name, "192.0.2.1:4000", "quic"); err != nil {
		f.t.Fatal(err)
	}
}

func (f *registryFixture) renew(name string) {
	f.t.Helper()
	if _, err := f.reg.Renew(name, "agent-"+name, f.clock.Now()); err != nil {
		f.t.Fatal(err)
	}
}

// flush stores everything the registry holds, through its writer.
func (f *registryFixture) flush() {
	f.t.Helper()
	if err := f.reg.Flush(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
}

// advance moves the clock and fires what became due.
func (f *registryFixture) advance(d time.Duration) {
	f.clock.Step(d)
	f.reg.fireDue()
}

func (f *registryFixture) cluster(name string) *v1alpha1.Cluster {
	f.t.Helper()
	c, err := f.reg.GetCluster(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func readyOf(c *v1alpha1.Cluster) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionReady); cond != nil {
		return cond.Status
	}
	return ""
}

type taintSummary struct {
	Key, Effect string
	Added       time.Duration // since t0
}

func taintsOf(c *v1alpha1.Cluster) []taintSummary {
	var out []taintSummary
	for _, t := range c.Spec.Taints {
		out = append(out, taintSummary{t.Key, string(t.Effect), t.TimeAdded.Time.Sub(t0)})
	}
	return out
}

func TestRegistryHealthLifecycle(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	f.renew("edge-1")
	if got := readyOf(f.cluster("edge-1")); got != metav1.ConditionTrue {
		t.Fatalf("after first renewal Ready = %q, want True", got)
	}

	f.advance(40*time.Second - time.Millisecond)
	if got := readyOf(f.cluster("edge-1")); got != metav1.ConditionTrue {
		t.Fatalf("just before the grace period Ready = %q, want True", got)
	}
	f.advance(time.Millisecond)
	c := f.cluster("edge-1")
	want := []taintSummary{{v1alpha1.TaintClusterUnreachable, "NoSchedule", 40 * time.Second}}
	if readyOf(c) != metav1.ConditionUnknown || !cmp.Equal(want, taintsOf(c)) {
		t.Fatalf("at the grace period: Ready %q taints %v, want Unknown %v", readyOf(c), taintsOf(c), want)
	}

	f.advance(5 * time.Minute)
	want = append(want, taintSummary{v1alpha1.TaintClusterUnreachable, "NoExecute", 40*time.Second + 5*time.Minute})
	if diff := cmp.Diff(want, taintsOf(f.cluster("edge-1"))); diff != "" {
		t.Fatalf("after the eviction timeout (-want +got):\n%s", diff)
	}

	f.renew("edge-1")
	c = f.cluster("edge-1")
	if readyOf(c) != metav1.ConditionTrue || len(c.Spec.Taints) != 0 {
		t.Fatalf("after the agent came back: Ready %q taints %v, want True and none", readyOf(c), taintsOf(c))
	}

	f.flush()
	stored, err := f.reg.clusters.Get(t.Context(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if readyOf(stored) != metav1.ConditionTrue || stored.ResourceVersion != f.cluster("edge-1").ResourceVersion {
		t.Errorf("stored cluster: Ready %q rv %s, want True and the in-memory rv %s", readyOf(stored), stored.ResourceVersion, f.cluster("edge-1").ResourceVersion)
	}
	wantReasons := []string{"Registered", "AgentConnected", v1alpha1.ReasonLeaseExpired, "TaintAdded", "TaintRemoved", v1alpha1.ReasonClusterReady}
	reasons := eventReasons(t, "edge-1", wantReasons...)
	for _, reason := range wantReasons {
		if !slices.Contains(reasons, reason) {
			t.Errorf("no %s event among %v", reason, reasons)
		}
	}
}

func TestRegistryAPIServerUnhealthy(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	f.renew("edge-1")
	report := &protocol.ClusterStatus{ObservedAt: t0, APIServerHealthy: false, HealthMessage: "readyz: connection refused", NodesTotal: 3, NodesReady: 3}
	if err := f.reg.Status("edge-1", report); err != nil {
		t.Fatal(err)
	}
	for range 3 { // keep renewing: the agent is alive, its API server is not
		f.advance(10 * time.Second)
		f.renew("edge-1")
	}
	c := f.cluster("edge-1")
	want := []taintSummary{{v1alpha1.TaintClusterNotReady, "NoSchedule", 30 * time.Second}}
	if readyOf(c) != metav1.ConditionFalse || !cmp.Equal(want, taintsOf(c)) {
		t.Fatalf("after the failure threshold: Ready %q taints %v, want False %v", readyOf(c), taintsOf(c), want)
	}
	if c.Status.NodeSummary == nil || c.Status.NodeSummary.TotalNum != 3 {
		t.Errorf("node summary = %+v, want 3 nodes", c.Status.NodeSummary)
	}
}

func TestRegistryRestartKeepsStateAndGrace(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	first := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	first.connect("edge-1")
	first.renew("edge-1")
	before := first.cluster("edge-1")
	first.shutdown() // the writer flushes on its way out

	clk.Step(30 * time.Second)
	// Without a start time, the restart grace counts from the load.
	second := newRegistryFixture(t, clk, time.Time{})
	c := second.cluster("edge-1")
	if readyOf(c) != metav1.ConditionTrue || c.UID != before.UID {
		t.Fatalf("after restart: Ready %q uid %s, want True and uid %s", readyOf(c), c.UID, before.UID)
	}
	if _, err := second.reg.GetLease("edge-1"); err != nil {
		t.Fatalf("lease after restart: %v", err)
	}
	// The lease was renewed at t0, 30 s before the restart: its grace alone
	// would end at t0+40s, but the restart grace holds until restart+80s.
	second.advance(80*time.Second - time.Millisecond)
	if got := readyOf(second.cluster("edge-1")); got != metav1.ConditionTrue {
		t.Fatalf("during the restart grace Ready = %q, want True", got)
	}
	second.advance(time.Millisecond)
	if got := readyOf(second.cluster("edge-1")); got != metav1.ConditionUnknown {
		t.Fatalf("after the restart grace Ready = %q, want Unknown", got)
	}
}

// TestRegistryRestartNeverAddsNoExecuteEarly: a cluster Unknown since
// +40.7 s (stored as +40 s) when the hub restarts gets its NoExecute taint
// no earlier than +40.7 s plus the eviction timeout: the stored second is
// rounded up, not taken as the instant.
func TestRegistryRestartNeverAddsNoExecuteEarly(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	first := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	first.connect("edge-1")
	clk.Step(700 * time.Millisecond)
	first.renew("edge-1")
	first.advance(40 * time.Second) // the lease expires
	unknownAt := t0.Add(40*time.Second + 700*time.Millisecond)
	want := []taintSummary{{v1alpha1.TaintClusterUnreachable, "NoSchedule", unknownAt.Sub(t0)}}
	if c := first.cluster("edge-1"); readyOf(c) != metav1.ConditionUnknown || !cmp.Equal(want, taintsOf(c)) {
		t.Fatalf("Ready %q taints %v, want Unknown and %v", readyOf(c), taintsOf(c), want)
	}
	first.shutdown()

	clk.SetTime(t0.Add(100 * time.Second))
	second := newRegistryFixture(t, clk, clk.Now())
	due := unknownAt.Add(5 * time.Minute)
	second.advance(due.Add(-time.Millisecond).Sub(clk.Now()))
	if c := second.cluster("edge-1"); len(c.Spec.Taints) != 1 {
		t.Fatalf("taints %v a millisecond before the eviction timeout ended (+%v)", taintsOf(c), due.Sub(t0))
	}
	second.advance(t0.Add(341 * time.Second).Sub(clk.Now())) // the stored +40 s rounded up, and 5 min
	c := second.cluster("edge-1")
	want = []taintSummary{{v1alpha1.TaintClusterUnreachable, "NoSchedule", 40 * time.Second}, {v1alpha1.TaintClusterUnreachable, "NoExecute", 341 * time.Second}}
	if diff := cmp.Diff(want, taintsOf(c)); diff != "" {
		t.Errorf("taints after the eviction timeout (-want +got):\n%s", diff)
	}
}

// TestRegistryRestartWithoutNoExecuteTaints: a hub restarted with
// NoExecuteTaints false removes the NoExecute health taints it added
// before, and keeps those a ClusterTaintPolicy owns.
func TestRegistryRestartWithoutNoExecuteTaints(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	first := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	for _, name := range []string{"flip-1", "flip-2"} {
		first.connect(name)
		first.renew(name)
	}
	first.advance(40 * time.Second) // Unknown
	first.advance(5 * time.Minute)  // the eviction timeout
	want := []taintSummary{{v1alpha1.TaintClusterUnreachable, "NoSchedule", 40 * time.Second}, {v1alpha1.TaintClusterUnreachable, "NoExecute", 340 * time.Second}}
	if diff := cmp.Diff(want, taintsOf(first.cluster("flip-1"))); diff != "" {
		t.Fatalf("taints before the restart (-want +got):\n%s", diff)
	}
	first.shutdown()
	// A policy took flip-2's NoExecute taint over, as the taint policy
	// controller records it.
	clusters := first.api.Flotilla.FlotillaV1alpha1().Clusters()
	c, err := clusters.Get(t.Context(), "flip-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, v1alpha1.AnnotationTaintPolicies, `{"cluster.flotilla.io/unreachable:NoExecute":"unreachable"}`)
	if _, err := clusters.Update(t.Context(), c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	second := newRegistryFixture(t, clk, clk.Now(), func(cfg *Config) { cfg.Health.NoExecuteTaints = false })
	second.advance(0)
	second.flush()
	for name, want := range map[string][]taintSummary{"flip-1": want[:1], "flip-2": want} {
		stored, err := clusters.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, taintsOf(stored)); diff != "" {
			t.Errorf("stored taints of %s after the restart (-want +got):\n%s", name, diff)
		}
	}
	eventReasons(t, "flip-1", "TaintRemoved")
}

func TestRegistryClockSkew(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	if _, err := f.reg.Renew("edge-1", "agent", t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	c := f.cluster("edge-1")
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionClockSynced)
	if cond == nil || cond.Status != metav1.ConditionFalse || c.Status.Agent.ClockSkew != "10s" {
		t.Fatalf("ClockSynced = %+v, skew %q; want False and 10s", cond, c.Status.Agent.ClockSkew)
	}
	if readyOf(c) != metav1.ConditionTrue {
		t.Errorf("a skewed clock must not affect Ready (hub time stamps the lease): %q", readyOf(c))
	}
}

// TestRegistryBatchesLeaseWrites renews many clusters many times and checks
// that one flush writes each lease once.
func TestRegistryBatchesLeaseWrites(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	const clusters, renewals = 50, 10
	for i := range clusters {
		f.connect(fmt.Sprintf("edge-%d", i))
	}
	// The first renewals make every cluster Ready, whose leases are then
	// written at once (asynchronously): done before counting, so that
	// write cannot race the count of dirty leases below.
	for i := range clusters {
		f.renew(fmt.Sprintf("edge-%d", i))
	}
	f.flush()
	writesBefore := f.reg.stats.storeWrites.Load()
	for range renewals {
		for i := range clusters {
			f.renew(fmt.Sprintf("edge-%d", i))
		}
		clk.Step(time.Second)
	}
	f.reg.mu.Lock()
	dirtyLeases := len(f.reg.dirtyLeas)
	f.reg.mu.Unlock()
	f.flush()
	leaseWrites := f.reg.stats.storeWrites.Load() - writesBefore
	if dirtyLeases != clusters {
		t.Errorf("%d dirty leases after %d renewals of %d clusters, want %d", dirtyLeases, clusters*renewals, clusters, clusters)
	}
	// Leases once each, plus each cluster's first-Ready condition and events.
	if leaseWrites > 3*clusters+clusters {
		t.Errorf("%d store writes for %d renewals of %d clusters", leaseWrites, clusters*renewals, clusters)
	}
	list, err := f.reg.leases.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases := list.Items
	if len(leases) != clusters {
		t.Fatalf("%d leases stored, want %d", len(leases), clusters)
	}
	if got := leases[0].Spec.RenewTime.Time; !got.Equal(t0.Add(time.Duration(renewals-1) * time.Second)) {
		t.Errorf("stored renewTime = %v, want the last renewal", got.Sub(t0))
	}
}

// BenchmarkRenew is the hub's hot path: one lease renewal of one of 5,000
// registered clusters, with its health evaluation and deadline move.
func BenchmarkRenew(b *testing.B) {
	reg, clk, names := benchRegistry(5000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(names) == 0 {
			clk.Step(time.Millisecond)
		}
		if _, err := reg.Renew(names[i%len(names)], "agent", clk.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatus is the other hot path: a status report (the load tool's,
// unchanged since the last one, as most are) of one of 5,000 clusters.
func BenchmarkStatus(b *testing.B) {
	reg, clk, names := benchRegistry(5000)
	report := &protocol.ClusterStatus{
		KubernetesVersion: "v1.37.2", APIServerHealthy: true, HealthMessage: "ok", NodesTotal: 3, NodesReady: 3,
		Allocatable: map[string]string{"cpu": "24", "memory": "96Gi", "pods": "330"},
		Allocated:   map[string]string{"cpu": "3", "memory": "8Gi", "pods": "12"},
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(names) == 0 {
			clk.Step(time.Millisecond)
		}
		if err := reg.Status(names[i%len(names)], report); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRegistry is a registry of n clusters, each with a served API list,
// without an API behind it.
func benchRegistry(n int) (*Registry, *clocktesting.FakeClock, []string) {
	clk := clocktesting.NewFakeClock(t0)
	reg := &Registry{
		cfg:   Config{Health: health.DefaultConfig(t0.Add(-time.Hour)), MaxClockSkew: 2 * time.Second, HubID: "bench"},
		clock: clk, logger: slog.New(slog.DiscardHandler), recorder: controller.DiscardRecorder{},
		entries: map[string]*entry{}, deadlines: lease.NewDeadlines(),
		dirty: map[string]bool{}, healthDirty: map[string]bool{}, dirtyLeas: map[string]bool{}, urgentLeases: map[string]bool{}, wake: make(chan struct{}, 1),
	}
	apis := []v1alpha1.APIEnablement{
		{GroupVersion: "v1", Resources: []v1alpha1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}, {Name: "services", Kind: "Service"}, {Name: "secrets", Kind: "Secret"}}},
		{GroupVersion: "apps/v1", Resources: []v1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}, {Name: "statefulsets", Kind: "StatefulSet"}, {Name: "daemonsets", Kind: "DaemonSet"}}},
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("edge-%04d", i)
		reg.entries[names[i]] = &entry{
			obj: &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: names[i]}, Status: v1alpha1.ClusterStatus{
				Agent: &v1alpha1.AgentStatus{}, APIEnablements: apis,
			}},
			obs: health.Observations{Registered: t0, LeaseDuration: 40 * time.Second},
		}
	}
	return reg, clk, names
}

func TestRegistryNeverRenewedClusterGoesUnknown(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("silent") // hello, then nothing
	f.advance(60*time.Second - time.Millisecond)
	if got := readyOf(f.cluster("silent")); got != "" {
		t.Fatalf("within the startup grace Ready = %q, want no verdict", got)
	}
	f.advance(time.Millisecond)
	c := f.cluster("silent")
	if readyOf(c) != metav1.ConditionUnknown || !cmp.Equal([]taintSummary{{v1alpha1.TaintClusterUnreachable, "NoSchedule", 60 * time.Second}}, taintsOf(c)) {
		t.Fatalf("after the startup grace: Ready %q taints %v", readyOf(c), taintsOf(c))
	}
}

// sickAcrossRestart drives a cluster to NoExecute (via False, then Unknown
// if lose is set), restarts the hub, and returns the cluster before and after.
func sickAcrossRestart(t *testing.T, lose bool) (before, after *v1alpha1.Cluster) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	f.renew("edge-1")
	if err := f.reg.Status("edge-1", &protocol.ClusterStatus{ObservedAt: t0, APIServerHealthy: false, HealthMessage: "readyz: refused"}); err != nil {
		t.Fatal(err)
	}
	for range 20 { // ten minutes of an agent whose API server is down
		f.advance(30 * time.Second)
		if !lose {
			f.renew("edge-1")
		}
	}
	before = f.cluster("edge-1")
	f.shutdown()
	second := newRegistryFixture(t, clk, clk.Now())
	return before, second.cluster("edge-1")
}

func TestRegistryRestartKeepsSickClustersSick(t *testing.T) {
	for _, lose := range []bool{false, true} {
		before, after := sickAcrossRestart(t, lose)
		if readyOf(after) != readyOf(before) {
			t.Errorf("lost=%v: Ready %s before the restart, %s after", lose, readyOf(before), readyOf(after))
		}
		if diff := cmp.Diff(taintsOf(before), taintsOf(after)); diff != "" {
			t.Errorf("lost=%v: taints changed across the restart (-before +after):\n%s", lose, diff)
		}
		if len(before.Spec.Taints) != 2 {
			t.Errorf("lost=%v: want NoSchedule and NoExecute before the restart, got %v", lose, taintsOf(before))
		}
	}
}

// A write that landed although the writer saw an error (a context cancelled
// at shutdown) leaves memory one version behind the store; the next flush
// must still store memory's state, not defer it to a flush that never comes.
func TestRegistryFlushAfterUnseenWriteStoresMemory(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	f.renew("edge-1")
	f.flush()
	stored, err := f.reg.clusters.Get(t.Context(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.clusters.Update(t.Context(), stored, metav1.UpdateOptions{}); err != nil { // the write the hub never saw
		t.Fatal(err)
	}
	if err := f.reg.Status("edge-1", &protocol.ClusterStatus{ObservedAt: t0, APIServerHealthy: true, KubernetesVersion: "v1.37.2"}); err != nil {
		t.Fatal(err)
	}
	f.flush()
	got, err := f.reg.clusters.Get(t.Context(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.KubernetesVersion != "v1.37.2" {
		t.Errorf("stored kubernetesVersion = %q after one flush, want v1.37.2", got.Status.KubernetesVersion)
	}
	if got.ResourceVersion != f.cluster("edge-1").ResourceVersion {
		t.Errorf("stored resourceVersion %s, memory %s", got.ResourceVersion, f.cluster("edge-1").ResourceVersion)
	}
}

func TestRegistryKeepsServedAPIsUntilTheAgentSendsNew(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	apis := &protocol.ServedAPIs{Items: []protocol.APIEnablement{{GroupVersion: "apps/v1", Resources: []protocol.APIResource{{Name: "deployments", Kind: "Deployment"}}}}}
	for _, report := range []*protocol.ClusterStatus{
		{ObservedAt: t0, APIServerHealthy: true, ServedAPIs: apis},
		{ObservedAt: t0, APIServerHealthy: true}, // unchanged since: not sent
	} {
		if err := f.reg.Status("edge-1", report); err != nil {
			t.Fatal(err)
		}
	}
	want := []v1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []v1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}}}
	if diff := cmp.Diff(want, f.cluster("edge-1").Status.APIEnablements); diff != "" {
		t.Errorf("apiEnablements (-want +got):\n%s", diff)
	}
}

// An agent asking for a lease longer than the grace period is granted the
// grace period; the restart grace counts the lease granted, not the one
// asked for (which kept clusters from going Unknown for grace + 120 s).
func TestRegistryRestartGraceUsesTheGrantedLease(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0)
	hello := &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: "edge-1", AgentVersion: "v-test", LeaseDurationSeconds: 120}
	f.join("edge-1")
	if err := f.reg.Connect(t.Context(), hello, "session-edge-1", "192.0.2.1:4000", "quic"); err != nil {
		t.Fatal(err)
	}
	f.renew("edge-1")
	// grace 40 s + granted lease 40 s after the hub started at t0.
	f.advance(80*time.Second - time.Millisecond)
	if got := readyOf(f.cluster("edge-1")); got != metav1.ConditionTrue {
		t.Fatalf("within the restart grace Ready = %q, want True", got)
	}
	f.advance(time.Millisecond)
	if got := readyOf(f.cluster("edge-1")); got != metav1.ConditionUnknown {
		t.Fatalf("after grace + granted lease Ready = %q, want Unknown", got)
	}
}

// A cluster whose Ready changes has its lease written with the change, not
// at the next lease flush (which may be far off when the lease budget is
// short): the stored renewTime is the one Ready was judged by.
func TestRegistryWritesTheLeaseWithAReadyChange(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	f.renew("edge-1")
	f.advance(40 * time.Second)
	if got := readyOf(f.cluster("edge-1")); got != metav1.ConditionUnknown {
		t.Fatalf("Ready = %q, want Unknown", got)
	}
	if _, err := f.reg.submit(t.Context(), updateOp{run: f.reg.flushAll}); err != nil { // clusters only
		t.Fatal(err)
	}
	l, err := f.reg.leases.Get(t.Context(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lease was not written with the Ready change: %v", err)
	}
	if !l.Spec.RenewTime.Time.Equal(t0) {
		t.Errorf("stored renewTime %v, want the last renewal %v", l.Spec.RenewTime.Time, t0)
	}
}

// Operators edit a Cluster through the API (kubectl edit, patch): the
// registry takes their fields from the informer (Observe), keeps them when
// it writes its own health taints, and puts back a health taint an
// operator removed.
func TestRegistryObservesOperatorEdits(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	f.renew("edge-1")
	f.flush()
	ctx := t.Context()
	edit := func(change func(*v1alpha1.Cluster)) {
		t.Helper()
		c, err := f.reg.clusters.Get(ctx, "edge-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(c)
		updated, err := f.reg.clusters.Update(ctx, c, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f.reg.Observe(updated) // what the cluster informer does
	}
	stored := func() []taintSummary {
		t.Helper()
		c, err := f.reg.clusters.Get(ctx, "edge-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return taintsOf(c)
	}
	maintenance := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: t0}}

	edit(func(c *v1alpha1.Cluster) {
		c.Spec.Unschedulable = true
		c.Spec.Taints = append(c.Spec.Taints, maintenance)
		c.Labels = map[string]string{"site": "north"}
	})
	f.flush()
	want := []taintSummary{{"example.com/maintenance", "NoSchedule", 0}, {v1alpha1.TaintClusterUnschedulable, "NoSchedule", 0}}
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Errorf("after cordon and an operator's taint (-want +got):\n%s", diff)
	}
	if got := f.cluster("edge-1").Labels["site"]; got != "north" {
		t.Errorf("label site = %q in memory, want north", got)
	}

	f.advance(40 * time.Second) // the lease expires: the hub adds its taint
	f.flush()
	want = append(want, taintSummary{v1alpha1.TaintClusterUnreachable, "NoSchedule", 40 * time.Second})
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Errorf("after Unknown, the operator's taint must stay (-want +got):\n%s", diff)
	}

	edit(func(c *v1alpha1.Cluster) { c.Spec.Taints = c.Spec.Taints[:1] }) // someone drops the hub's taints
	f.flush()
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Errorf("the hub's taints were not put back (-want +got):\n%s", diff)
	}
	reasons := eventReasons(t, "edge-1", "Cordoned")
	if !slices.Contains(reasons, "Cordoned") {
		t.Errorf("no Cordoned event among %v", reasons)
	}
}

func TestRegistryTaintsAClusterBeingDeleted(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	const name = "edge-deleting"
	clusters := f.api.Flotilla.FlotillaV1alpha1().Clusters()
	ctx := t.Context()
	if _, err := clusters.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1alpha1.ClusterFinalizer}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // let it go
		c, err := clusters.Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			c.Finalizers = nil
			_, _ = clusters.Update(context.Background(), c, metav1.UpdateOptions{})
		}
	})
	f.connect(name)
	f.renew(name)
	f.flush()
	if err := clusters.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	observe := func() {
		t.Helper()
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f.reg.Observe(c) // what the cluster informer does
	}
	observe()
	f.advance(time.Second)
	f.flush()
	want := []taintSummary{{v1alpha1.TaintClusterTerminating, "NoExecute", 0}}
	stored := func() []taintSummary {
		t.Helper()
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return taintsOf(c)
	}
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Errorf("taints of a Cluster being deleted (-want +got):\n%s", diff)
	}
	c, err := clusters.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Taints = nil // someone drops the hub's taint
	if c, err = clusters.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reg.Observe(c)
	f.flush()
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Errorf("the terminating taint was not put back (-want +got):\n%s", diff)
	}
}

// TestRegistryFlushHealthOnly: the final flush's first pass stores the
// clusters whose health changed and leaves status reports for the
// second. The registry runs without its writer, so the test drives every
// flush itself.
func TestRegistryFlushHealthOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	api := sharedAPI(t)
	for _, name := range []string{"sick", "busy"} {
		if _, err := api.Flotilla.FlotillaV1alpha1().Clusters().Create(t.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	api.Recorder = controller.StartEventRecorder(t.Context(), api.Kube)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	cfg := Config{Health: health.DefaultConfig(t0), FlushInterval: time.Hour, LeaseFlushInterval: time.Hour, MaxClockSkew: 2 * time.Second, HubID: "hub-test"}
	reg, err := New(t.Context(), api, cfg, clk, logger)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sick", "busy"} {
		hello := &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: name, AgentVersion: "v-test", LeaseDurationSeconds: 40}
		if err := reg.Connect(t.Context(), hello, "session-"+name, "192.0.2.1:4000", "quic"); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Renew(name, "agent-"+name, t0); err != nil {
			t.Fatal(err)
		}
	}
	reg.flush(t.Context(), false)
	stored := func(name string) *v1alpha1.Cluster {
		t.Helper()
		c, err := api.Flotilla.FlotillaV1alpha1().Clusters().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if got := readyOf(stored("sick")); got != metav1.ConditionTrue {
		t.Fatalf("sick stored Ready %q before the test, want True", got)
	}

	// busy reports a new version; sick's agent stops renewing and its
	// lease expires (past the restart grace too).
	clk.Step(90 * time.Second)
	if _, err := reg.Renew("busy", "agent-busy", clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := reg.Status("busy", &protocol.ClusterStatus{ObservedAt: clk.Now(), APIServerHealthy: true, KubernetesVersion: "v1.99.0"}); err != nil {
		t.Fatal(err)
	}
	reg.mu.Lock()
	reg.evaluateLocked("sick", reg.entries["sick"], clk.Now())
	reg.mu.Unlock()

	reg.flush(t.Context(), true)
	if got := readyOf(stored("sick")); got != metav1.ConditionUnknown {
		t.Errorf("after the health pass sick is stored Ready %q, want Unknown", got)
	}
	if got := stored("busy").Status.KubernetesVersion; got == "v1.99.0" {
		t.Errorf("the health pass stored busy's status report (version %q)", got)
	}
	reg.flush(t.Context(), false)
	if got := stored("busy").Status.KubernetesVersion; got != "v1.99.0" {
		t.Errorf("after the full flush busy is stored with version %q, want v1.99.0", got)
	}
}
