package failover

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
)

// admittedEvent is the event of cluster admitted to eviction in the
// default zone with waiting more clusters waiting.
func admittedEvent(cluster string, waiting int) string {
	return fmt.Sprintf("Normal EvictionAdmitted Cluster %s: admitted to eviction in zone default (%d more clusters of the zone waiting): "+
		"every workload that does not tolerate its NoExecute taints leaves it now", cluster, waiting)
}

const evictedMessage = "cluster member-1 has taint example.com/broken:NoExecute that the placement does not tolerate (any longer)"

// TestEvictsThenEndsTask: an untolerated NoExecute taint evicts at once
// (a spec write, so a new generation); the task waits for the scheduler to
// observe that generation and place the replicas, then ends (its grace
// period is 0 here).
func TestEvictsThenEndsTask(t *testing.T) {
	f := newFixture(t)
	clk := clocktesting.NewFakeClock(f.T0)
	f.cluster("member-1", true)
	f.cluster("member-2", true)
	f.binding("nginx", []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}, nil)
	f.start(clk, testConfig(), 1)

	f.setCluster("member-1", true, f.T0.Add(-time.Hour), broken)
	b := f.AwaitBinding("nginx-deployment", "evicted from member-1", evictedFrom("member-1"))
	wantTask := v1alpha1.GracefulEvictionTask{FromCluster: "member-1", PurgeMode: v1alpha1.PurgeModeGracefully, Replicas: ptr.To[int32](1),
		Reason: "TaintUntolerated", Message: evictedMessage, Producer: "TaintManager", GracePeriodSeconds: ptr.To[int32](0), CreationTimestamp: &metav1.Time{Time: f.T0}}
	if diff := cmp.Diff([]v1alpha1.GracefulEvictionTask{wantTask}, b.Spec.GracefulEvictionTasks); diff != "" {
		t.Errorf("eviction tasks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 2}}, b.Spec.Clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	if b.Generation != 2 || b.Status.SchedulerObservedGeneration != 1 || len(b.Status.FailbackClusters) > 0 {
		t.Errorf("generation %d, observed %d, failback clusters %v; want 2, the scheduler's 1 and none", b.Generation, b.Status.SchedulerObservedGeneration, b.Status.FailbackClusters)
	}
	evicted := "evicted from member-1 (TaintUntolerated, purge mode Gracefully): " + evictedMessage
	f.AwaitEvents(0, admittedEvent("member-1", 0), "Warning Evicted ResourceBinding nginx-deployment: "+evicted, "Warning Evicted Deployment nginx: "+evicted)

	// The scheduler places the replica elsewhere: the task is over.
	f.place("nginx-deployment", v1alpha1.TargetCluster{Name: "member-2", Replicas: 3})
	b = f.AwaitBinding("nginx-deployment", "task ended", noTasks)
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, b.Spec.Clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	ended := "eviction from member-1 ended (GracePeriodExpired); its copy there is removed"
	f.AwaitEvents(3, "Normal EvictionTaskEnded ResourceBinding nginx-deployment: "+ended, "Normal EvictionTaskEnded Deployment nginx: "+ended)
	if st := f.ctl.Stats(); st.Evictions != 1 || st.TasksEnded != 1 || st.ZoneModes["default"] != "Normal" {
		t.Errorf("stats %+v, want 1 eviction, 1 task ended, zone default Normal", st)
	}
}

// TestFailbackClustersAreStatus: the clusters a binding may fail back to
// are status, written through the status subresource before the eviction;
// once the cluster has been Ready for the stabilization period (the
// controller wakes then), the binding gets a Fresh reschedule and the
// cluster leaves the list.
func TestFailbackClustersAreStatus(t *testing.T) {
	f := newFixture(t)
	clk := clocktesting.NewFakeClock(f.T0)
	f.cluster("member-1", true)
	f.cluster("member-2", true)
	failback := &v1alpha1.FailoverBehavior{Cluster: &v1alpha1.ClusterFailoverBehavior{Failback: &v1alpha1.Failback{StabilizationSeconds: 60}}}
	f.binding("nginx", []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}, failback)
	f.start(clk, testConfig(), 1)

	f.setCluster("member-1", false, f.T0, broken)
	b := f.AwaitBinding("nginx-deployment", "evicted, with member-1 to fail back to", func(b *v1alpha1.ResourceBinding) bool {
		return evictedFrom("member-1")(b) && len(b.Status.FailbackClusters) > 0
	})
	if diff := cmp.Diff([]v1alpha1.FailbackCluster{{Name: "member-1", EvictedAt: metav1.NewTime(f.T0)}}, b.Status.FailbackClusters); diff != "" {
		t.Errorf("failback clusters (-want +got):\n%s", diff)
	}
	f.place("nginx-deployment", v1alpha1.TargetCluster{Name: "member-2", Replicas: 3})
	f.AwaitBinding("nginx-deployment", "task ended", noTasks)

	// member-1 is back; 60 s later the binding fails back.
	clk.Step(10 * time.Second)
	back := clk.Now()
	f.setCluster("member-1", true, back)
	// Seen at once: seen only after the step, the transition would count
	// from the end of its stored second (instants.go).
	f.awaitSeen("member-1", readyOf, back)
	clk.Step(60 * time.Second)
	err := controllertest.PollNudgingClock(t.Context(), clk, func(ctx context.Context) bool {
		var err error
		b, err = f.Flotilla.ResourceBindings(f.Namespace).Get(ctx, "nginx-deployment", metav1.GetOptions{})
		return err == nil && b.Spec.RescheduleTriggeredAt != nil && len(b.Status.FailbackClusters) == 0
	})
	if err != nil {
		t.Fatalf("waiting for the failback: %v; last seen spec %+v status %+v", err, b.Spec, b.Status)
	}
	if at := b.Spec.RescheduleTriggeredAt.Time; at.Before(back.Add(60 * time.Second)) {
		t.Errorf("rescheduleTriggeredAt %v, before the stabilization period ended at %v", at, back.Add(60*time.Second))
	}
	failedBack := "member-1 Ready again for the stabilization period: rescheduling afresh"
	f.AwaitEvents(5, "Normal Failback ResourceBinding nginx-deployment: "+failedBack, "Normal Failback Deployment nginx: "+failedBack)
}

