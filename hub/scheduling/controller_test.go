package scheduling

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
)

func placedOn(want ...v1alpha1.TargetCluster) func(*v1alpha1.ResourceBinding) bool {
	return func(b *v1alpha1.ResourceBinding) bool {
		return observed(b) && cmp.Equal(want, b.Spec.Clusters, cmpopts.EquateEmpty())
	}
}

// TestPlacementAndStatusWrittenApart: the placement is a spec write (a
// new generation), the Scheduled condition, lastScheduledTime and the
// observed generation (the placement's) a status write, and neither
// loses another controller's status.
func TestPlacementAndStatusWrittenApart(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.CreateCluster("member-2")
	f.start(2)
	f.binding("nginx", 3, divided(map[string]int64{"member-1": 1, "member-2": 2}))
	b := f.AwaitBinding("nginx-deployment", "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 1}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 2}))
	if b.Generation != 2 {
		t.Errorf("generation %d, want 2: created, then placed", b.Generation)
	}
	wantCond := metav1.Condition{Type: v1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScheduled,
		Message: "placed on {member-2:2, member-1:1}", ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(f.clk.Now())}
	if diff := cmp.Diff([]metav1.Condition{wantCond}, b.Status.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if lst := b.Status.LastScheduledTime; lst == nil || !lst.Time.Equal(f.clk.Now()) {
		t.Errorf("lastScheduledTime %v, want the clock's %v", lst, f.clk.Now())
	}

	// The status controller's part of the status, then a scale-up.
	aggregated := []v1alpha1.AggregatedStatusItem{{ClusterName: "member-1", Applied: true, Health: v1alpha1.HealthHealthy}}
	b.Status.AggregatedStatus = aggregated
	if _, err := f.Flotilla.ResourceBindings(f.Namespace).UpdateStatus(t.Context(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clk.Step(time.Minute)
	scaled := f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) { s.Replicas = 6 })
	b = f.AwaitBinding("nginx-deployment", "rescheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 2}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 4}))
	if b.Generation != scaled.Generation+1 {
		t.Errorf("generation %d, want %d: scaled, then placed", b.Generation, scaled.Generation+1)
	}
	if diff := cmp.Diff(aggregated, b.Status.AggregatedStatus); diff != "" {
		t.Errorf("the status controller's aggregated status after the schedule (-want +got):\n%s", diff)
	}
	if lst := b.Status.LastScheduledTime; lst == nil || !lst.Time.Equal(f.clk.Now()) {
		t.Errorf("lastScheduledTime %v, want the clock's %v", lst, f.clk.Now())
	}
	f.AwaitEvents(0,
		"Normal Scheduled ResourceBinding nginx-deployment: placed on {member-2:2, member-1:1}",
		"Normal Scheduled ResourceBinding nginx-deployment: placed on {member-2:4, member-1:2}")
}

// TestTaskEndKeepsPlacement: every spec change is a new generation, the
// end of an eviction task too; a fully placed Divided binding keeps its
// placement then, even though the evicted cluster could take replicas
// again, and the generation is recorded as observed so that failover's
// other tasks can go on.
func TestTaskEndKeepsPlacement(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.CreateCluster("member-2")
	f.start(1)
	f.binding("nginx", 3, divided(map[string]int64{"member-1": 1, "member-2": 2}))
	f.AwaitBinding("nginx-deployment", "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 1}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 2}))

	// Evicted from member-1, as failover writes it: the missing replica is
	// placed again, not on member-1.
	f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) {
		s.Clusters = []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 2}}
		s.GracefulEvictionTasks = []v1alpha1.GracefulEvictionTask{{FromCluster: "member-1", Reason: "TaintUntolerated", Producer: "TaintManager"}}
	})
	f.AwaitBinding("nginx-deployment", "replaced", placedOn(v1alpha1.TargetCluster{Name: "member-2", Replicas: 3}))
	f.AwaitEvents(1, "Normal Scheduled ResourceBinding nginx-deployment: placed on {member-2:3}")

	// The task ends (member-1 is fine again): nothing to schedule.
	ended := f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) { s.GracefulEvictionTasks = nil })
	b := f.AwaitBinding("nginx-deployment", "the task's end observed", func(b *v1alpha1.ResourceBinding) bool {
		return observed(b) && b.Generation == ended.Generation
	})
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, b.Spec.Clusters); diff != "" {
		t.Errorf("placement after the task ended (-want +got):\n%s", diff)
	}
	if cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled); cond == nil || cond.ObservedGeneration != ended.Generation || cond.Status != metav1.ConditionTrue {
		t.Errorf("Scheduled condition %+v, want True for generation %d", cond, ended.Generation)
	}
	if e := f.Events.List()[2:]; len(e) > 0 {
		t.Errorf("events after the task ended: %q", e)
	}

	// A real change still schedules: a policy edit moving it to member-1.
	f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) { s.Placement = divided(map[string]int64{"member-1": 1}) })
	f.AwaitBinding("nginx-deployment", "moved", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 3}))
}

