package e2e

import (
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// batchYAML is a Deployment of 2-CPU replicas divided by the room the
// agents report (dynamicWeight: AvailableReplicas).
func batchYAML(replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: batch, namespace: capacity}
spec:
  replicas: %d
  selector: {matchLabels: {app: batch}}
  template:
    metadata: {labels: {app: batch}}
    spec:
      containers:
        - name: worker
          image: busybox:1.37
          resources: {requests: {cpu: "2"}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: batch, namespace: capacity}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: batch}]
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: AvailableReplicas}
`, replicas)
}

// TestDynamicDivisionByReportedCapacity divides replicas by the free CPU
// the agents report: each member cluster has 3 nodes of 8 CPU, and
// member-3 is 18 CPU full with pods Flotilla does not manage. Room for
// 2-CPU replicas is then 12, 12 and 3, so 9 replicas go 4:4:1 (Webster);
// 40 do not fit and the placement stays; 6 shrink by the current one.
func TestDynamicDivisionByReportedCapacity(t *testing.T) {
	f := startFleet(t, 3)
	f.filler("member-3", "capacity", 3, "6")
	// The hub's API shows reports at once, its scheduler once they are
	// stored (at most --store-flush-interval later): wait for both.
	waitFor(t, 30*time.Second, "member-3's report counting 18 CPU allocated, stored", func() (bool, string) {
		summary := f.hub.cluster(t, "member-3").Status.ResourceSummary
		if summary == nil {
			return false, "no resource summary reported yet"
		}
		allocated := summary.Allocated[corev1.ResourceCPU]
		unstored := f.stats().UnstoredClusters
		return allocated.Cmp(resource.MustParse("18")) >= 0 && unstored == 0, fmt.Sprintf("allocated cpu %s, %d clusters unstored", allocated.String(), unstored)
	})

	f.apply("batch.yaml", batchYAML(9))
	want := map[string]int32{"member-1": 4, "member-2": 4, "member-3": 1}
	f.waitDeploymentsOf("capacity", "batch", want, "")
	placed := f.binding("capacity", "batch-deployment").Spec.Clusters
	if diff := cmp.Diff(targetsOf(want), placed); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}

	t.Run("more replicas than room: Unschedulable, placement kept", func(t *testing.T) {
		f.apply("batch.yaml", batchYAML(40))
		var b *v1alpha1.ResourceBinding
		waitFor(t, 30*time.Second, "Scheduled=False Unschedulable", func() (bool, string) {
			b = f.binding("capacity", "batch-deployment")
			cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled)
			return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonUnschedulable &&
				cond.ObservedGeneration == b.Generation, fmt.Sprintf("%+v", cond)
		})
		if diff := cmp.Diff(placed, b.Spec.Clusters); diff != "" {
			t.Errorf("placement changed (-before +after):\n%s", diff)
		}
		t.Logf("condition: %s", meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled).Message)
		for cluster, replicas := range want {
			if d := f.deployment(cluster, "capacity", "batch"); d == nil || *d.Spec.Replicas != replicas {
				t.Errorf("%s: %s, want %d replicas as before", cluster, deploymentState(d), replicas)
			}
		}
	})

	t.Run("scale-down shrinks the current placement", func(t *testing.T) {
		f.apply("batch.yaml", batchYAML(6))
		var b *v1alpha1.ResourceBinding
		waitFor(t, 30*time.Second, "Scheduled=True for 6 replicas", func() (bool, string) {
			b = f.binding("capacity", "batch-deployment")
			cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled)
			return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == b.Generation, fmt.Sprintf("%+v", cond)
		})
		// Webster over the current 4:4:1. The 6th replica ties between
		// member-1 and member-2 (2 each so far); as in Karmada, it goes to
		// the higher name when the FNV-1a hash of the template's UID is odd.
		shrunk := map[string]int32{"member-1": 3, "member-2": 2, "member-3": 1}
		h := fnv.New32a()
		h.Write([]byte(b.Spec.Resource.UID))
		if b.Spec.Resource.UID != "" && h.Sum32()&1 == 1 {
			shrunk = map[string]int32{"member-1": 2, "member-2": 3, "member-3": 1}
		}
		if diff := cmp.Diff(targetsOf(shrunk), b.Spec.Clusters); diff != "" {
			t.Errorf("placement (-want +got):\n%s", diff)
		}
		f.waitDeploymentsOf("capacity", "batch", shrunk, "")
	})
}

// filler runs replicas pods of cpu each in a member cluster, outside
// Flotilla, to take room.
func (f *fleet) filler(cluster, namespace string, replicas int32, cpu string) {
	f.t.Helper()
	ctx := f.t.Context()
	client := f.clients[cluster]
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
	labels := map[string]string{"app": "filler"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "filler", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:filler",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}},
	}
	if _, err := client.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	waitFor(f.t, 30*time.Second, "filler available in "+cluster, func() (bool, string) {
		got := f.deployment(cluster, namespace, "filler")
		return available(got), deploymentState(got)
	})
}

// targetsOf is want as a binding's spec.clusters, sorted by name.
func targetsOf(want map[string]int32) []v1alpha1.TargetCluster {
	var out []v1alpha1.TargetCluster
	for _, name := range []string{"member-1", "member-2", "member-3"} {
		if n, ok := want[name]; ok {
			out = append(out, v1alpha1.TargetCluster{Name: name, Replicas: n})
		}
	}
	return out
}
