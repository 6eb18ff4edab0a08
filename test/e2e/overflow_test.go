package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// inferenceYAML is a Deployment of 2-CPU replicas whose Karmada policy
// fills member-1 (the group idc) first and overflows to member-2 (the
// tier cloud), by the room the agents report.
func inferenceYAML(replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: inference, namespace: overflow}
spec:
  replicas: %d
  selector: {matchLabels: {app: inference}}
  template:
    metadata: {labels: {app: inference}}
    spec:
      containers:
        - name: server
          image: busybox:1.37
          resources: {requests: {cpu: "2"}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: inference, namespace: overflow}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: inference}]
  placement:
    clusterAffinities:
      - affinityName: idc
        clusterNames: [member-1]
        overflowAffinities:
          - affinityName: cloud
            clusterNames: [member-2]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: AvailableReplicas}
`, replicas)
}

// TestOverflowTiers follows Karmada's overflow scenarios on real member
// clusters: each has 3 nodes of 8 CPU, and member-1 is 18 CPU full with
// pods Flotilla does not manage, so it has room for 3 replicas of 2 CPU.
// 7 replicas fill member-1 and overflow 4 to member-2; scaling down to 5
// takes replicas from member-2 only; down to 2 empties member-2 and
// shrinks member-1. The binding records the group idc throughout.
func TestOverflowTiers(t *testing.T) {
	f := startFleet(t, 2)
	f.filler("member-1", "overflow", 3, "6")
	f.waitAllocated("member-1", "18")

	f.apply("inference.yaml", inferenceYAML(7))
	f.waitOverflowPlacement(map[string]int32{"member-1": 3, "member-2": 4})
	cond := meta.FindStatusCondition(f.binding("overflow", "inference-deployment").Status.Conditions, v1alpha1.BindingConditionScheduled)
	if want := "placed on {member-2:4, member-1:3}; idc full, overflow to cloud: 4"; cond.Message != want {
		t.Errorf("Scheduled: %q, want %q", cond.Message, want)
	}

	// The next schedule counts member-1's room from its report: wait
	// until that shows the 3 replicas placed there (18 + 6 CPU).
	f.waitAllocated("member-1", "24")

	t.Run("scale-down takes from the overflow tier first", func(t *testing.T) {
		f.apply("inference.yaml", inferenceYAML(5))
		f.waitOverflowPlacement(map[string]int32{"member-1": 3, "member-2": 2})
	})

	t.Run("scale-down below the primary tier's room leaves the overflow tier", func(t *testing.T) {
		f.apply("inference.yaml", inferenceYAML(2))
		f.waitOverflowPlacement(map[string]int32{"member-1": 2})
		waitFor(t, 60*time.Second, "the Deployment gone from member-2", func() (bool, string) {
			d := f.deployment("member-2", "overflow", "inference")
			return d == nil, deploymentState(d)
		})
	})
}

// waitOverflowPlacement waits for the inference binding to be scheduled
// with the group idc on want, and for the Deployments to run so.
func (f *fleet) waitOverflowPlacement(want map[string]int32) {
	f.t.Helper()
	var b *v1alpha1.ResourceBinding
	waitFor(f.t, 30*time.Second, fmt.Sprintf("binding scheduled on %v", want), func() (bool, string) {
		b = f.binding("overflow", "inference-deployment")
		if b == nil {
			return false, "no binding yet"
		}
		cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled)
		done := cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == b.Generation &&
			cmp.Equal(targetsOf(want), b.Spec.Clusters)
		return done, fmt.Sprintf("clusters %v, condition %+v", b.Spec.Clusters, cond)
	})
	if b.Status.SchedulerObservedAffinityName != "idc" {
		f.t.Errorf("schedulerObservedAffinityName %q, want idc", b.Status.SchedulerObservedAffinityName)
	}
	f.waitDeploymentsOf("overflow", "inference", want, "")
}

// waitAllocated waits until the hub's scheduler sees at least cpu
// allocated in cluster: the report is in the API and stored.
func (f *fleet) waitAllocated(cluster, cpu string) {
	f.t.Helper()
	waitFor(f.t, 30*time.Second, fmt.Sprintf("%s's report counting %s CPU allocated, stored", cluster, cpu), func() (bool, string) {
		summary := f.hub.cluster(f.t, cluster).Status.ResourceSummary
		if summary == nil {
			return false, "no resource summary reported yet"
		}
		allocated := summary.Allocated[corev1.ResourceCPU]
		unstored := f.stats().UnstoredClusters
		return allocated.Cmp(resource.MustParse(cpu)) >= 0 && unstored == 0, fmt.Sprintf("allocated cpu %s, %d clusters unstored", allocated.String(), unstored)
	})
}
