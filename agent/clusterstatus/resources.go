package clusterstatus

// What a node offers and a pod holds, as the capacity sums count them
// (capacity.go).

import (
	corev1 "k8s.io/api/core/v1"
)

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// podRequests is what the scheduler reserves for a pod: the larger of the
// running containers (including sidecars) and the peak of the init phase,
// where each init container runs next to the sidecars started before it.
// Pod-level requests replace the container sum for the resources they name;
// the runtime overhead comes on top.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	running := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addResources(running, c.Resources.Requests)
	}
	initPeak, sidecars := corev1.ResourceList{}, corev1.ResourceList{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addResources(sidecars, c.Resources.Requests)
			addResources(running, c.Resources.Requests)
			maxResources(initPeak, sidecars)
			continue
		}
		step := sidecars.DeepCopy()
		addResources(step, c.Resources.Requests)
		maxResources(initPeak, step)
	}
	maxResources(running, initPeak)
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			running[name] = q.DeepCopy()
		}
	}
	addResources(running, pod.Spec.Overhead)
	return running
}

// addResources adds every quantity of add to sum.
func addResources(sum, add corev1.ResourceList) {
	for name, q := range add {
		total := sum[name]
		total.Add(q)
		sum[name] = total
	}
}

// maxResources raises every quantity of dst to at least the one in other.
func maxResources(dst, other corev1.ResourceList) {
	for name, q := range other {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}

// quantityStrings converts a resource list to the wire form.
func quantityStrings(list corev1.ResourceList) map[string]string {
	if list == nil {
		return nil
	}
	out := make(map[string]string, len(list))
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}