// TestEvictionWrittenWithReplacement: failover writes an eviction
// together with the placement Place gives it; the scheduler records that
// placement as its own schedule (lastScheduledTime, the Scheduled event)
// without writing the spec again, and a later generation that changes
// nothing but the tasks is not recorded as a placement.
func TestEvictionWrittenWithReplacement(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.CreateCluster("member-2")
	ctl := f.start(1)
	f.binding("nginx", 3, divided(map[string]int64{"member-1": 1, "member-2": 2}))
	scheduled := f.AwaitBinding("nginx-deployment", "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 1}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 2}))

	f.clk.Step(time.Minute)
	evicted := f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) {
		s.Clusters = []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 2}}
		s.GracefulEvictionTasks = []v1alpha1.GracefulEvictionTask{{FromCluster: "member-1", Reason: "TaintUntolerated", Producer: "TaintManager"}}
		clusters, ok := ctl.Place(f.Namespace+"/nginx-deployment", scheduled.Generation+1, s, &v1alpha1.ResourceBindingStatus{})
		if !ok {
			t.Fatal("no placement for the eviction")
		}
		s.Clusters = clusters
	})
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, evicted.Spec.Clusters); diff != "" {
		t.Fatalf("Place (-want +got):\n%s", diff)
	}
	b := f.AwaitBinding("nginx-deployment", "the replacement recorded", func(b *v1alpha1.ResourceBinding) bool {
		return observed(b) && b.Generation == evicted.Generation
	})
	if lst := b.Status.LastScheduledTime; lst == nil || !lst.Time.Equal(f.clk.Now()) {
		t.Errorf("lastScheduledTime %v, want the clock's %v", lst, f.clk.Now())
	}
	f.AwaitEvents(1, "Normal Scheduled ResourceBinding nginx-deployment: placed on {member-2:3}")

	f.clk.Step(time.Minute)
	ended := f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) { s.GracefulEvictionTasks = nil })
	b = f.AwaitBinding("nginx-deployment", "the task's end observed", func(b *v1alpha1.ResourceBinding) bool {
		return observed(b) && b.Generation == ended.Generation
	})
	if lst := b.Status.LastScheduledTime; lst == nil || !lst.Time.Equal(f.clk.Now().Add(-time.Minute)) {
		t.Errorf("lastScheduledTime %v after the task ended, want the replacement's %v", lst, f.clk.Now().Add(-time.Minute))
	}
	if e := f.Events.List()[2:]; len(e) > 0 {
		t.Errorf("events after the task ended: %q", e)
	}
}

// TestCreatedPlaced: the detector creates a binding with the placement
// Place gives it; the scheduler records it as its schedule without a spec
// write of its own.
func TestCreatedPlaced(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.CreateCluster("member-2")
	ctl := f.start(1)
	spec := v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided(map[string]int64{"member-1": 1, "member-2": 2})}
	want := []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, controllertest.WaitTimeout, true, func(context.Context) (bool, error) {
		clusters, ok := ctl.Place(f.Namespace+"/placed-deployment", 1, &spec, &v1alpha1.ResourceBindingStatus{})
		if ok {
			spec.Clusters = clusters
		}
		return ok, nil // not before the clusters are listed
	})
	if err != nil || !cmp.Equal(want, spec.Clusters) {
		t.Fatalf("Place: %v (-want +got):\n%s", err, cmp.Diff(want, spec.Clusters))
	}
	b := f.CreateDeploymentBinding("placed", spec)
	b = f.AwaitBinding(b.Name, "recorded", func(b *v1alpha1.ResourceBinding) bool { return observed(b) })
	if b.Generation != 1 || !cmp.Equal(want, b.Spec.Clusters) {
		t.Errorf("generation %d, clusters %v: want 1, %v (no placement write)", b.Generation, b.Spec.Clusters, want)
	}
	if lst := b.Status.LastScheduledTime; lst == nil || !lst.Time.Equal(f.clk.Now()) {
		t.Errorf("lastScheduledTime %v, want the clock's %v", lst, f.clk.Now())
	}
	f.AwaitEvents(0, "Normal Scheduled ResourceBinding placed-deployment: placed on {member-2:2, member-1:1}")
}

