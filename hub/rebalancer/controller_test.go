package rebalancer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
)

// demo asks for six workloads: WEB is the test's namespace.
const demo = `apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: demo}
spec:
  workloads:
    - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: reader}
    - {apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: WEB}
    - {apiVersion: apps/v1, kind: Deployment, name: missing, namespace: WEB}
    - {apiVersion: example.com/v1, kind: Deployment, name: nginx, namespace: WEB}
    - {apiVersion: apps/v1, kind: Deployment, name: api, namespace: WEB}
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: WEB}
`

func TestTriggerAndNotFound(t *testing.T) {
	f := newFixture(t)
	web := f.Namespace
	// The rebalancer first, with no controller running: the triggers
	// already on api and batch are set relative to its creation time.
	created := f.mustApply(demo).CreationTimestamp.Time
	f.binding("apps/v1", "Deployment", web, "nginx", nil)
	f.binding("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader", timePtr(created.Add(-time.Minute)))
	f.binding("apps/v1", "Deployment", web, "api", timePtr(created))                  // already asked at this very time
	f.binding("apps/v1", "Deployment", web, "batch", timePtr(created.Add(time.Hour))) // and later
	f.start(nil)

	rb := f.await("demo", "finished", finished(1))
	want := appsv1alpha1.WorkloadRebalancerStatus{
		ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
			observed("apps/v1", "Deployment", web, "api", appsv1alpha1.RebalanceSuccessful),
			observed("apps/v1", "Deployment", web, "batch", appsv1alpha1.RebalanceSuccessful),
			observed("apps/v1", "Deployment", web, "missing", appsv1alpha1.RebalanceFailed),
			observed("apps/v1", "Deployment", web, "nginx", appsv1alpha1.RebalanceSuccessful),
			// The binding nginx-deployment is the apps group's template's.
			observed("example.com/v1", "Deployment", web, "nginx", appsv1alpha1.RebalanceFailed),
			observed("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader", appsv1alpha1.RebalanceSuccessful),
		},
		ObservedGeneration: 1,
		FinishTime:         timePtr(f.T0),
	}
	if diff := cmp.Diff(want, rb.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}

	for _, b := range []struct {
		namespace, name string
		wantAt          time.Time
		wantGeneration  int64
	}{
		{web, "nginx-deployment", created, 2},
		{"", "reader-clusterrole", created, 2},
		{web, "api-deployment", created, 1},                  // not written again
		{web, "batch-deployment", created.Add(time.Hour), 1}, // a later trigger is kept
	} {
		spec, generation := f.BindingSpec(b.namespace, b.name)
		if spec.RescheduleTriggeredAt == nil || !spec.RescheduleTriggeredAt.Time.Equal(b.wantAt) || generation != b.wantGeneration {
			t.Errorf("binding %s/%s: rescheduleTriggeredAt %v generation %d, want %v and %d", b.namespace, b.name,
				spec.RescheduleTriggeredAt, generation, b.wantAt, b.wantGeneration)
		}
	}

	wantEvents := []string{
		"Normal RescheduleTriggered WorkloadRebalancer demo: apps/v1 Deployment WEB/api: Fresh reschedule asked of binding WEB/api-deployment",
		"Normal RescheduleTriggered ResourceBinding api-deployment: Fresh reschedule asked by WorkloadRebalancer demo",
		"Normal RescheduleTriggered WorkloadRebalancer demo: apps/v1 Deployment WEB/batch: Fresh reschedule asked of binding WEB/batch-deployment",
		"Normal RescheduleTriggered ResourceBinding batch-deployment: Fresh reschedule asked by WorkloadRebalancer demo",
		"Warning ReferencedBindingNotFound WorkloadRebalancer demo: apps/v1 Deployment WEB/missing: no binding WEB/missing-deployment (no such template, or no policy propagates it)",
		"Normal RescheduleTriggered WorkloadRebalancer demo: apps/v1 Deployment WEB/nginx: Fresh reschedule asked of binding WEB/nginx-deployment",
		"Normal RescheduleTriggered ResourceBinding nginx-deployment: Fresh reschedule asked by WorkloadRebalancer demo",
		"Warning ReferencedBindingNotFound WorkloadRebalancer demo: example.com/v1 Deployment WEB/nginx: no binding WEB/nginx-deployment (no such template, or no policy propagates it)",
		"Normal RescheduleTriggered WorkloadRebalancer demo: rbac.authorization.k8s.io/v1 ClusterRole reader: Fresh reschedule asked of binding reader-clusterrole",
		"Normal RescheduleTriggered ClusterResourceBinding reader-clusterrole: Fresh reschedule asked by WorkloadRebalancer demo",
		"Normal Finished WorkloadRebalancer demo: 6 workloads: 4 successful, 2 failed",
	}
	for i, e := range wantEvents {
		wantEvents[i] = strings.ReplaceAll(e, "WEB", web)
	}
	f.AwaitEventsInAnyOrder(wantEvents...)
	// No TTL: never deleted.
	f.clk.Step(24 * time.Hour)
	f.stillThere("demo", "without ttlSecondsAfterFinished")
	if f.Woken("demo") {
		t.Error("a rebalancer without ttlSecondsAfterFinished waits for deletion")
	}
}

