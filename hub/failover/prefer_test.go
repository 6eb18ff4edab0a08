package failover

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// degraded is a PreferNoExecute taint no placement tolerates.
var degraded = corev1.Taint{Key: "example.com/degraded", Effect: v1alpha1.TaintEffectPreferNoExecute}

// setRoom gives a cluster a resource summary with room for pods pods.
func (f *fixture) setRoom(name string, pods int64) {
	f.T.Helper()
	clusters := f.Flotilla.Clusters()
	c, err := clusters.Get(f.T.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	c.Status.ResourceSummary = &v1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}}
	if _, err := clusters.UpdateStatus(f.T.Context(), c, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// TestPreferNoExecuteWaitsForRoom: an untolerated PreferNoExecute taint
// evicts a binding only when a healthy cluster with room can take it.
// While member-2, where the 3 replicas would go, is not Ready and then has
// room for 2, the binding stays on member-1 and an event says why, once per
// reason; when member-2 has room for 3, the binding is evicted at once,
// with no timer: the cluster's change wakes it.
func TestPreferNoExecuteWaitsForRoom(t *testing.T) {
	f := newFixture(t)
	clk := clocktesting.NewFakeClock(f.T0)
	f.cluster("member-1", true)
	f.cluster("member-2", false)
	f.setRoom("member-2", 2)
	f.binding("nginx", []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 3}}, nil)
	f.start(clk, testConfig(), 1)

	f.setCluster("member-1", true, f.T0.Add(-time.Hour), degraded)
	notReady := "eviction from member-1 deferred: its taint example.com/degraded:PreferNoExecute asks the workload to leave only for a healthy cluster with room, " +
		"and member-2 is not Ready; it stays there until one can take it"
	f.AwaitEvents(0, "Warning EvictionDeferred ResourceBinding nginx-deployment: "+notReady, "Warning EvictionDeferred Deployment nginx: "+notReady)

	f.SetConditions("member-2", readyCondition(true, f.T0))
	noRoom := "eviction from member-1 deferred: its taint example.com/degraded:PreferNoExecute asks the workload to leave only for a healthy cluster with room, " +
		"and member-2 has room for 2 of the 3 replicas it would get; it stays there until one can take it"
	f.AwaitEvents(2, "Warning EvictionDeferred ResourceBinding nginx-deployment: "+noRoom, "Warning EvictionDeferred Deployment nginx: "+noRoom)
	if spec, _ := f.BindingSpec(f.Namespace, "nginx-deployment"); len(spec.GracefulEvictionTasks) > 0 || len(spec.Clusters) != 1 {
		t.Fatalf("binding evicted with no room to go: %+v", spec)
	}
	if n := f.ctl.EvictionsDeferred(); n != 1 {
		t.Errorf("evictions deferred = %d, want 1", n)
	}

	f.setRoom("member-2", 3)
	b := f.AwaitBinding("nginx-deployment", "evicted from member-1", evictedFrom("member-1"))
	if task := b.Spec.GracefulEvictionTasks[0]; task.Reason != "TaintUntolerated" {
		t.Errorf("eviction task %+v, want reason TaintUntolerated", task)
	}
	if n := f.ctl.EvictionsDeferred(); n != 0 {
		t.Errorf("evictions deferred after the eviction = %d, want 0", n)
	}
}

// TestPreferNoExecuteToleratedThenExpired: a toleration of the
// PreferNoExecute taint keeps the binding until its seconds run out; then
// it leaves, member-2 having room.
func TestPreferNoExecuteToleratedThenExpired(t *testing.T) {
	f := newFixture(t)
	clk := clocktesting.NewFakeClock(f.T0)
	f.cluster("member-1", true)
	f.cluster("member-2", true)
	f.setRoom("member-2", 10)
	seconds := int64(60)
	f.binding("nginx", []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 3}}, nil)
	f.EditBindingSpec("nginx-deployment", func(spec *v1alpha1.ResourceBindingSpec) {
		spec.Placement = &v1alpha1.Placement{ClusterTolerations: []corev1.Toleration{
			{Key: degraded.Key, Operator: corev1.TolerationOpExists, Effect: v1alpha1.TaintEffectPreferNoExecute, TolerationSeconds: &seconds}}}
	})
	f.Start(f.conflicts.Wrap, 1, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		f.ctl = New(clients, informers, f.Events, clk, controllertest.LoggerCountingRetries(f.T, &f.retries), testConfig())
		f.ctl.waiting = f.RecordWake
		return f.ctl
	})

	taint := degraded
	taint.TimeAdded = &metav1.Time{Time: f.T0}
	f.setCluster("member-1", true, f.T0.Add(-time.Hour), taint)
	f.AwaitWake(0, f.Namespace+"/nginx-deployment", f.T0.Add(time.Minute))
	if spec, _ := f.BindingSpec(f.Namespace, "nginx-deployment"); len(spec.GracefulEvictionTasks) > 0 {
		t.Fatalf("evicted while the toleration runs: %+v", spec)
	}
	clk.Step(time.Minute)
	f.AwaitBinding("nginx-deployment", "evicted from member-1", evictedFrom("member-1"))
}
