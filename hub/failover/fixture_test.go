package failover

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// fixture is the test binary's API server with a namespace for the test's
// bindings, and a failover controller.
type fixture struct {
	*controllertest.Fixture
	conflicts controllertest.ConflictCounter // the controller's
	retries   atomic.Int64
	ctl       *Controller
	heard     heard             // what the controller's observer was told
	placer    controller.Placer // the scheduler's placement, if set before start
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return &fixture{Fixture: controllertest.New(t)}
}

// testConfig ends tasks as soon as a replacement is scheduled and evicts
// without a rate limit to speak of.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.GracefulEvictionTimeout = 0
	cfg.Zones.ClusterRate = 1e6
	return cfg
}

// start runs the controller on informers of its own.
func (f *fixture) start(clk clock.WithTicker, cfg Config, workers int) {
	f.T.Helper()
	f.Start(f.conflicts.Wrap, workers, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		f.ctl = New(clients, informers, f.Events, clk, controllertest.LoggerCountingRetries(f.T, &f.retries), cfg)
		f.ctl.SetObserver(f.heard.observer())
		f.ctl.SetPlacer(f.placer)
		return f.ctl
	})
}

// cluster creates a cluster, Ready (since an hour before t0) or not.
func (f *fixture) cluster(name string, ready bool, taints ...corev1.Taint) {
	f.T.Helper()
	f.CreateCluster(name, taints...)
	f.SetConditions(name, readyCondition(ready, f.T0.Add(-time.Hour)))
}

// twoReadyClusters creates two clusters named prefix+"a-"... and
// prefix+"b-"... with their execution namespaces, Ready since an hour
// before t0, and stops the controller at the end of the test before they
// are cleaned up.
func (f *fixture) twoReadyClusters(prefix string) (a, b string) {
	f.T.Helper()
	a = controllertest.CreateClusterWithExecutionNamespace(f.T, f.Env, prefix+"a-")
	b = controllertest.CreateClusterWithExecutionNamespace(f.T, f.Env, prefix+"b-")
	// Registered after the execution namespaces': runs before their
	// clean-up.
	f.T.Cleanup(f.Stop)
	for _, name := range []string{a, b} {
		f.SetConditions(name, readyCondition(true, f.T0.Add(-time.Hour)))
	}
	return a, b
}

func readyCondition(ready bool, since time.Time) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: "ClusterReady", LastTransitionTime: metav1.NewTime(since)}
	if !ready {
		cond.Status, cond.Reason = metav1.ConditionFalse, "ClusterNotReady"
	}
	return cond
}

// setCluster changes a cluster's taints and Ready condition.
func (f *fixture) setCluster(name string, ready bool, since time.Time, taints ...corev1.Taint) {
	f.T.Helper()
	f.SetTaints(name, taints...)
	f.SetConditions(name, readyCondition(ready, since))
}

// broken is a taint no placement tolerates: evicts at once.
var broken = corev1.Taint{Key: "example.com/broken", Effect: corev1.TaintEffectNoExecute}

// binding creates a ResourceBinding of a Deployment with 3 replicas placed
// on clusters, as scheduled an hour before t0.
func (f *fixture) binding(name string, clusters []v1alpha1.TargetCluster, failover *v1alpha1.FailoverBehavior) *v1alpha1.ResourceBinding {
	f.T.Helper()
	b := f.CreateDeploymentBinding(name, v1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: clusters, Failover: failover})
	return f.EditBindingStatus(b.Name, func(b *v1alpha1.ResourceBinding) {
		f.scheduled(b)
		b.Status.LastScheduledTime = &metav1.Time{Time: f.T0.Add(-time.Hour)}
	})
}

// scheduled sets the scheduler's status for the binding's generation.
func (f *fixture) scheduled(b *v1alpha1.ResourceBinding) {
	b.Status.SchedulerObservedGeneration = b.Generation
	b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScheduled,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(f.T0)}}
}

// place does the scheduler's work: the placement, then its status.
func (f *fixture) place(name string, clusters ...v1alpha1.TargetCluster) {
	f.T.Helper()
	f.EditBindingSpec(name, func(s *v1alpha1.ResourceBindingSpec) { s.Clusters = clusters })
	f.EditBindingStatus(name, f.scheduled)
}

// evictedFrom: the binding has a task from cluster and is no longer
// placed there.
func evictedFrom(cluster string) func(*v1alpha1.ResourceBinding) bool {
	return func(b *v1alpha1.ResourceBinding) bool {
		return slices.Contains(b.Spec.EvictingClusters(), cluster) &&
			!slices.ContainsFunc(b.Spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == cluster })
	}
}

func noTasks(b *v1alpha1.ResourceBinding) bool { return len(b.Spec.GracefulEvictionTasks) == 0 }