func TestUnrecorded(t *testing.T) {
	placed := func(message string) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Message: message}}
	}
	cond := metav1.Condition{Type: v1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Message: "placed on {member-2:3}"}
	tests := []struct {
		name   string
		status v1alpha1.ResourceBindingStatus
		want   bool
	}{
		{"new generation, another placement", v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 1, Conditions: placed("placed on {member-1:1, member-2:2}")}, true},
		{"new generation, same placement", v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 1, Conditions: placed("placed on {member-2:3}")}, false},
		{"generation already recorded", v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 2, Conditions: placed("placed on {member-1:3}")}, false},
		{"created placed", v1alpha1.ResourceBindingStatus{}, true},
		{"unschedulable before", v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 1, Conditions: []metav1.Condition{{Type: v1alpha1.BindingConditionScheduled, Status: metav1.ConditionFalse, Message: "no cluster fits"}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unrecorded(2, &tt.status, cond); got != tt.want {
				t.Errorf("unrecorded = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDuplicatedFollowsClusters(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.start(1)
	f.binding("nginx", 2, nil)
	f.AwaitBinding("nginx-deployment", "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 2}))
	f.CreateCluster("member-2")
	f.AwaitBinding("nginx-deployment", "on the new cluster too", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 2}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 2}))
}

// TestUnschedulableKeepsResult: nothing fits, the result stays, the
// condition says why and the event is recorded once.
func TestUnschedulableKeepsResult(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.start(1)
	f.binding("nginx", 2, nil)
	f.AwaitBinding("nginx-deployment", "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 2}))
	f.AwaitEvents(0, "Normal Scheduled ResourceBinding nginx-deployment: placed on {member-1:2}")
	edited := f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) {
		s.Placement = &v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"member-9"}}}
	})
	b := f.AwaitBinding("nginx-deployment", "unschedulable", func(b *v1alpha1.ResourceBinding) bool {
		return observed(b) && b.Generation == edited.Generation
	})
	cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonNoClusterFit || cond.ObservedGeneration != edited.Generation {
		t.Errorf("Scheduled condition %+v, want False, %s, generation %d", cond, v1alpha1.ReasonNoClusterFit, edited.Generation)
	}
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-1", Replicas: 2}}, b.Spec.Clusters); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}
	f.AwaitEvents(1, "Warning ScheduleFailed ResourceBinding nginx-deployment: "+cond.Message)
}

// TestFreshScheduleOnce: a rescheduleTriggeredAt later than the last
// schedule is one Fresh schedule, recorded by lastScheduledTime even when
// the placement stays.
func TestFreshScheduleOnce(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.CreateCluster("member-2")
	f.start(1)
	f.binding("nginx", 3, divided(map[string]int64{"member-1": 1, "member-2": 2}))
	first := f.AwaitBinding("nginx-deployment", "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 1}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 2}))
	f.clk.Step(time.Minute)
	triggered := f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) { s.RescheduleTriggeredAt = &metav1.Time{Time: f.clk.Now()} })
	b := f.AwaitBinding("nginx-deployment", "rescheduled", func(b *v1alpha1.ResourceBinding) bool {
		return observed(b) && b.Generation == triggered.Generation
	})
	if lst := b.Status.LastScheduledTime; lst == nil || !lst.Time.Equal(f.clk.Now()) || !lst.After(first.Status.LastScheduledTime.Time) {
		t.Errorf("lastScheduledTime %v, want the clock's %v", lst, f.clk.Now())
	}
	if diff := cmp.Diff(first.Spec.Clusters, b.Spec.Clusters); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}
	if scheduleNeeded(b.Generation, &b.Spec, &b.Status) {
		t.Error("the Fresh schedule is still asked for after it was done")
	}
}

