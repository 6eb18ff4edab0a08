package rebalancer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// fixture is the test binary's API server with a namespace for the
// test's bindings (Namespace: "web" of the original scenarios), and the
// controller on a fake clock. Times the API server stamps
// (creationTimestamp) are real; the fake clock starts at T0, the current
// second, so the controller's finish times are T0 and later.
type fixture struct {
	*controllertest.Fixture
	clk *clocktesting.FakeClock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{Fixture: controllertest.New(t)}
	f.clk = clocktesting.NewFakeClock(f.T0)
	return f
}

// start runs a controller with one worker, so keys are reconciled in the
// order they were queued, on informers of its own; beforeDelete, if not
// nil, is its test hook.
func (f *fixture) start(beforeDelete func()) {
	f.T.Helper()
	f.Start(nil, 1, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		c := New(clients, informers, f.Events, f.clk, controllertest.Logger(f.T))
		c.beforeDelete = beforeDelete
		c.waiting = f.RecordWake
		return c
	})
}

// binding creates the detector's binding of a template, last scheduled an
// hour before T0. Cluster-scoped templates get a ClusterResourceBinding.
func (f *fixture) binding(apiVersion, kind, namespace, name string, triggeredAt *metav1.Time) {
	f.T.Helper()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		f.T.Fatal(err)
	}
	meta := metav1.ObjectMeta{Name: names.BindingName(name, kind), Namespace: namespace,
		Annotations: map[string]string{names.AnnotationTemplate: names.TemplateKeyFor(schema.GroupKind{Group: gv.Group, Kind: kind}, namespace, name)}}
	spec := v1alpha1.ResourceBindingSpec{Resource: v1alpha1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name},
		RescheduleTriggeredAt: triggeredAt}
	f.CreateBinding(meta, spec, &v1alpha1.ResourceBindingStatus{LastScheduledTime: timePtr(f.T0.Add(-time.Hour))})
}

// apply creates a rebalancer from a YAML document, or replaces the spec of
// the one of that name, and returns it as stored. WEB in the document
// stands for the test's namespace.
func (f *fixture) apply(ctx context.Context, doc string) (*appsv1alpha1.WorkloadRebalancer, error) {
	var rb appsv1alpha1.WorkloadRebalancer
	if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(doc, "WEB", f.Namespace)), &rb); err != nil {
		return nil, err
	}
	api := f.Env.Flotilla.AppsV1alpha1().WorkloadRebalancers()
	var stored *appsv1alpha1.WorkloadRebalancer
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, rb.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			stored, err = api.Create(ctx, &rb, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cur.Spec = rb.Spec
		stored, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return stored, err
}

func (f *fixture) mustApply(doc string) *appsv1alpha1.WorkloadRebalancer {
	f.T.Helper()
	rb, err := f.apply(f.T.Context(), doc)
	if err != nil {
		f.T.Fatal(err)
	}
	return rb
}

func (f *fixture) get(name string) *appsv1alpha1.WorkloadRebalancer {
	f.T.Helper()
	rb, err := f.Env.Flotilla.AppsV1alpha1().WorkloadRebalancers().Get(f.T.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.T.Fatal(err)
	}
	return rb
}

// await polls the API until cond holds for the rebalancer, nil when it is
// gone.
func (f *fixture) await(name, what string, cond func(*appsv1alpha1.WorkloadRebalancer) bool) *appsv1alpha1.WorkloadRebalancer {
	f.T.Helper()
	var rb *appsv1alpha1.WorkloadRebalancer
	err := wait.PollUntilContextTimeout(f.T.Context(), 5*time.Millisecond, controllertest.WaitTimeout, true, func(context.Context) (bool, error) {
		rb = f.get(name)
		return cond(rb), nil
	})
	if err != nil {
		f.T.Fatalf("waiting for rebalancer %s: %s: %v; last seen %+v", name, what, err, rb)
	}
	return rb
}

func finished(generation int64) func(*appsv1alpha1.WorkloadRebalancer) bool {
	return func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		return rb != nil && rb.Generation == generation && rb.Finished()
	}
}

// awaitEvent waits until the last event is want.
func (f *fixture) awaitEvent(want string) {
	f.T.Helper()
	var last string
	err := wait.PollUntilContextTimeout(f.T.Context(), 5*time.Millisecond, controllertest.WaitTimeout, true, func(context.Context) (bool, error) {
		if e := f.Events.List(); len(e) > 0 {
			last = e[len(e)-1]
		}
		return last == want, nil
	})
	if err != nil {
		f.T.Errorf("last event %q, want %q", last, want)
	}
}

// stillWaiting checks, after a clock step, that the rebalancer is there
// and that the controller, looking at it again (a label edit makes it),
// still waits for deadline.
func (f *fixture) stillWaiting(name string, deadline time.Time, what string) {
	f.T.Helper()
	since := f.WakeCount()
	api := f.Env.Flotilla.AppsV1alpha1().WorkloadRebalancers()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rb := f.get(name)
		if rb == nil {
			f.T.Fatalf("rebalancer %s deleted: %s", name, what)
		}
		if rb.Labels == nil {
			rb.Labels = map[string]string{}
		}
		rb.Labels["poke"] = fmt.Sprint(since)
		_, err := api.Update(f.T.Context(), rb, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		f.T.Fatalf("rebalancer %s deleted: %s", name, what)
	}
	if err != nil {
		f.T.Fatal(err)
	}
	f.AwaitWake(since, name, deadline)
	if f.get(name) == nil {
		f.T.Fatalf("rebalancer %s deleted: %s", name, what)
	}
}

// stillThere checks for a while that the rebalancer is not deleted (for
// rebalancers the controller has no deadline for).
func (f *fixture) stillThere(name, what string) {
	f.T.Helper()
	err := wait.PollUntilContextTimeout(f.T.Context(), 10*time.Millisecond, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return f.get(name) == nil, nil
	})
	if err == nil {
		f.T.Fatalf("rebalancer %s deleted: %s", name, what)
	}
}

// awaitGone waits until the rebalancer is deleted.
func (f *fixture) awaitGone(name, what string) {
	f.T.Helper()
	err := controllertest.PollNudgingClock(f.T.Context(), f.clk, func(context.Context) bool { return f.get(name) == nil })
	if err != nil {
		f.T.Fatalf("waiting for rebalancer %s: %s: %v", name, what, err)
	}
}

func observed(apiVersion, kind, namespace, name string, result appsv1alpha1.RebalanceResult) appsv1alpha1.ObservedWorkload {
	o := appsv1alpha1.ObservedWorkload{Workload: appsv1alpha1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}, Result: result}
	if result == appsv1alpha1.RebalanceFailed {
		o.Reason = appsv1alpha1.RebalanceObjectNotFound
	}
	return o
}

func timePtr(t time.Time) *metav1.Time { mt := metav1.NewTime(t); return &mt }
