// Package workload reads what scheduling needs from a workload template:
// its replicas and what one replica requests. The hub's detector and the
// offline "flotilla plan" use the same reading.
package workload

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// workloadKinds have replicas and a Pod template; the key is group/kind.
var workloadKinds = map[string]bool{
	"apps/Deployment":  true,
	"apps/StatefulSet": true,
	"apps/ReplicaSet":  true,
	"batch/Job":        true,
}

// Replicas reads a workload's replicas: spec.replicas (default 1), or
// spec.parallelism for a Job; 0 for kinds that are not workloads.
func Replicas(u *unstructured.Unstructured) int32 {
	gk := u.GroupVersionKind().GroupKind()
	if !workloadKinds[gk.Group+"/"+gk.Kind] {
		return 0
	}
	field := "replicas"
	if gk.Kind == "Job" {
		field = "parallelism"
	}
	n, found, err := unstructured.NestedInt64(u.Object, "spec", field)
	if err != nil || !found {
		return 1
	}
	return int32(n)
}

// Requirements reads what one replica requests: the sum over containers,
// or the largest init container if that is more (as the kube-scheduler
// counts). Nil for kinds that are not workloads or request nothing.
func Requirements(u *unstructured.Unstructured) *v1alpha1.ReplicaRequirements {
	gk := u.GroupVersionKind().GroupKind()
	if !workloadKinds[gk.Group+"/"+gk.Kind] {
		return nil
	}
	raw, found, err := unstructured.NestedMap(u.Object, "spec", "template", "spec")
	if err != nil || !found {
		return nil
	}
	var pod corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &pod); err != nil {
		return nil
	}
	total := corev1.ResourceList{}
	for _, c := range pod.Containers {
		addTo(total, requestsOf(c))
	}
	for _, c := range pod.InitContainers {
		for name, q := range requestsOf(c) {
			if cur, ok := total[name]; !ok || q.Cmp(cur) > 0 {
				total[name] = q
			}
		}
	}
	if len(total) == 0 {
		return nil
	}
	return &v1alpha1.ReplicaRequirements{ResourceRequest: total}
}

// requestsOf is a container's requests; limits stand in for requests that
// are not set, as the API server defaults them.
func requestsOf(c corev1.Container) corev1.ResourceList {
	out := c.Resources.Requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range c.Resources.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q
		}
	}
	return out
}

func addTo(total, add corev1.ResourceList) {
	for name, q := range add {
		cur := total[name]
		cur.Add(q)
		total[name] = cur
	}
}
