package rebalancer

import (
	"context"
	"encoding/json"
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
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/detector"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/store"
)

// t0 is the fake clock's start: rebalancers created then have it as
// creationTimestamp (the store stamps with the same clock).
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

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

// fixture is a real embedded store with bindings, and the controller on a
// fake clock.
type fixture struct {
	t      *testing.T
	objs   *objects.Objects
	clk    *clocktesting.FakeClock
	events *recorder
	stop   func()

	mu sync.Mutex
	// wakes are the wake-ups the controller asked for: name@deadline.
	wakes map[string]bool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	s, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, objs: objects.New(s), clk: clk, events: &recorder{}, wakes: map[string]bool{}}
	t.Cleanup(func() {
		if f.stop != nil {
			f.stop()
		}
		s.Close()
	})
	return f
}

// start runs a controller with one worker, so keys are reconciled in the
// order they were queued; beforeDelete, if not nil, is its test hook.
func (f *fixture) start(beforeDelete func()) {
	f.t.Helper()
	c := New(f.objs, f.events, f.clk, slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})))
	c.beforeDelete = beforeDelete
	c.waiting = func(name string, at time.Time) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.wakes[name+"@"+at.UTC().Format(time.RFC3339)] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, 1); close(done) }()
	f.stop = func() { cancel(); <-done; f.stop = nil }
}

// binding stores the detector's binding of a template.
func (f *fixture) binding(apiVersion, kind, namespace, name string, triggeredAt *metav1.Time) {
	f.t.Helper()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		f.t.Fatal(err)
	}
	meta := metav1.ObjectMeta{Name: detector.BindingName(name, kind), Namespace: namespace, Generation: 1,
		Annotations: map[string]string{detector.AnnotationTemplate: gv.Group + "/" + kind + "/" + namespace + "/" + name}}
	spec := v1alpha1.ResourceBindingSpec{Resource: v1alpha1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name},
		RescheduleTriggeredAt: triggeredAt}
	lastScheduled := metav1.NewTime(t0.Add(-time.Hour))
	status := v1alpha1.ResourceBindingStatus{LastScheduledTime: &lastScheduled}
	if namespace == "" {
		_, err = f.objs.ClusterBindings.Create(f.t.Context(), &v1alpha1.ClusterResourceBinding{ObjectMeta: meta, Spec: spec, Status: status})
	} else {
		_, err = f.objs.Bindings.Create(f.t.Context(), &v1alpha1.ResourceBinding{ObjectMeta: meta, Spec: spec, Status: status})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// bindingSpec reads a binding's spec and generation.
func (f *fixture) bindingSpec(namespace, name string) (v1alpha1.ResourceBindingSpec, int64) {
	f.t.Helper()
	if namespace == "" {
		b, err := f.objs.ClusterBindings.Get(f.t.Context(), "", name)
		if err != nil {
			f.t.Fatal(err)
		}
		return b.Spec, b.Generation
	}
	b, err := f.objs.Bindings.Get(f.t.Context(), namespace, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return b.Spec, b.Generation
}

// apply applies a rebalancer document through the hub's apply.
func (f *fixture) apply(doc string) {
	f.t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.objs.Apply(context.Background(), []json.RawMessage{raw}, "", false); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) get(name string) *appsv1alpha1.WorkloadRebalancer {
	f.t.Helper()
	rb, err := f.objs.Rebalancers.Get(f.t.Context(), "", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return rb
}

// await waits (in real time) until cond holds for the rebalancer, nil
// when it is gone.
func (f *fixture) await(name, what string, cond func(*appsv1alpha1.WorkloadRebalancer) bool) *appsv1alpha1.WorkloadRebalancer {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rb := f.get(name)
		if cond(rb) {
			return rb
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for rebalancer %s: %s; last seen %+v", name, what, rb)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func finished(generation int64) func(*appsv1alpha1.WorkloadRebalancer) bool {
	return func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		return rb != nil && rb.Generation == generation && rb.Finished()
	}
}

// awaitWake waits until the controller asked to be woken at at for the
// rebalancer name (with Queue.AddAfter).
func (f *fixture) awaitWake(name string, at time.Time) {
	f.t.Helper()
	key := name + "@" + at.UTC().Format(time.RFC3339)
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		ok := f.wakes[key]
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for the controller to wait for %s", key)
		}
		time.Sleep(time.Millisecond)
	}
}

// woken reports whether the controller asked for any wake-up of name.
func (f *fixture) woken(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.wakes {
		if strings.HasPrefix(key, name+"@") {
			return true
		}
	}
	return false
}

// awaitGone waits until the rebalancer is deleted. The queue takes
// AddAfters on its own goroutine: a timer it sets just as the test steps
// the clock may start after the step, so the clock is nudged by a
// millisecond now and then while waiting.
func (f *fixture) awaitGone(name, what string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; f.get(name) != nil; i++ {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for rebalancer %s: %s", name, what)
		}
		time.Sleep(5 * time.Millisecond)
		if i%10 == 9 {
			f.clk.Step(time.Millisecond)
		}
	}
}

