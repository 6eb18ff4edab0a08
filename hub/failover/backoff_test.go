package failover

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/internal/kube"
)

func TestBackOffLength(t *testing.T) {
	tests := []struct {
		evictions int
		want      time.Duration
	}{
		{1, 10 * time.Minute},
		{2, 20 * time.Minute},
		{3, 40 * time.Minute},
		{4, time.Hour},
		{5, time.Hour},
		{1000, time.Hour},
	}
	for _, tt := range tests {
		if got := backOffLength(tt.evictions); got != tt.want {
			t.Errorf("backOffLength(%d) = %v, want %v", tt.evictions, got, tt.want)
		}
	}
}

// backOffStep is one thing that happens to the back-off of (b, a): an
// eviction of a cluster by producer, or the workload reported Healthy in
// a cluster, at an offset from t0.
type backOffStep struct {
	at       time.Duration
	cluster  string
	producer string // "" reports the workload Healthy in cluster
}

func evictedAt(at time.Duration, cluster string) backOffStep {
	return backOffStep{at: at, cluster: cluster, producer: eviction.ProducerApplicationFailover}
}

func healthyAt(at time.Duration, cluster string) backOffStep {
	return backOffStep{at: at, cluster: cluster}
}

func TestBackOffs(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	type state struct {
		Evictions int
		End       time.Duration // from t0
	}
	tests := []struct {
		name  string
		steps []backOffStep
		at    time.Duration     // when the back-offs are looked at
		want  map[string]*state // running back-offs by cluster; nil: none
		idle  map[string]bool   // clusters whose back-off was forgotten by settle at at
	}{
		{
			name:  "first eviction: 10 minutes",
			steps: []backOffStep{evictedAt(0, "a")},
			at:    10*time.Minute - time.Second,
			want:  map[string]*state{"a": {1, 10 * time.Minute}},
		},
		{
			name:  "over at its end",
			steps: []backOffStep{evictedAt(0, "a")},
			at:    10 * time.Minute,
			want:  map[string]*state{"a": nil},
		},
		{
			name:  "doubles with each eviction in a row",
			steps: []backOffStep{evictedAt(0, "a"), evictedAt(10*time.Minute, "a"), evictedAt(30*time.Minute, "a")},
			at:    30 * time.Minute,
			want:  map[string]*state{"a": {3, 70 * time.Minute}},
		},
		{
			name: "capped at an hour",
			steps: []backOffStep{evictedAt(0, "a"), evictedAt(10*time.Minute, "a"), evictedAt(30*time.Minute, "a"),
				evictedAt(70*time.Minute, "a"), evictedAt(130*time.Minute, "a")},
			at:   130 * time.Minute,
			want: map[string]*state{"a": {5, 190 * time.Minute}},
		},
		{
			name:  "a cap after its end the count starts again",
			steps: []backOffStep{evictedAt(0, "a"), evictedAt(70*time.Minute, "a")},
			at:    70 * time.Minute,
			want:  map[string]*state{"a": {1, 80 * time.Minute}},
		},
		{
			name:  "less than a cap after its end the count goes on",
			steps: []backOffStep{evictedAt(0, "a"), evictedAt(70*time.Minute-time.Second, "a")},
			at:    70*time.Minute - time.Second,
			want:  map[string]*state{"a": {2, 90*time.Minute - time.Second}},
		},
		{
			name:  "Healthy in the cluster: the count starts again",
			steps: []backOffStep{evictedAt(0, "a"), healthyAt(5*time.Minute, "a"), evictedAt(6*time.Minute, "a")},
			at:    6 * time.Minute,
			want:  map[string]*state{"a": {1, 16 * time.Minute}},
		},
		{
			name:  "Healthy elsewhere changes nothing",
			steps: []backOffStep{evictedAt(0, "a"), healthyAt(5*time.Minute, "b")},
			at:    5 * time.Minute,
			want:  map[string]*state{"a": {1, 10 * time.Minute}, "b": nil},
		},
		{
			name:  "per cluster",
			steps: []backOffStep{evictedAt(0, "a"), evictedAt(15*time.Minute, "b"), evictedAt(20*time.Minute, "a")},
			at:    20 * time.Minute,
			want:  map[string]*state{"a": {2, 40 * time.Minute}, "b": {1, 25 * time.Minute}},
		},
		{
			name:  "the taint manager's evictions do not count",
			steps: []backOffStep{{at: 0, cluster: "a", producer: eviction.ProducerTaintManager}},
			at:    time.Minute,
			want:  map[string]*state{"a": nil},
		},
		{
			name:  "settle forgets idle back-offs",
			steps: []backOffStep{evictedAt(0, "a"), evictedAt(5*time.Minute, "b")},
			at:    70 * time.Minute,
			want:  map[string]*state{"a": nil, "b": nil},
			idle:  map[string]bool{"a": true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b backOffs
			for _, s := range tt.steps {
				now := t0.Add(s.at)
				if s.producer == "" {
					b.settle("ns/web", []v1alpha1.AggregatedStatusItem{{ClusterName: s.cluster, Applied: true, Health: v1alpha1.HealthHealthy}}, now)
					continue
				}
				b.evicted("ns/web", []eviction.Eviction{{Cluster: s.cluster, Producer: s.producer}}, now, 1)
			}
			now := t0.Add(tt.at)
			got := map[string]*state{}
			for cluster := range tt.want {
				if bo, ok := b.running("ns/web", cluster, now); ok {
					got[cluster] = &state{bo.evictions, bo.end().Sub(t0)}
				} else {
					got[cluster] = nil
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("running back-offs at %v (-want +got):\n%s", tt.at, diff)
			}
			b.settle("ns/web", nil, now)
			kept := map[string]bool{}
			for cluster := range b.byBinding["ns/web"] {
				kept[cluster] = true
			}
			for _, s := range tt.steps {
				if s.producer == eviction.ProducerApplicationFailover && kept[s.cluster] == tt.idle[s.cluster] {
					t.Errorf("after settle at %v, back-off of %s kept: %t, want %t", tt.at, s.cluster, kept[s.cluster], !tt.idle[s.cluster])
				}
			}
		})
	}
}

func TestBackOffsForget(t *testing.T) {
	var b backOffs
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	b.evicted("ns/web", []eviction.Eviction{{Cluster: "a", Producer: eviction.ProducerApplicationFailover}}, now, 1)
	b.announce("ns/web", []backOffHold{{cluster: "b", until: now.Add(time.Minute)}})
	b.forget("ns/web")
	if len(b.byBinding) != 0 || len(b.announced) != 0 {
		t.Errorf("after forget: back-offs %v, announced %v; want none", b.byBinding, b.announced)
	}
}

// A hold is announced once, again when it ends at another time, and again
// after a reconcile without it.
func TestBackOffsAnnounceOnce(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	holdB := backOffHold{cluster: "b", until: t0.Add(10 * time.Minute)}
	holdBLater := backOffHold{cluster: "b", until: t0.Add(20 * time.Minute)}
	holdC := backOffHold{cluster: "c", until: t0.Add(10 * time.Minute)}
	rounds := []struct {
		holds []backOffHold
		want  []string // clusters announced
	}{
		{[]backOffHold{holdB}, []string{"b"}},
		{[]backOffHold{holdB}, nil},
		{[]backOffHold{holdB, holdC}, []string{"c"}},
		{[]backOffHold{holdBLater, holdC}, []string{"b"}},
		{nil, nil},
		{[]backOffHold{holdBLater}, []string{"b"}},
	}
	var b backOffs
	for i, r := range rounds {
		var got []string
		for _, h := range b.announce("ns/web", r.holds) {
			got = append(got, h.cluster)
		}
		if diff := cmp.Diff(r.want, got); diff != "" {
			t.Errorf("round %d: announced (-want +got):\n%s", i, diff)
		}
	}
}

func TestBackOffHoldMessage(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	first := appBackOff{evictions: 1, last: now.Add(-4 * time.Minute)}
	third := appBackOff{evictions: 3, last: now.Add(-30 * time.Minute)}
	tests := []struct {
		name string
		hold backOffHold
		want string
	}{
		{
			name: "evicted from the cluster again too soon",
			hold: backOffHold{cluster: "a", by: []heldBy{{cluster: "a", appBackOff: first}}, until: first.end()},
			want: "eviction from a held: the workload was evicted from a for an application failure 4m0s ago (1st time, back-off 10m0s); " +
				"it stays there until the back-off ends in 6m0s",
		},
		{
			name: "would go back to a cluster in back-off",
			hold: backOffHold{cluster: "b", by: []heldBy{{cluster: "a", appBackOff: third}}, until: third.end()},
			want: "eviction from b held: it would place the workload on a, which it was evicted from for an application failure 30m0s ago " +
				"(3rd time, back-off 40m0s); it stays on b until the back-off ends in 10m0s",
		},
		{
			name: "would go back to a cluster still being evicted from",
			hold: backOffHold{cluster: "b", by: []heldBy{{cluster: "a", evicting: true}}},
			want: "eviction from b held: it would place the workload on a, which it is still being evicted from for an application failure; " +
				"it stays on b until that eviction ends",
		},
		{
			name: "two clusters in back-off",
			hold: backOffHold{cluster: "c", by: []heldBy{{cluster: "a", appBackOff: first}, {cluster: "b", appBackOff: third}}, until: first.end()},
			want: "eviction from c held: it would place the workload on a, which it was evicted from for an application failure 4m0s ago " +
				"(1st time, back-off 10m0s), and on b, which it was evicted from for an application failure 30m0s ago (3rd time, back-off 40m0s); " +
				"it stays on c until the back-off ends in 6m0s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.hold.message(now)); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
	for n, want := range map[int]string{1: "1st time", 2: "2nd time", 3: "3rd time", 4: "4th time", 11: "11th time", 12: "12th time", 21: "21st time", 102: "102nd time"} {
		if got := times(n); got != want {
			t.Errorf("times(%d) = %q, want %q", n, got, want)
		}
	}
}

// appToleration is the application failover toleration of the tests'
// bindings.
const appToleration = time.Minute

// appFixture is a failover fixture with two Ready clusters that have
// execution namespaces (named by the API server: a sorts before b), and
// the binding web-deployment of one replica Divided between them, placed
// on a, with application failover after appToleration and purge mode
// Gracefully (with the tests' grace period of 0, a task ends once the
// replacement is scheduled; a Directly task would wait for the old Work
// to go, which no binding controller deletes here).
type appFixture struct {
	*fixture
	clk  *clocktesting.FakeClock
	a, b string
	key  string // the binding's
}

const appBinding = "web-deployment"

func newAppFixture(t *testing.T) *appFixture {
	t.Helper()
	f := &appFixture{fixture: newFixture(t)}
	f.clk = clocktesting.NewFakeClock(f.T0)
	f.a, f.b = f.twoReadyClusters("app-")
	b := f.CreateDeploymentBinding("web", v1alpha1.ResourceBindingSpec{
		Replicas: 1,
		Placement: &v1alpha1.Placement{
			ClusterAffinity:   &v1alpha1.ClusterAffinity{ClusterNames: []string{f.a, f.b}},
			ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted},
		},
		Clusters: []v1alpha1.TargetCluster{{Name: f.a, Replicas: 1}},
		Failover: &v1alpha1.FailoverBehavior{Application: &v1alpha1.ApplicationFailoverBehavior{
			DecisionConditions: v1alpha1.DecisionConditions{TolerationSeconds: ptr.To(int32(appToleration / time.Second))},
			PurgeMode:          v1alpha1.PurgeModeGracefully,
		}},
	})
	f.EditBindingStatus(b.Name, f.scheduled)
	f.key = controller.Key(f.Namespace, appBinding)
	return f
}

// start runs the controller (tasks end once a replacement is scheduled),
// telling the fixture each wake-up it asks for.
func (f *appFixture) start() {
	f.T.Helper()
	f.Start(f.conflicts.Wrap, 1, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		f.ctl = New(clients, informers, f.Events, f.clk, controllertest.LoggerCountingRetries(f.T, &f.retries), testConfig())
		f.ctl.waiting = f.RecordWake
		return f.ctl
	})
}

// report writes the binding's Work in cluster, rendered for one replica,
// and what its agent reports: applied, with health.
func (f *appFixture) report(cluster, health string) {
	f.T.Helper()
	ctx := f.T.Context()
	works := f.Flotilla.Works(v1alpha1.ExecutionNamespace(cluster))
	name := names.WorkName(f.key, appBinding)
	w, err := works.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		w = &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{v1alpha1.AnnotationWorkBinding: f.key, v1alpha1.AnnotationWorkReplicas: "1"}}}
		w.Spec.Workload.Manifests = []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`)}}}
		w, err = works.Create(ctx, w, metav1.CreateOptions{})
	}
	if err != nil {
		f.T.Fatal(err)
	}
	w.Status.ObservedGeneration = w.Generation
	w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonAppliedSuccessful, LastTransitionTime: metav1.NewTime(f.T0)}}
	w.Status.ManifestStatuses = []v1alpha1.ManifestStatus{{Health: health}}
	if _, err := works.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// stepTo moves the fake clock to t.
func (f *appFixture) stepTo(t time.Time) {
	f.T.Helper()
	if d := t.Sub(f.clk.Now()); d < 0 {
		f.T.Fatalf("cannot step the clock back from %v to %v", f.clk.Now(), t)
	} else {
		f.clk.Step(d)
	}
}

// awaitEviction waits until the binding is evicted from cluster and
// returns when (the task's creation).
func (f *appFixture) awaitEviction(cluster string) time.Time {
	f.T.Helper()
	b := f.AwaitBinding(appBinding, "evicted from "+cluster, evictedFrom(cluster))
	for _, task := range b.Spec.GracefulEvictionTasks {
		if task.FromCluster == cluster {
			if task.Reason != eviction.ReasonApplicationFailure || task.CreationTimestamp == nil {
				f.T.Fatalf("task %+v, want an application failure with a creation time", task)
			}
			return task.CreationTimestamp.Time
		}
	}
	panic("unreachable: evictedFrom checked the task")
}

// place does the scheduler's work, placing the replica on cluster, and
// waits until the eviction task is over (its grace is 0).
func (f *appFixture) place(cluster string) {
	f.T.Helper()
	f.fixture.place(appBinding, v1alpha1.TargetCluster{Name: cluster, Replicas: 1})
	f.AwaitBinding(appBinding, "task ended", noTasks)
}

// get reads the binding.
func (f *appFixture) get() *v1alpha1.ResourceBinding {
	f.T.Helper()
	b, err := f.Flotilla.ResourceBindings(f.Namespace).Get(f.T.Context(), appBinding, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return b
}

// awaitEvictedEvents waits until the binding has n Evicted events (the
// controller records them after its write), and fails if it gets more.
func (f *appFixture) awaitEvictedEvents(n int) {
	f.T.Helper()
	count := func() int { return f.Events.Count("Warning Evicted ResourceBinding " + appBinding + ":") }
	err := wait.PollUntilContextTimeout(f.T.Context(), 5*time.Millisecond, controllertest.WaitTimeout, true, func(context.Context) (bool, error) {
		return count() >= n, nil
	})
	if got := count(); err != nil || got != n {
		f.T.Errorf("%d evictions, want %d: %q", got, n, f.Events.List())
	}
}

// holds are the EvictionBackOff events on the binding.
func (f *appFixture) holds() []string {
	var out []string
	prefix := "Warning EvictionBackOff ResourceBinding " + appBinding + ": "
	for _, e := range f.Events.List() {
		if m, ok := strings.CutPrefix(e, prefix); ok {
			out = append(out, m)
		}
	}
	return out
}

// TestApplicationFailoverBacksOff: a workload unhealthy in both of two
// clusters is evicted from a after the toleration and placed on b; when
// its toleration on b ends, the eviction back to a waits for a's back-off
// (10 minutes from a's eviction), is announced once, and is made when the
// back-off ends; and so on, each back-off doubling with its cluster's
// evictions in a row. The evictions are 10, 10, 20 and 20 minutes apart
// instead of a toleration.
func TestApplicationFailoverBacksOff(t *testing.T) {
	f := newAppFixture(t)
	f.report(f.a, v1alpha1.HealthUnhealthy)
	f.report(f.b, v1alpha1.HealthUnhealthy) // used once placed there
	f.start()

	gaps := []time.Duration{0, 10 * time.Minute, 10 * time.Minute, 20 * time.Minute, 20 * time.Minute}
	from, to := f.a, f.b
	since := f.T0 // unhealthy on from since
	var evictions []time.Time
	var wantHolds []string
	for round, gap := range gaps {
		f.AwaitWake(0, f.key, since.Add(appToleration))
		wakes := f.WakeCount()
		f.stepTo(since.Add(appToleration))
		want := since.Add(appToleration)
		if round > 0 {
			// Held: back to to, which is in back-off since its eviction.
			want = evictions[round-1].Add(gap)
			f.AwaitWake(wakes, f.key, want)
			if b := f.get(); len(b.Spec.GracefulEvictionTasks) > 0 {
				t.Fatalf("round %d: evicted from %s before the back-off of %s ended: %+v", round, from, to, b.Spec.GracefulEvictionTasks)
			}
			n := (round + 1) / 2 // to's evictions in a row
			wantHolds = append(wantHolds, fmt.Sprintf("eviction from %s held: it would place the workload on %s, which it was evicted from for an application failure %s ago "+
				"(%s, back-off %s); it stays on %s until the back-off ends in %s",
				from, to, appToleration, times(n), backOffLength(n), from, want.Sub(since.Add(appToleration))))
			f.stepTo(want)
		}
		at := f.awaitEviction(from)
		if !at.Equal(want) {
			t.Errorf("round %d: evicted from %s at t0+%v, want t0+%v", round, from, at.Sub(f.T0), want.Sub(f.T0))
		}
		evictions = append(evictions, at)
		f.place(to)
		from, to, since = to, from, f.clk.Now()
	}

	var got []time.Duration
	for i := 1; i < len(evictions); i++ {
		got = append(got, evictions[i].Sub(evictions[i-1]))
	}
	if diff := cmp.Diff(gaps[1:], got); diff != "" {
		t.Errorf("time between evictions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantHolds, f.holds()); diff != "" {
		t.Errorf("EvictionBackOff events, one per hold (-want +got):\n%s", diff)
	}
	f.awaitEvictedEvents(len(gaps))
}

// TestApplicationFailoverBacksOffOnTheSameCluster: a workload evicted from
// a and placed there again (as a rebalance may) that is unhealthy there
// again within a's back-off stays there until it ends. Once it reports
// Healthy in a, a's count starts again: its next failure there is evicted
// after the toleration, with no back-off.
func TestApplicationFailoverBacksOffOnTheSameCluster(t *testing.T) {
	f := newAppFixture(t)
	f.report(f.a, v1alpha1.HealthUnhealthy)
	f.start()

	f.AwaitWake(0, f.key, f.T0.Add(appToleration))
	f.stepTo(f.T0.Add(appToleration))
	evicted := f.awaitEviction(f.a)
	f.place(f.a) // back on a, unhealthy still
	wakes := f.WakeCount()
	f.AwaitWake(0, f.key, evicted.Add(appToleration))
	f.stepTo(evicted.Add(appToleration))
	end := evicted.Add(appBackOffBase)
	f.AwaitWake(wakes, f.key, end)
	hold := fmt.Sprintf("eviction from %s held: the workload was evicted from %s for an application failure %s ago (1st time, back-off %s); "+
		"it stays there until the back-off ends in %s", f.a, f.a, appToleration, appBackOffBase, appBackOffBase-appToleration)
	if diff := cmp.Diff([]string{hold}, f.holds()); diff != "" {
		t.Errorf("EvictionBackOff events (-want +got):\n%s", diff)
	}

	// Healthy in a before the back-off ends: nothing to evict, and the
	// count starts again.
	f.report(f.a, v1alpha1.HealthHealthy)
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, controllertest.WaitTimeout, true, func(context.Context) (bool, error) {
		_, running := f.ctl.backOffs.running(f.key, f.a, f.clk.Now())
		return !running, nil
	})
	if err != nil {
		t.Fatalf("a's back-off still runs after the workload reported Healthy there: %v", err)
	}
	f.stepTo(end)
	unhealthy := f.clk.Now()
	f.report(f.a, v1alpha1.HealthUnhealthy)
	f.AwaitWake(0, f.key, unhealthy.Add(appToleration))
	f.stepTo(unhealthy.Add(appToleration))
	if at := f.awaitEviction(f.a); !at.Equal(unhealthy.Add(appToleration)) {
		t.Errorf("evicted again at t0+%v, want t0+%v: the toleration after the workload was healthy, no back-off", at.Sub(f.T0), unhealthy.Add(appToleration).Sub(f.T0))
	}
	if n := len(f.holds()); n != 1 {
		t.Errorf("%d EvictionBackOff events, want 1: %q", n, f.Events.List())
	}
}

// TestApplicationFailoverWaitsForTheEvictionTask: with a grace period, the
// eviction from a lives on while the workload fails on b too. The eviction
// from b, which could only go back to a, waits for a's task to end
// (announced once) instead of being made and called off at once for want
// of a replacement; it is made when a's task ends, which is also when a's
// back-off ends here.
func TestApplicationFailoverWaitsForTheEvictionTask(t *testing.T) {
	f := newAppFixture(t)
	b := f.EditBindingSpec(appBinding, func(s *v1alpha1.ResourceBindingSpec) {
		s.Failover.Application.PurgeMode = v1alpha1.PurgeModeGracefully
		s.Failover.Application.GracePeriodSeconds = ptr.To(int32(appBackOffBase / time.Second))
	})
	f.EditBindingStatus(b.Name, f.scheduled)
	f.report(f.a, v1alpha1.HealthUnhealthy)
	f.report(f.b, v1alpha1.HealthUnhealthy)
	f.start()

	evictedA := f.T0.Add(appToleration)
	f.AwaitWake(0, f.key, evictedA)
	f.stepTo(evictedA)
	if at := f.awaitEviction(f.a); !at.Equal(evictedA) {
		t.Fatalf("evicted from a at t0+%v, want t0+%v", at.Sub(f.T0), evictedA.Sub(f.T0))
	}
	wakes := f.WakeCount()
	f.fixture.place(appBinding, v1alpha1.TargetCluster{Name: f.b, Replicas: 1}) // a's task waits for b to be healthy, or its grace
	f.AwaitWake(wakes, f.key, evictedA.Add(appToleration))
	wakes = f.WakeCount()
	f.stepTo(evictedA.Add(appToleration))
	taskEnds := evictedA.Add(appBackOffBase)
	f.AwaitWake(wakes, f.key, taskEnds)
	hold := fmt.Sprintf("eviction from %s held: it would place the workload on %s, which it is still being evicted from for an application failure; "+
		"it stays on %s until that eviction ends", f.b, f.a, f.b)
	if diff := cmp.Diff([]string{hold}, f.holds()); diff != "" {
		t.Errorf("EvictionBackOff events (-want +got):\n%s", diff)
	}
	if b := f.get(); len(b.Spec.GracefulEvictionTasks) != 1 {
		t.Fatalf("tasks %+v, want a's alone", b.Spec.GracefulEvictionTasks)
	}

	f.stepTo(taskEnds)
	if at := f.awaitEviction(f.b); !at.Equal(taskEnds) {
		t.Errorf("evicted from b at t0+%v, want t0+%v, when a's task ended", at.Sub(f.T0), taskEnds.Sub(f.T0))
	}
	f.awaitEvictedEvents(2)
	for _, e := range f.Events.List() {
		if strings.Contains(e, "called off") {
			t.Errorf("an eviction was called off: %s", e)
		}
	}
	if n := len(f.holds()); n != 1 {
		t.Errorf("%d EvictionBackOff events, want 1: %q", n, f.Events.List())
	}
}

// TestBackOffPredates: a read of the binding from before the eviction that
// started a cluster's back-off (the informer lags the controller's own
// write) is recognised, so it neither holds nor evicts again.
func TestBackOffPredates(t *testing.T) {
	var b backOffs
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	b.evicted("ns/web", []eviction.Eviction{{Cluster: "a", Producer: eviction.ProducerApplicationFailover}}, now, 7)
	for _, tt := range []struct {
		cluster    string
		generation int64
		want       bool
	}{
		{"a", 6, true},  // read before the eviction was stored
		{"a", 7, false}, // the stored eviction itself
		{"a", 8, false}, // later
		{"b", 1, false}, // no back-off there
	} {
		if got := b.predates("ns/web", tt.cluster, tt.generation); got != tt.want {
			t.Errorf("predates(%s, generation %d) = %v, want %v", tt.cluster, tt.generation, got, tt.want)
		}
	}
}
