package aggregate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// work is a Work rendered for replicas, at generation, of which the agent
// applied observed.
func work(replicas string, generation, observed int64, appliedStatus metav1.ConditionStatus, health, status string) *v1alpha1.Work {
	w := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Generation: generation, Annotations: map[string]string{v1alpha1.AnnotationWorkReplicas: replicas}}}
	w.Status.ObservedGeneration = observed
	if appliedStatus != "" {
		w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.WorkConditionApplied, Status: appliedStatus, Message: "boom"}}
	}
	if health != "" {
		ms := v1alpha1.ManifestStatus{Health: health}
		if status != "" {
			ms.Status = &runtime.RawExtension{Raw: []byte(status)}
		}
		w.Status.ManifestStatuses = []v1alpha1.ManifestStatus{ms}
	}
	return w
}

func reachable(string) bool { return true }

func TestItems(t *testing.T) {
	spec := &v1alpha1.ResourceBindingSpec{Clusters: []v1alpha1.TargetCluster{{Name: "member2", Replicas: 2}, {Name: "member1", Replicas: 1}, {Name: "member3", Replicas: 1}}}
	works := map[string]*v1alpha1.Work{
		"member1": work("1", 2, 2, metav1.ConditionTrue, v1alpha1.HealthHealthy, `{"readyReplicas":1,"replicas":1}`),
		"member2": work("2", 3, 2, metav1.ConditionTrue, v1alpha1.HealthUnhealthy, `{"readyReplicas":1,"replicas":2}`),
	}
	items := Items(spec, func(c string) *v1alpha1.Work { return works[c] }, reachable)
	type row struct {
		Cluster, Health, Message string
		Applied                  bool
	}
	var got []row
	for _, it := range items {
		got = append(got, row{it.ClusterName, it.Health, it.AppliedMessage, it.Applied})
	}
	want := []row{
		{"member1", v1alpha1.HealthHealthy, "", true},
		{"member2", v1alpha1.HealthUnhealthy, "agent applied generation 2, current is 3", false},
		{"member3", v1alpha1.HealthUnknown, "no Work yet", false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("aggregate (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"readyReplicas": int64(2), "replicas": int64(3)}, SummedStatus(items)); diff != "" {
		t.Errorf("summed (-want +got):\n%s", diff)
	}
	// An earlier generation applied and no Work yet: on their way, not
	// failed.
	cond := FullyApplied(items, 4)
	if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonFullyAppliedProgress || cond.Message != "waiting for [member2 member3]" {
		t.Errorf("FullyApplied = %s/%s %q", cond.Status, cond.Reason, cond.Message)
	}
	works["member2"] = work("2", 3, 3, metav1.ConditionTrue, v1alpha1.HealthHealthy, "")
	works["member3"] = work("1", 1, 1, metav1.ConditionTrue, v1alpha1.HealthHealthy, "")
	if cond := FullyApplied(Items(spec, func(c string) *v1alpha1.Work { return works[c] }, reachable), 4); cond.Status != metav1.ConditionTrue {
		t.Errorf("all applied: FullyApplied = %s %q", cond.Status, cond.Message)
	}
	works["member3"] = work("1", 1, 0, metav1.ConditionFalse, "", "")
	if cond := FullyApplied(Items(spec, func(c string) *v1alpha1.Work { return works[c] }, reachable), 4); cond.Reason != v1alpha1.ReasonFullyAppliedFailed || cond.Message != "[member3: boom]" {
		t.Errorf("failed apply: FullyApplied = %s %q", cond.Reason, cond.Message)
	}
	// A Work applied and healthy, but rendered for an earlier placement,
	// does not count for the current one.
	works["member3"] = work("4", 1, 1, metav1.ConditionTrue, v1alpha1.HealthHealthy, "")
	items = Items(spec, func(c string) *v1alpha1.Work { return works[c] }, reachable)
	if it := items[2]; it.Applied || it.AppliedMessage != "Work not yet rendered for 1 replicas (has 4)" {
		t.Errorf("stale Work: applied %v %q", it.Applied, it.AppliedMessage)
	}
	if cond := FullyApplied(items, 4); cond.Reason != v1alpha1.ReasonFullyAppliedProgress || cond.Message != "waiting for [member3]" {
		t.Errorf("stale Work: FullyApplied = %s %q, want it waiting for member3", cond.Reason, cond.Message)
	}
	// An unreachable cluster's health is Unknown, whatever was last said.
	items = Items(spec, func(c string) *v1alpha1.Work { return works[c] }, func(c string) bool { return c != "member2" })
	if it := items[1]; it.ClusterName != "member2" || it.Health != v1alpha1.HealthUnknown || !it.Applied {
		t.Errorf("unreachable member2: %+v", it)
	}
}

// The values the agent read for the statePreservation templates travel
// with the status, from an unreachable cluster too: failover reads them
// when the cluster is cut off.
func TestItemsCarryStateValues(t *testing.T) {
	spec := &v1alpha1.ResourceBindingSpec{Clusters: []v1alpha1.TargetCluster{{Name: "member1", Replicas: 1}}}
	w := work("1", 1, 1, metav1.ConditionTrue, v1alpha1.HealthHealthy, `{"replicas":1}`)
	w.Status.ManifestStatuses[0].StateValues = map[string]string{"{.jobStatus.jobId}": "a1b2"}
	items := Items(spec, func(string) *v1alpha1.Work { return w }, func(string) bool { return false })
	if diff := cmp.Diff(map[string]string{"{.jobStatus.jobId}": "a1b2"}, items[0].StateValues); diff != "" {
		t.Errorf("state values (-want +got):\n%s", diff)
	}
	items[0].StateValues["{.jobStatus.jobId}"] = "changed"
	if w.Status.ManifestStatuses[0].StateValues["{.jobStatus.jobId}"] != "a1b2" {
		t.Error("the item shares its map with the Work")
	}
}