// stillThere checks a while after a step that the rebalancer was not
// deleted.
func (f *fixture) stillThere(name, what string) {
	f.t.Helper()
	time.Sleep(100 * time.Millisecond) // what a wrong wake-up would take to delete it
	if f.get(name) == nil {
		f.t.Fatalf("rebalancer %s deleted: %s", name, what)
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

const demo = `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: demo}
spec:
  workloads:
    - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: reader}
    - {apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: web}
    - {apiVersion: apps/v1, kind: Deployment, name: missing, namespace: web}
    - {apiVersion: example.com/v1, kind: Deployment, name: nginx, namespace: web}
    - {apiVersion: apps/v1, kind: Deployment, name: api, namespace: web}
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: web}
`

func TestTriggerAndNotFound(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", "web", "nginx", nil)
	f.binding("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader", timePtr(t0.Add(-time.Minute)))
	f.binding("apps/v1", "Deployment", "web", "api", timePtr(t0))                  // already asked at this very time
	f.binding("apps/v1", "Deployment", "web", "batch", timePtr(t0.Add(time.Hour))) // and later
	f.start(nil)
	f.apply(demo)

	rb := f.await("demo", "finished", finished(1))
	want := appsv1alpha1.WorkloadRebalancerStatus{
		ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
			observed("apps/v1", "Deployment", "web", "api", appsv1alpha1.RebalanceSuccessful),
			observed("apps/v1", "Deployment", "web", "batch", appsv1alpha1.RebalanceSuccessful),
			observed("apps/v1", "Deployment", "web", "missing", appsv1alpha1.RebalanceFailed),
			observed("apps/v1", "Deployment", "web", "nginx", appsv1alpha1.RebalanceSuccessful),
			// The binding nginx-deployment is the apps group's template's.
			observed("example.com/v1", "Deployment", "web", "nginx", appsv1alpha1.RebalanceFailed),
			observed("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader", appsv1alpha1.RebalanceSuccessful),
		},
		ObservedGeneration: 1,
		FinishTime:         timePtr(t0),
	}
	if diff := cmp.Diff(want, rb.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if !rb.CreationTimestamp.Time.Equal(t0) {
		t.Fatalf("creationTimestamp %v, want the fake clock's %v", rb.CreationTimestamp, t0)
	}

	for _, b := range []struct {
		namespace, name string
		wantAt          time.Time
		wantGeneration  int64
	}{
		{"web", "nginx-deployment", t0, 2},
		{"", "reader-clusterrole", t0, 2},
		{"web", "api-deployment", t0, 1},                  // not written again
		{"web", "batch-deployment", t0.Add(time.Hour), 1}, // a later trigger is kept
	} {
		spec, generation := f.bindingSpec(b.namespace, b.name)
		if spec.RescheduleTriggeredAt == nil || !spec.RescheduleTriggeredAt.Time.Equal(b.wantAt) || generation != b.wantGeneration {
			t.Errorf("binding %s/%s: rescheduleTriggeredAt %v generation %d, want %v and %d", b.namespace, b.name,
				spec.RescheduleTriggeredAt, generation, b.wantAt, b.wantGeneration)
		}
	}

	wantEvents := []string{
		"Normal RescheduleTriggered WorkloadRebalancer demo: apps/v1 Deployment web/api: Fresh reschedule asked of binding web/api-deployment",
		"Normal RescheduleTriggered ResourceBinding api-deployment: Fresh reschedule asked by WorkloadRebalancer demo",
		"Normal RescheduleTriggered WorkloadRebalancer demo: apps/v1 Deployment web/batch: Fresh reschedule asked of binding web/batch-deployment",
		"Normal RescheduleTriggered ResourceBinding batch-deployment: Fresh reschedule asked by WorkloadRebalancer demo",
		"Warning ReferencedBindingNotFound WorkloadRebalancer demo: apps/v1 Deployment web/missing: no binding web/missing-deployment (no such template, or no policy propagates it)",
		"Normal RescheduleTriggered WorkloadRebalancer demo: apps/v1 Deployment web/nginx: Fresh reschedule asked of binding web/nginx-deployment",
		"Normal RescheduleTriggered ResourceBinding nginx-deployment: Fresh reschedule asked by WorkloadRebalancer demo",
		"Warning ReferencedBindingNotFound WorkloadRebalancer demo: example.com/v1 Deployment web/nginx: no binding web/nginx-deployment (no such template, or no policy propagates it)",
		"Normal RescheduleTriggered WorkloadRebalancer demo: rbac.authorization.k8s.io/v1 ClusterRole reader: Fresh reschedule asked of binding reader-clusterrole",
		"Normal RescheduleTriggered ClusterResourceBinding reader-clusterrole: Fresh reschedule asked by WorkloadRebalancer demo",
		"Normal Finished WorkloadRebalancer demo: 6 workloads: 4 successful, 2 failed",
	}
	got := f.events.list()
	slices.Sort(wantEvents)
	slices.Sort(got)
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// No TTL: never deleted.
	f.clk.Step(24 * time.Hour)
	f.stillThere("demo", "without ttlSecondsAfterFinished")
	if f.woken("demo") {
		t.Error("a rebalancer without ttlSecondsAfterFinished waits for deletion")
	}
}

func TestRestartedControllerDoesNotTriggerAgain(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", "web", "nginx", nil)
	f.start(nil)
	f.apply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: once}
spec: {workloads: [{apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: web}]}`)
	before := f.await("once", "finished", finished(1))
	f.stop()

	// Were the controller to trigger again, it would write the field back.
	b, err := f.objs.Bindings.Get(t.Context(), "web", "nginx-deployment")
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.RescheduleTriggeredAt = nil
	if _, err := f.objs.Bindings.Update(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	events := len(f.events.list())
	f.clk.Step(time.Minute)
	f.start(nil)
	// With one worker, "once" (listed at start) is reconciled before a
	// rebalancer created afterwards.
	f.apply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: probe}
spec: {workloads: [{apiVersion: v1, kind: ConfigMap, name: none, namespace: web}]}`)
	f.await("probe", "finished", finished(1))

	if spec, _ := f.bindingSpec("web", "nginx-deployment"); spec.RescheduleTriggeredAt != nil {
		t.Errorf("the restarted controller triggered again: rescheduleTriggeredAt %v", spec.RescheduleTriggeredAt)
	}
	if after := f.get("once"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the restarted controller rewrote the finished rebalancer: %+v", after.Status)
	}
	for _, e := range f.events.list()[events:] {
		if !slices.Contains([]string{"Warning ReferencedBindingNotFound WorkloadRebalancer probe: v1 ConfigMap web/none: no binding web/none-configmap (no such template, or no policy propagates it)",
			"Normal Finished WorkloadRebalancer probe: 1 workloads: 0 successful, 1 failed"}, e) {
			t.Errorf("event after the restart: %s", e)
		}
	}
}