func TestRestartedControllerDoesNotTriggerAgain(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", f.Namespace, "nginx", nil)
	f.start(nil)
	f.mustApply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: once}
spec: {workloads: [{apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: WEB}]}`)
	before := f.await("once", "finished", finished(1))
	f.Stop()

	// Were the controller to trigger again, it would write the field back.
	bindings := f.Env.Flotilla.FlotillaV1alpha1().ResourceBindings(f.Namespace)
	b, err := bindings.Get(t.Context(), "nginx-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.RescheduleTriggeredAt = nil
	if _, err := bindings.Update(t.Context(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	events := len(f.Events.List())
	f.clk.Step(time.Minute)
	f.start(nil)
	// With one worker, "once" (listed at start) is reconciled before a
	// rebalancer created afterwards.
	f.mustApply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: probe}
spec: {workloads: [{apiVersion: v1, kind: ConfigMap, name: none, namespace: WEB}]}`)
	f.await("probe", "finished", finished(1))
	f.awaitEvent("Normal Finished WorkloadRebalancer probe: 1 workloads: 0 successful, 1 failed")

	if spec, _ := f.BindingSpec(f.Namespace, "nginx-deployment"); spec.RescheduleTriggeredAt != nil {
		t.Errorf("the restarted controller triggered again: rescheduleTriggeredAt %v", spec.RescheduleTriggeredAt)
	}
	if after := f.get("once"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the restarted controller rewrote the finished rebalancer: %+v", after.Status)
	}
	wantAfter := []string{
		fmt.Sprintf("Warning ReferencedBindingNotFound WorkloadRebalancer probe: v1 ConfigMap %[1]s/none: no binding %[1]s/none-configmap (no such template, or no policy propagates it)", f.Namespace),
		"Normal Finished WorkloadRebalancer probe: 1 workloads: 0 successful, 1 failed",
	}
	for _, e := range f.Events.List()[events:] {
		if !slices.Contains(wantAfter, e) {
			t.Errorf("event after the restart: %s", e)
		}
	}
}