// TestStatusWritesDoNotFightScheduling: a status writer as busy as the
// status controller during a rollout writes every binding's aggregated
// status while the scheduler places all of them on a new cluster. Neither
// loses the other's fields; a placement that conflicts with a status write
// is written again at once, not sent back to the queue. The conflicts are
// counted.
func TestStatusWritesDoNotFightScheduling(t *testing.T) {
	const n = 40
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.start(2)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("app-%02d-deployment", i)
		f.binding(fmt.Sprintf("app-%02d", i), 2, nil)
	}
	for _, name := range names {
		f.AwaitBinding(name, "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 2}))
	}

	// The status writer, as busy as the status controller.
	bindings := f.Flotilla.ResourceBindings(f.Namespace)
	writer := controllertest.StartStatusWriter(t, bindings, "member-1", names)
	f.CreateCluster("member-2")
	both := placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 2}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 2})
	for _, name := range names {
		f.AwaitBinding(name, "on member-2 too", both)
	}
	writer.StopAfterNextRound() // one more full round, begun after the schedule

	for _, name := range names {
		b, err := bindings.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !both(b) || !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BindingConditionScheduled) {
			t.Errorf("%s: placement %v, status %+v", name, b.Spec.Clusters, b.Status)
		}
		if len(b.Status.AggregatedStatus) != 1 || b.Status.AggregatedStatus[0].AppliedMessage != writer.Last(name) {
			t.Errorf("%s: aggregated status %+v, want the writer's last (%s)", name, b.Status.AggregatedStatus, writer.Last(name))
		}
	}
	specConflicts, statusConflicts := f.conflicts.Get("PUT spec"), f.conflicts.Get("PUT status")
	t.Logf("%d bindings placed again during status writes: scheduler conflicts %d on placements, %d on status; %d sent back to the queue; status writer conflicts %d",
		n, specConflicts, statusConflicts, f.retries.Load(), writer.Conflicts())
	if retries := f.retries.Load(); retries > int64(specConflicts+statusConflicts) {
		t.Errorf("%d retries through the queue, more than the %d conflicts", retries, specConflicts+statusConflicts)
	}
}

// TestRestartWritesNothing: a restarted controller finds every
// binding observed and writes nothing.
func TestRestartWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.CreateCluster("member-2")
	f.start(1)
	f.binding("nginx", 3, divided(map[string]int64{"member-1": 1, "member-2": 2}))
	before := f.AwaitBinding("nginx-deployment", "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 1}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 2}))
	f.Stop()
	f.start(1)
	// A second binding made after the restart is scheduled after the first
	// was looked at (one worker, in order).
	f.binding("probe", 1, nil)
	f.AwaitBinding("probe-deployment", "scheduled", func(b *v1alpha1.ResourceBinding) bool { return observed(b) && len(b.Spec.Clusters) == 2 })
	after, err := f.Flotilla.ResourceBindings(f.Namespace).Get(t.Context(), "nginx-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the restarted controller wrote the binding: %+v", after.Status)
	}
}

// TestScheduleTiesByTemplateUID: the scheduler gets the template's UID from
// spec.resource.uid, which decides, as in Karmada, which of two equal
// clusters gets the odd replica (Karmada's test UIDs: FNV-1a hash odd, then
// even).
func TestScheduleTiesByTemplateUID(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.CreateCluster("member-2")
	f.start(1)
	equal := divided(map[string]int64{"member-1": 1, "member-2": 1})
	for name, uid := range map[string]types.UID{"odd": "d43fdeeb-d750-4e2b-bee3-64eb94534f4c", "even": "4858ca61-3ff8-4095-8267-f3d059d8074c"} {
		b := &v1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: f.Namespace}, Spec: v1alpha1.ResourceBindingSpec{
			Resource: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: f.Namespace, Name: name, UID: uid},
			Replicas: 5, Placement: equal,
		}}
		if _, err := f.Flotilla.ResourceBindings(f.Namespace).Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.AwaitBinding("odd-deployment", "the odd replica on member-2", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 2}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 3}))
	f.AwaitBinding("even-deployment", "the odd replica on member-1", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 3}, v1alpha1.TargetCluster{Name: "member-2", Replicas: 2}))
}