func TestListEdits(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"nginx", "api", "batch"} {
		f.binding("apps/v1", "Deployment", "web", name, nil)
	}
	f.start(nil)
	f.apply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: edits}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: web}
    - {apiVersion: apps/v1, kind: Deployment, name: missing, namespace: web}
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: web}`)
	f.await("edits", "finished", finished(1))

	// Ten seconds later: nginx and missing removed, api added, batch kept.
	f.clk.Step(10 * time.Second)
	f.apply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: edits}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: web}
    - {apiVersion: apps/v1, kind: Deployment, name: api, namespace: web}`)
	rb := f.await("edits", "finished again", finished(2))
	want := appsv1alpha1.WorkloadRebalancerStatus{
		ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
			observed("apps/v1", "Deployment", "web", "api", appsv1alpha1.RebalanceSuccessful),   // added: triggered
			observed("apps/v1", "Deployment", "web", "batch", appsv1alpha1.RebalanceSuccessful), // kept
			observed("apps/v1", "Deployment", "web", "nginx", appsv1alpha1.RebalanceSuccessful), // removed, but had succeeded
			// missing: removed and had failed, so it leaves the status.
		},
		ObservedGeneration: 2,
		FinishTime:         timePtr(t0.Add(10 * time.Second)), // an added workload moves it
	}
	if diff := cmp.Diff(want, rb.Status); diff != "" {
		t.Errorf("status after removing and adding (-want +got):\n%s", diff)
	}
	// The rebalancer's creation time is the trigger of every workload.
	for _, name := range []string{"nginx-deployment", "api-deployment", "batch-deployment"} {
		if spec, generation := f.bindingSpec("web", name); !spec.RescheduleTriggeredAt.Time.Equal(t0) || generation != 2 {
			t.Errorf("%s: rescheduleTriggeredAt %v generation %d, want %v and 2 (one write)", name, spec.RescheduleTriggeredAt, generation, t0)
		}
	}

	// A new order only: nothing triggered, the finish time stays.
	f.clk.Step(10 * time.Second)
	f.apply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: edits}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: api, namespace: web}
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: web}`)
	rb = f.await("edits", "generation 3 observed", finished(3))
	want.ObservedGeneration = 3
	if diff := cmp.Diff(want, rb.Status); diff != "" {
		t.Errorf("status after a new order (-want +got):\n%s", diff)
	}

	// A changed workload is one removed (batch, successful: kept) and one
	// added (api in namespace other: no binding).
	f.apply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: edits}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: api, namespace: web}
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: other}`)
	rb = f.await("edits", "generation 4 observed", finished(4))
	want = appsv1alpha1.WorkloadRebalancerStatus{
		ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
			observed("apps/v1", "Deployment", "other", "batch", appsv1alpha1.RebalanceFailed),
			observed("apps/v1", "Deployment", "web", "api", appsv1alpha1.RebalanceSuccessful),
			observed("apps/v1", "Deployment", "web", "batch", appsv1alpha1.RebalanceSuccessful),
			observed("apps/v1", "Deployment", "web", "nginx", appsv1alpha1.RebalanceSuccessful),
		},
		ObservedGeneration: 4,
		FinishTime:         timePtr(t0.Add(20 * time.Second)),
	}
	if diff := cmp.Diff(want, rb.Status); diff != "" {
		t.Errorf("status after changing a workload (-want +got):\n%s", diff)
	}
}

