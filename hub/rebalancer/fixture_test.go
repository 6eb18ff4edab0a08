package rebalancer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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
	"github.com/flotilla-io/flotilla/hub/detector"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 10 * time.Second

// recorder keeps the events, as "Type Reason Kind Name: message".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Event(ref corev1.ObjectReference, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s: %s", eventType, reason, ref.Kind, ref.Name, message))
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// fixture is the test binary's API server with a namespace for the
// test's bindings, and the controller on a fake clock. Times the API
// server stamps (creationTimestamp) are real; the fake clock starts at the
// current second, so the controller's finish times are t0 and later.
type fixture struct {
	t      *testing.T
	env    *hubapi.Env
	ns     string // the test's namespace: "web" of the original scenarios
	t0     time.Time
	clk    *clocktesting.FakeClock
	events *recorder
	stop   func()

	mu sync.Mutex
	// wakes are the wake-ups the controller asked for, in order, as
	// name@deadline; changed is closed (and replaced) at each one.
	wakes   []string
	changed chan struct{}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t) // rebalancers and cluster bindings
	t0 := time.Now().Truncate(time.Second)
	f := &fixture{t: t, env: env, ns: env.Namespace(t), t0: t0, clk: clocktesting.NewFakeClock(t0), events: &recorder{}, changed: make(chan struct{})}
	// Registered after the namespace's: runs first, stopping the
	// controller before its objects go.
	t.Cleanup(func() {
		if f.stop != nil {
			f.stop()
		}
	})
	return f
}

// start runs a controller with one worker, so keys are reconciled in the
// order they were queued, on informers of its own; beforeDelete, if not
// nil, is its test hook.
func (f *fixture) start(beforeDelete func()) {
	f.t.Helper()
	clients, err := controller.NewClients(f.env.RESTConfig())
	if err != nil {
		f.t.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	c := New(clients, informers, f.events, f.clk, slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})))
	c.beforeDelete = beforeDelete
	c.waiting = func(name string, at time.Time) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.wakes = append(f.wakes, name+"@"+at.UTC().Format(time.RFC3339))
		close(f.changed)
		f.changed = make(chan struct{})
	}
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	done := make(chan struct{})
	go func() { c.Run(ctx, 1); close(done) }()
	f.stop = func() { cancel(); <-done; f.stop = nil }
}

// binding creates the detector's binding of a template, last scheduled an
// hour before t0. Cluster-scoped templates get a ClusterResourceBinding.
func (f *fixture) binding(apiVersion, kind, namespace, name string, triggeredAt *metav1.Time) {
	f.t.Helper()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		f.t.Fatal(err)
	}
	meta := metav1.ObjectMeta{Name: detector.BindingName(name, kind), Namespace: namespace,
		Annotations: map[string]string{detector.AnnotationTemplate: gv.Group + "/" + kind + "/" + namespace + "/" + name}}
	spec := v1alpha1.ResourceBindingSpec{Resource: v1alpha1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name},
		RescheduleTriggeredAt: triggeredAt}
	lastScheduled := metav1.NewTime(f.t0.Add(-time.Hour))
	ctx, fl := f.t.Context(), f.env.Flotilla.FlotillaV1alpha1()
	if namespace == "" {
		b, err := fl.ClusterResourceBindings().Create(ctx, &v1alpha1.ClusterResourceBinding{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{})
		if err == nil {
			b.Status.LastScheduledTime = &lastScheduled
			_, err = fl.ClusterResourceBindings().UpdateStatus(ctx, b, metav1.UpdateOptions{})
		}
		if err != nil {
			f.t.Fatal(err)
		}
		return
	}
	b, err := fl.ResourceBindings(namespace).Create(ctx, &v1alpha1.ResourceBinding{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{})
	if err == nil {
		b.Status.LastScheduledTime = &lastScheduled
		_, err = fl.ResourceBindings(namespace).UpdateStatus(ctx, b, metav1.UpdateOptions{})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// bindingSpec reads a binding's spec and generation.
func (f *fixture) bindingSpec(namespace, name string) (v1alpha1.ResourceBindingSpec, int64) {
	f.t.Helper()
	fl := f.env.Flotilla.FlotillaV1alpha1()
	if namespace == "" {
		b, err := fl.ClusterResourceBindings().Get(f.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		return b.Spec, b.Generation
	}
	b, err := fl.ResourceBindings(namespace).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return b.Spec, b.Generation
}

// apply creates a rebalancer from a YAML document, or replaces the spec of
// the one of that name, and returns it as stored. WEB in the document
// stands for the test's namespace.
func (f *fixture) apply(ctx context.Context, doc string) (*appsv1alpha1.WorkloadRebalancer, error) {
	var rb appsv1alpha1.WorkloadRebalancer
	if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(doc, "WEB", f.ns)), &rb); err != nil {
		return nil, err
	}
	api := f.env.Flotilla.AppsV1alpha1().WorkloadRebalancers()
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
	f.t.Helper()
	rb, err := f.apply(f.t.Context(), doc)
	if err != nil {
		f.t.Fatal(err)
	}
	return rb
}

func (f *fixture) get(name string) *appsv1alpha1.WorkloadRebalancer {
	f.t.Helper()
	rb, err := f.env.Flotilla.AppsV1alpha1().WorkloadRebalancers().Get(f.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return rb
}

// await polls the API until cond holds for the rebalancer, nil when it is
// gone.
func (f *fixture) await(name, what string, cond func(*appsv1alpha1.WorkloadRebalancer) bool) *appsv1alpha1.WorkloadRebalancer {
	f.t.Helper()
	var rb *appsv1alpha1.WorkloadRebalancer
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		rb = f.get(name)
		return cond(rb), nil
	})
	if err != nil {
		f.t.Fatalf("waiting for rebalancer %s: %s: %v; last seen %+v", name, what, err, rb)
	}
	return rb
}

func finished(generation int64) func(*appsv1alpha1.WorkloadRebalancer) bool {
	return func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		return rb != nil && rb.Generation == generation && rb.Finished()
	}
}