// TestFailbackTriggersOnce: a version whose failback reschedule is stored
// but whose failback list still names the cluster (the informer sees the
// spec write before the status write that clears the list) does not
// trigger a second reschedule; the list is cleared. Seen in CI as two
// Failback events for one failback.
func TestFailbackTriggersOnce(t *testing.T) {
	f := newFixture(t)
	due := f.T0.Add(70 * time.Second)
	clk := clocktesting.NewFakeClock(due.Add(time.Second))
	f.cluster("member-1", true)
	f.SetConditions("member-1", readyCondition(true, f.T0.Add(10*time.Second)))
	f.cluster("member-2", true)
	failback := &v1alpha1.FailoverBehavior{Cluster: &v1alpha1.ClusterFailoverBehavior{Failback: &v1alpha1.Failback{StabilizationSeconds: 60}}}
	f.binding("nginx", []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, failback)
	f.EditBindingSpec("nginx-deployment", func(s *v1alpha1.ResourceBindingSpec) { s.RescheduleTriggeredAt = &metav1.Time{Time: due} })
	f.EditBindingStatus("nginx-deployment", func(b *v1alpha1.ResourceBinding) {
		f.scheduled(b)
		b.Status.FailbackClusters = []v1alpha1.FailbackCluster{{Name: "member-1", EvictedAt: metav1.NewTime(f.T0)}}
	})
	f.start(clk, testConfig(), 1)

	// A second trigger would write the spec before clearing the list.
	b := f.AwaitBinding("nginx-deployment", "failback list cleared", func(b *v1alpha1.ResourceBinding) bool { return len(b.Status.FailbackClusters) == 0 })
	if got := b.Spec.RescheduleTriggeredAt; got == nil || !got.Time.Equal(due) {
		t.Errorf("rescheduleTriggeredAt %v, want %v (untouched)", got, due)
	}
	if n := f.Events.Count("Normal Failback"); n != 0 {
		t.Errorf("%d Failback events, want none: %q", n, f.Events.List())
	}
}

// TestEvictionsDoNotFightStatusWrites: a status writer as busy as the
// status controller during a rollout writes every binding's aggregated
// status while failover evicts all of them. Every binding is evicted
// exactly once and keeps the writer's status; an eviction that conflicts
// with a status write is written again at once, not sent back to the
// queue. The conflicts are counted.
func TestEvictionsDoNotFightStatusWrites(t *testing.T) {
	const n = 40
	f := newFixture(t)
	f.cluster("member-1", true)
	f.cluster("member-2", true)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("app-%02d-deployment", i)
		f.binding(fmt.Sprintf("app-%02d", i), []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}, nil)
	}
	f.start(clock.RealClock{}, testConfig(), 2)

	// The status writer, as busy as the status controller.
	bindings := f.Flotilla.ResourceBindings(f.Namespace)
	writer := controllertest.StartStatusWriter(t, bindings, "member-2", names)

	f.setCluster("member-1", true, f.T0.Add(-time.Hour), broken)
	for _, name := range names {
		f.AwaitBinding(name, "evicted from member-1", evictedFrom("member-1"))
	}
	writer.StopAfterNextRound() // one more full round, begun after the evictions

	for _, name := range names {
		b, err := bindings.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Spec.GracefulEvictionTasks) != 1 || !cmp.Equal([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 2}}, b.Spec.Clusters, cmpopts.EquateEmpty()) {
			t.Errorf("%s: clusters %v, tasks %+v; want member-2 and one task", name, b.Spec.Clusters, b.Spec.GracefulEvictionTasks)
		}
		if len(b.Status.AggregatedStatus) != 1 || b.Status.AggregatedStatus[0].AppliedMessage != writer.Last(name) {
			t.Errorf("%s: aggregated status %+v, want the writer's last (%s)", name, b.Status.AggregatedStatus, writer.Last(name))
		}
	}
	if got := f.Events.Count("Warning Evicted ResourceBinding"); got != n {
		t.Errorf("%d Evicted events on bindings, want %d", got, n)
	}
	if st := f.ctl.Stats(); st.Evictions != n {
		t.Errorf("%d evictions counted, want %d", st.Evictions, n)
	}
	specConflicts, statusConflicts := f.conflicts.Get("PUT spec"), f.conflicts.Get("PUT status")
	t.Logf("%d bindings evicted during status writes: failover conflicts %d on evictions, %d on status; %d sent back to the queue; status writer conflicts %d",
		n, specConflicts, statusConflicts, f.retries.Load(), writer.Conflicts())
	if retries := f.retries.Load(); retries > int64(specConflicts+statusConflicts) {
		t.Errorf("%d retries through the queue, more than the %d conflicts", retries, specConflicts+statusConflicts)
	}
}