func rebalancerWithTTL(name string, ttl int, workloads ...string) string {
	doc := fmt.Sprintf("apiVersion: apps.flotilla.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: %s}\nspec:\n  ttlSecondsAfterFinished: %d\n  workloads:\n", name, ttl)
	for _, w := range workloads {
		doc += "    - {apiVersion: apps/v1, kind: Deployment, name: " + w + ", namespace: web}\n"
	}
	return doc
}

func TestDeletedAfterTTL(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", "web", "nginx", nil)
	f.start(nil)

	f.apply(rebalancerWithTTL("ttl", 60, "nginx"))
	f.await("ttl", "finished", finished(1))
	f.awaitWake("ttl", t0.Add(60*time.Second))
	f.clk.Step(59 * time.Second)
	f.stillThere("ttl", "a second before its TTL")
	f.clk.Step(time.Second)
	f.awaitGone("ttl", "deleted at finishTime+60s")
	if e := f.events.list(); e[len(e)-1] != "Normal Deleted WorkloadRebalancer ttl: deleted 60s after it finished (ttlSecondsAfterFinished)" {
		t.Errorf("last event %q", e[len(e)-1])
	}

	// Zero: deleted as soon as it finishes.
	f.apply(rebalancerWithTTL("zero", 0, "nginx"))
	f.awaitGone("zero", "deleted at once")
}