// awaitEvents waits until the events are want, in any order: the
// controller records them after its writes, which the test may see first.
func (f *fixture) awaitEvents(want []string) {
	f.t.Helper()
	want = slices.Sorted(slices.Values(want))
	var got []string
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		got = slices.Sorted(slices.Values(f.events.list()))
		return len(got) >= len(want), nil
	})
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		f.t.Errorf("events (-want +got):\n%s", diff)
	}
}

// awaitEvent waits until the last event is want.
func (f *fixture) awaitEvent(want string) {
	f.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		if e := f.events.list(); len(e) > 0 {
			last = e[len(e)-1]
		}
		return last == want, nil
	})
	if err != nil {
		f.t.Errorf("last event %q, want %q", last, want)
	}
}

// wakeCount is how many wake-ups the controller asked for so far.
func (f *fixture) wakeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.wakes)
}

// awaitWake waits until the controller, after its first since wake-ups,
// asked to be woken at at for the rebalancer name (with Queue.AddAfter).
func (f *fixture) awaitWake(since int, name string, at time.Time) {
	f.t.Helper()
	key := name + "@" + at.UTC().Format(time.RFC3339)
	timeout := time.After(waitTimeout)
	for {
		f.mu.Lock()
		ok, changed := slices.Contains(f.wakes[since:], key), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			f.t.Fatalf("timed out waiting for the controller to wait for %s", key)
		}
	}
}

// woken reports whether the controller asked for any wake-up of name.
func (f *fixture) woken(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.wakes, func(key string) bool { return strings.HasPrefix(key, name+"@") })
}

// stillWaiting checks, after a clock step, that the rebalancer is there
// and that the controller, looking at it again (a label edit makes it),
// still waits for deadline.
func (f *fixture) stillWaiting(name string, deadline time.Time, what string) {
	f.t.Helper()
	since := f.wakeCount()
	api := f.env.Flotilla.AppsV1alpha1().WorkloadRebalancers()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rb := f.get(name)
		if rb == nil {
			f.t.Fatalf("rebalancer %s deleted: %s", name, what)
		}
		if rb.Labels == nil {
			rb.Labels = map[string]string{}
		}
		rb.Labels["poke"] = fmt.Sprint(since)
		_, err := api.Update(f.t.Context(), rb, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		f.t.Fatalf("rebalancer %s deleted: %s", name, what)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.awaitWake(since, name, deadline)
	if f.get(name) == nil {
		f.t.Fatalf("rebalancer %s deleted: %s", name, what)
	}
}

// stillThere checks for a while that the rebalancer is not deleted (for
// rebalancers the controller has no deadline for).
func (f *fixture) stillThere(name, what string) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.t.Context(), 10*time.Millisecond, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return f.get(name) == nil, nil
	})
	if err == nil {
		f.t.Fatalf("rebalancer %s deleted: %s", name, what)
	}
}

// awaitGone waits until the rebalancer is deleted. The queue takes
// AddAfters on its own goroutine: a timer it sets just as the test steps
// the clock may start after the step, so the clock is nudged by a
// millisecond now and then while waiting.
func (f *fixture) awaitGone(name, what string) {
	f.t.Helper()
	polls := 0
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		if polls++; polls%10 == 0 {
			f.clk.Step(time.Millisecond)
		}
		return f.get(name) == nil, nil
	})
	if err != nil {
		f.t.Fatalf("waiting for rebalancer %s: %s: %v", name, what, err)
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