func TestListEdits(t *testing.T) {
	f := newFixture(t)
	web, other := f.Namespace, f.Env.Namespace(t)
	for _, name := range []string{"nginx", "api", "batch"} {
		f.binding("apps/v1", "Deployment", web, name, nil)
	}
	f.start(nil)
	created := f.mustApply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: edits}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: WEB}
    - {apiVersion: apps/v1, kind: Deployment, name: missing, namespace: WEB}
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: WEB}`).CreationTimestamp.Time
	f.await("edits", "finished", finished(1))

	// Ten seconds later: nginx and missing removed, api added, batch kept.
	f.clk.Step(10 * time.Second)
	f.mustApply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: edits}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: WEB}
    - {apiVersion: apps/v1, kind: Deployment, name: api, namespace: WEB}`)
	rb := f.await("edits", "finished again", finished(2))
	want := appsv1alpha1.WorkloadRebalancerStatus{
		ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
			observed("apps/v1", "Deployment", web, "api", appsv1alpha1.RebalanceSuccessful),   // added: triggered
			observed("apps/v1", "Deployment", web, "batch", appsv1alpha1.RebalanceSuccessful), // kept
			observed("apps/v1", "Deployment", web, "nginx", appsv1alpha1.RebalanceSuccessful), // removed, but had succeeded
			// missing: removed and had failed, so it leaves the status.
		},
		ObservedGeneration: 2,
		FinishTime:         timePtr(f.T0.Add(10 * time.Second)), // an added workload moves it
	}
	if diff := cmp.Diff(want, rb.Status); diff != "" {
		t.Errorf("status after removing and adding (-want +got):\n%s", diff)
	}
	// The rebalancer's creation time is the trigger of every workload.
	for _, name := range []string{"nginx-deployment", "api-deployment", "batch-deployment"} {
		if spec, generation := f.BindingSpec(web, name); !spec.RescheduleTriggeredAt.Time.Equal(created) || generation != 2 {
			t.Errorf("%s: rescheduleTriggeredAt %v generation %d, want %v and 2 (one write)", name, spec.RescheduleTriggeredAt, generation, created)
		}
	}

	// A new order only: nothing triggered, the finish time stays.
	f.clk.Step(10 * time.Second)
	f.mustApply(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: edits}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: api, namespace: WEB}
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: WEB}`)
	rb = f.await("edits", "generation 3 observed", finished(3))
	want.ObservedGeneration = 3
	if diff := cmp.Diff(want, rb.Status); diff != "" {
		t.Errorf("status after a new order (-want +got):\n%s", diff)
	}

	// A changed workload is one removed (batch, successful: kept) and one
	// added (batch in namespace other: no binding).
	f.mustApply(fmt.Sprintf(`apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: edits}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: api, namespace: WEB}
    - {apiVersion: apps/v1, kind: Deployment, name: batch, namespace: %s}`, other))
	rb = f.await("edits", "generation 4 observed", finished(4))
	want = appsv1alpha1.WorkloadRebalancerStatus{
		ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
			observed("apps/v1", "Deployment", other, "batch", appsv1alpha1.RebalanceFailed),
			observed("apps/v1", "Deployment", web, "api", appsv1alpha1.RebalanceSuccessful),
			observed("apps/v1", "Deployment", web, "batch", appsv1alpha1.RebalanceSuccessful),
			observed("apps/v1", "Deployment", web, "nginx", appsv1alpha1.RebalanceSuccessful),
		},
		ObservedGeneration: 4,
		FinishTime:         timePtr(f.T0.Add(20 * time.Second)),
	}
	if other > web { // sorted by namespace
		want.ObservedWorkloads = append(want.ObservedWorkloads[1:], want.ObservedWorkloads[0])
	}
	if diff := cmp.Diff(want, rb.Status); diff != "" {
		t.Errorf("status after changing a workload (-want +got):\n%s", diff)
	}
}

func rebalancerWithTTL(name string, ttl int, workloads ...string) string {
	doc := fmt.Sprintf("apiVersion: apps.flotilla.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: %s}\nspec:\n  ttlSecondsAfterFinished: %d\n  workloads:\n", name, ttl)
	for _, w := range workloads {
		doc += "    - {apiVersion: apps/v1, kind: Deployment, name: " + w + ", namespace: WEB}\n"
	}
	return doc
}

func TestDeletedAfterTTL(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", f.Namespace, "nginx", nil)
	f.start(nil)

	f.mustApply(rebalancerWithTTL("ttl", 60, "nginx"))
	f.await("ttl", "finished", finished(1))
	deadline := f.T0.Add(60 * time.Second)
	f.AwaitWake(0, "ttl", deadline)
	f.clk.Step(59 * time.Second)
	f.stillWaiting("ttl", deadline, "a second before its TTL")
	f.clk.Step(time.Second)
	f.awaitGone("ttl", "deleted at finishTime+60s")
	f.awaitEvent("Normal Deleted WorkloadRebalancer ttl: deleted 60s after it finished (ttlSecondsAfterFinished)")

	// Zero: deleted as soon as it finishes.
	f.mustApply(rebalancerWithTTL("zero", 0, "nginx"))
	f.awaitGone("zero", "deleted at once")
}

func TestTTLFollowsEdits(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", f.Namespace, "nginx", nil)
	f.binding("apps/v1", "Deployment", f.Namespace, "api", nil)
	f.start(nil)

	t.Run("a workload added before the TTL defers the deletion", func(t *testing.T) {
		f.mustApply(rebalancerWithTTL("added", 60, "nginx"))
		f.await("added", "finished", finished(1))
		f.AwaitWake(0, "added", f.T0.Add(60*time.Second))
		f.clk.Step(50 * time.Second)
		since := f.WakeCount()
		f.mustApply(rebalancerWithTTL("added", 60, "nginx", "api"))
		rb := f.await("added", "finished again", finished(2))
		if !rb.Status.FinishTime.Time.Equal(f.T0.Add(50 * time.Second)) {
			t.Fatalf("finishTime %v, want the edit's %v", rb.Status.FinishTime, f.T0.Add(50*time.Second))
		}
		deadline := f.T0.Add(110 * time.Second)
		f.AwaitWake(since, "added", deadline)
		f.clk.Step(10 * time.Second) // the first deadline passes
		f.stillWaiting("added", deadline, "at the first deadline despite the edit")
		f.clk.Step(50 * time.Second)
		f.awaitGone("added", "deleted at the edit's finishTime+60s")
	})

	t.Run("the latest TTL counts", func(t *testing.T) {
		since := f.WakeCount()
		f.mustApply(rebalancerWithTTL("shortened", 3600, "nginx"))
		start := f.await("shortened", "finished", finished(1)).Status.FinishTime.Time
		f.AwaitWake(since, "shortened", start.Add(time.Hour))
		f.clk.Step(5 * time.Second)
		since = f.WakeCount()
		f.mustApply(rebalancerWithTTL("shortened", 10, "nginx"))
		rb := f.await("shortened", "generation 2 observed", finished(2))
		if !rb.Status.FinishTime.Time.Equal(start) {
			t.Errorf("finishTime %v moved, want %v: a TTL edit triggers nothing", rb.Status.FinishTime, start)
		}
		f.AwaitWake(since, "shortened", start.Add(10*time.Second))
		f.clk.Step(5 * time.Second)
		f.awaitGone("shortened", "deleted at finishTime+10s")
	})
}

func TestNotDeletedWhenEditedJustBefore(t *testing.T) {
	f := newFixture(t)
	f.binding("apps/v1", "Deployment", f.Namespace, "nginx", nil)
	f.binding("apps/v1", "Deployment", f.Namespace, "api", nil)
	var once sync.Once
	edited := make(chan struct{})
	f.start(func() {
		// Between the controller's final check and its delete, a user adds
		// a workload.
		once.Do(func() {
			if _, err := f.apply(context.Background(), rebalancerWithTTL("race", 30, "nginx", "api")); err != nil {
				t.Errorf("edit the rebalancer: %v", err)
			}
			close(edited)
		})
	})
	f.mustApply(rebalancerWithTTL("race", 30, "nginx"))
	f.await("race", "finished", finished(1))
	f.AwaitWake(0, "race", f.T0.Add(30*time.Second))
	since := f.WakeCount()
	f.clk.Step(30 * time.Second)
	select {
	case <-edited:
	case <-time.After(controllertest.WaitTimeout):
		t.Fatal("the controller never came to delete the rebalancer")
	}
	rb := f.await("race", "the edit acted on", finished(2))
	finish := rb.Status.FinishTime.Time
	if len(rb.Status.ObservedWorkloads) != 2 || finish.Before(f.T0.Add(30*time.Second)) {
		t.Fatalf("after the edit: %+v", rb.Status)
	}
	f.AwaitWake(since, "race", finish.Add(30*time.Second))
	f.clk.SetTime(finish.Add(30 * time.Second))
	f.awaitGone("race", "deleted 30s after the edit finished")
}