func TestTTLFollowsEdits(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", "web", "nginx", nil)
	f.binding("apps/v1", "Deployment", "web", "api", nil)
	f.start(nil)

	t.Run("a workload added before the TTL defers the deletion", func(t *testing.T) {
		f.apply(rebalancerWithTTL("added", 60, "nginx"))
		f.await("added", "finished", finished(1))
		f.awaitWake("added", t0.Add(60*time.Second))
		f.clk.Step(50 * time.Second)
		f.apply(rebalancerWithTTL("added", 60, "nginx", "api"))
		rb := f.await("added", "finished again", finished(2))
		if !rb.Status.FinishTime.Time.Equal(t0.Add(50 * time.Second)) {
			t.Fatalf("finishTime %v, want the edit's %v", rb.Status.FinishTime, t0.Add(50*time.Second))
		}
		f.awaitWake("added", t0.Add(110*time.Second))
		f.clk.Step(10 * time.Second) // the first deadline passes
		f.stillThere("added", "at the first deadline despite the edit")
		f.clk.Step(50 * time.Second)
		f.awaitGone("added", "deleted at the edit's finishTime+60s")
	})

	t.Run("the latest TTL counts", func(t *testing.T) {
		start := f.clk.Now()
		f.apply(rebalancerWithTTL("shortened", 3600, "nginx"))
		f.await("shortened", "finished", finished(1))
		f.awaitWake("shortened", start.Add(time.Hour))
		f.clk.Step(5 * time.Second)
		f.apply(rebalancerWithTTL("shortened", 10, "nginx"))
		rb := f.await("shortened", "generation 2 observed", finished(2))
		if !rb.Status.FinishTime.Time.Equal(start) {
			t.Errorf("finishTime %v moved, want %v: a TTL edit triggers nothing", rb.Status.FinishTime, start)
		}
		f.awaitWake("shortened", start.Add(10*time.Second))
		f.clk.Step(5 * time.Second)
		f.awaitGone("shortened", "deleted at finishTime+10s")
	})
}

func TestNotDeletedWhenEditedJustBefore(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", "web", "nginx", nil)
	f.binding("apps/v1", "Deployment", "web", "api", nil)
	var once sync.Once
	edited := make(chan struct{})
	f.start(func() {
		// Between the controller's final check and its delete, a user adds
		// a workload.
		once.Do(func() {
			f.apply(rebalancerWithTTL("race", 30, "nginx", "api"))
			close(edited)
		})
	})
	f.apply(rebalancerWithTTL("race", 30, "nginx"))
	f.await("race", "finished", finished(1))
	f.awaitWake("race", t0.Add(30*time.Second))
	f.clk.Step(30 * time.Second)
	select {
	case <-edited:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller never came to delete the rebalancer")
	}
	rb := f.await("race", "the edit acted on", finished(2))
	finish := rb.Status.FinishTime.Time
	if len(rb.Status.ObservedWorkloads) != 2 || finish.Before(t0.Add(30*time.Second)) {
		t.Fatalf("after the edit: %+v", rb.Status)
	}
	f.awaitWake("race", finish.Add(30*time.Second))
	f.clk.SetTime(finish.Add(30 * time.Second))
	f.awaitGone("race", "deleted 30s after the edit finished")
}
