package scheduling

import (
	"slices"
	"sync/atomic"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// fixture is the test binary's API server with a namespace for the test's
// bindings, and a scheduling controller on a fake clock.
type fixture struct {
	*controllertest.Fixture
	clk       *clocktesting.FakeClock
	conflicts controllertest.ConflictCounter // the controller's
	retries   atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{Fixture: controllertest.New(t)}
	f.clk = clocktesting.NewFakeClock(f.T0)
	return f
}

// start runs the controller on informers of its own and returns it.
func (f *fixture) start(workers int) *Controller {
	f.T.Helper()
	var ctl *Controller
	f.Start(f.conflicts.Wrap, workers, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		ctl = New(clients, informers, f.Events, f.clk, controllertest.LoggerCountingRetries(f.T, &f.retries))
		return ctl
	})
	return ctl
}

// binding creates a ResourceBinding of a Deployment in the test's namespace.
func (f *fixture) binding(name string, replicas int32, placement *v1alpha1.Placement) *v1alpha1.ResourceBinding {
	f.T.Helper()
	return f.CreateDeploymentBinding(name, v1alpha1.ResourceBindingSpec{Replicas: replicas, Placement: placement})
}

// observed: the scheduler has recorded the binding's generation.
func observed(b *v1alpha1.ResourceBinding) bool {
	return b.Status.SchedulerObservedGeneration == b.Generation
}

func divided(weights map[string]int64) *v1alpha1.Placement {
	p := &v1alpha1.Placement{ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &v1alpha1.ClusterPreferences{},
	}}
	names := make([]string, 0, len(weights))
	for name := range weights {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p.ReplicaScheduling.WeightPreference.StaticWeightList = append(p.ReplicaScheduling.WeightPreference.StaticWeightList,
			v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: []string{name}}, Weight: weights[name]})
	}
	return p
}
