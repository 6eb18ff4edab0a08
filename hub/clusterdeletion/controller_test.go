package clusterdeletion

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/hub/dispatch"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/internal/kube"
)

func TestClustersOf(t *testing.T) {
	spec := &v1alpha1.ResourceBindingSpec{
		Clusters:              []v1alpha1.TargetCluster{{Name: "a"}, {Name: "b"}},
		GracefulEvictionTasks: []v1alpha1.GracefulEvictionTask{{FromCluster: "c"}},
	}
	if got := ClustersOf(spec); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("ClustersOf = %v", got)
	}
	if got := ClustersOf(nil); got != nil {
		t.Errorf("ClustersOf(nil) = %v", got)
	}
	for ns, want := range map[string]string{v1alpha1.ExecutionNamespace("x"): "x", "default": "", v1alpha1.ExecutionNamespacePrefix: ""} {
		if got, _ := cutExecutionNamespace(ns); got != want {
			t.Errorf("cutExecutionNamespace(%q) = %q, want %q", ns, got, want)
		}
	}
}

// both runs the cleanup and the failover controller, which evicts the
// bindings of a Cluster carrying the terminating taint, and the dispatcher,
// which releases the Works of a cluster being deleted, as the hub does.
type both []controllertest.Controller

// dispatcher runs a dispatch.Dispatcher as a controllertest.Controller.
type dispatcher struct{ *dispatch.Dispatcher }

func (d dispatcher) Run(ctx context.Context, _ int) { d.Dispatcher.Run(ctx) }

func (b both) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for _, c := range b {
		wg.Go(func() { c.Run(ctx, workers) })
	}
	wg.Wait()
}

func await(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, controllertest.WaitTimeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestDeletedClusterGoesOnceItsWorkloadsLeft(t *testing.T) {
	f := controllertest.New(t)
	ctx := t.Context()
	gone := controllertest.CreateClusterWithExecutionNamespace(t, f.Env, "gone-") // as kubectl creates one: no finalizer
	stay := controllertest.CreateClusterWithExecutionNamespace(t, f.Env, "stay-")
	ready := metav1.Condition{Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: "ClusterReady", LastTransitionTime: metav1.NewTime(f.T0.Add(-time.Hour))}
	f.SetConditions(gone, ready)
	f.SetConditions(stay, ready)
	cfg := failover.DefaultConfig()
	cfg.GracefulEvictionTimeout = 0
	cfg.Zones.ClusterRate = 1e6
	f.Start(nil, 2, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		logger := controllertest.Logger(t)
		return both{New(clients, informers, f.Events, logger), failover.New(clients, informers, f.Events, clock.RealClock{}, logger, cfg),
			dispatcher{dispatch.New(clients, informers, f.Events, clock.RealClock{}, logger)}}
	})
	clusters := f.Flotilla.Clusters()
	hasFinalizer := func(ctx context.Context) (bool, error) {
		c, err := clusters.Get(ctx, gone, metav1.GetOptions{})
		return err == nil && slices.Contains(c.Finalizers, v1alpha1.ClusterFinalizer), err
	}
	await(t, "the finalizer on a Cluster created without one", hasFinalizer)

	// What the hub keeps for the cluster: its lease and a Work, which its
	// agent would have to confirm the deletion of.
	if err := controller.EnsureNamespace(ctx, f.Env.Kube, v1alpha1.LeaseNamespace); err != nil {
		t.Fatal(err)
	}
	leases := f.Env.Kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: gone}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	works := f.Flotilla.Works(v1alpha1.ExecutionNamespace(gone))
	w := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "web", Finalizers: []string{v1alpha1.WorkFinalizer}}}
	w.Spec.Workload.Manifests = []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`)}}}
	if _, err := works.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := f.CreateDeploymentBinding("web", v1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: []v1alpha1.TargetCluster{{Name: gone, Replicas: 3}}})

	if err := clusters.Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.SetTaints(gone, corev1.Taint{Key: v1alpha1.TaintClusterTerminating, Effect: corev1.TaintEffectNoExecute}) // what the registry does
	evicted := f.AwaitBinding(b.Name, "evicted from the deleted cluster", func(b *v1alpha1.ResourceBinding) bool {
		return len(b.Spec.Clusters) == 0 && len(b.Spec.GracefulEvictionTasks) == 1 && b.Spec.GracefulEvictionTasks[0].FromCluster == gone
	})
	if _, err := clusters.Get(ctx, gone, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Cluster went while a binding's eviction task names it: %v", err)
	}
	await(t, "the waiting event", func(context.Context) (bool, error) {
		return f.Events.Count("Normal "+ReasonWaitingForBindings+" Cluster "+gone+": cluster being deleted: waiting for 1 binding to leave") == 1, nil
	})
	_ = evicted
	// The scheduler places it elsewhere: the task still holds the Cluster.
	f.EditBindingSpec(b.Name, func(s *v1alpha1.ResourceBindingSpec) {
		s.Clusters = []v1alpha1.TargetCluster{{Name: stay, Replicas: 3}}
	})
	if _, err := clusters.Get(ctx, gone, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Cluster went while a binding's eviction task names it: %v", err)
	}
	// The task ends (its replacement healthy, its grace period over, or a
	// PurgeRequest): nothing names the cluster any more.
	f.EditBindingSpec(b.Name, func(s *v1alpha1.ResourceBindingSpec) { s.GracefulEvictionTasks = nil })

	await(t, "the Cluster gone", func(ctx context.Context) (bool, error) {
		_, err := clusters.Get(ctx, gone, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := leases.Get(ctx, gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease of the deleted cluster: %v, want NotFound", err)
	}
	if _, err := works.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Work of the deleted cluster: %v, want NotFound", err)
	}
	// The event is recorded once the finalizer's removal returned: the
	// Cluster may be gone a moment before.
	await(t, "the cleaned-up event", func(context.Context) (bool, error) {
		return f.Events.Count("Normal "+ReasonCleanedUp+" Cluster "+gone) >= 1, nil
	})
	if n := f.Events.Count("Normal " + ReasonCleanedUp + " Cluster " + gone); n != 1 {
		t.Errorf("%d cleaned-up events, want 1: %v", n, f.Events.List())
	}
	if _, err := clusters.Get(ctx, stay, metav1.GetOptions{}); err != nil {
		t.Errorf("the other Cluster: %v", err)
	}
}

func TestDeletedClusterWithNothingPlacedGoesAtOnce(t *testing.T) {
	f := controllertest.New(t)
	ctx := t.Context()
	f.Start(nil, 1, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		return New(clients, informers, f.Events, controllertest.Logger(t))
	})
	clusters := f.Flotilla.Clusters()
	c, err := clusters.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{GenerateName: "empty-", Finalizers: []string{v1alpha1.ClusterFinalizer}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := clusters.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, "the Cluster gone", func(ctx context.Context) (bool, error) {
		_, err := clusters.Get(ctx, c.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
