package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// requests builds a resource list from name/quantity pairs.
func requests(pairs ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		list[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return list
}

func container(reqs corev1.ResourceList) corev1.Container {
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: reqs}}
}

func sidecar(reqs corev1.ResourceList) corev1.Container {
	c := container(reqs)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func TestPodRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want map[string]string
	}{
		{
			name: "containers add up",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				container(requests("cpu", "100m", "memory", "64Mi")),
				container(requests("cpu", "200m", "memory", "64Mi")),
			}},
			want: map[string]string{"cpu": "300m", "memory": "128Mi"},
		},
		{
			name: "a larger init container wins per resource",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container(requests("cpu", "500m", "memory", "100Mi"))},
				Containers:     []corev1.Container{container(requests("cpu", "100m", "memory", "1Gi"))},
			},
			want: map[string]string{"cpu": "500m", "memory": "1Gi"},
		},
		{
			name: "sidecars run next to later init containers and the main containers",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					sidecar(requests("cpu", "100m")),
					container(requests("cpu", "300m")),
				},
				Containers: []corev1.Container{container(requests("cpu", "200m"))},
			},
			want: map[string]string{"cpu": "400m"},
		},
		{
			name: "overhead comes on top",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{container(requests("cpu", "100m"))},
				Overhead:   requests("cpu", "50m", "memory", "20Mi"),
			},
			want: map[string]string{"cpu": "150m", "memory": "20Mi"},
		},
		{
			name: "pod-level requests replace the containers' for what they name",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{container(requests("cpu", "100m", "memory", "10Mi"))},
				Resources:  &corev1.ResourceRequirements{Requests: requests("cpu", "1")},
			},
			want: map[string]string{"cpu": "1", "memory": "10Mi"},
		},
		{
			name: "extended resources count too",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(requests("nvidia.com/gpu", "2"))}},
			want: map[string]string{"nvidia.com/gpu": "2"},
		},
		{
			name: "no requests",
			spec: corev1.PodSpec{Containers: []corev1.Container{{}}},
			want: map[string]string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := quantityStrings(podRequests(&corev1.Pod{Spec: tc.spec}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodRequestsLeavesSpecAlone(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{sidecar(requests("cpu", "1.5")), container(requests("cpu", "2.5"))},
		Containers:     []corev1.Container{container(requests("cpu", "0.5"))},
	}}
	before := pod.DeepCopy()
	podRequests(pod)
	podRequests(pod)
	if !apiequality.Semantic.DeepEqual(before, pod) {
		t.Errorf("podRequests changed the pod: %+v, was %+v", pod.Spec, before.Spec)
	}
}

func TestSummarizeNodes(t *testing.T) {
	nodes := []corev1.Node{
		*testNode("a", true, "8", "32Gi", "110"),
		*testNode("b", false, "4", "16Gi", "110"),
		{}, // no conditions yet: not Ready, nothing allocatable
	}
	s := summarizeNodes(nodes)
	got := map[string]any{"total": s.total, "ready": s.ready, "allocatable": quantityStrings(s.allocatable)}
	want := map[string]any{"total": int32(3), "ready": int32(1),
		"allocatable": map[string]string{"cpu": "12", "memory": "48Gi", "pods": "220"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node summary (-want +got):\n%s", diff)
	}
}

func TestSummarizePods(t *testing.T) {
	pod := func(phase corev1.PodPhase, cpu string) corev1.Pod {
		return corev1.Pod{
			Spec:   corev1.PodSpec{Containers: []corev1.Container{container(requests("cpu", cpu))}},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want map[string]string
	}{
		{
			name: "no pods",
			want: map[string]string{"cpu": "0", "memory": "0", "pods": "0"},
		},
		{
			name: "terminal pods hold nothing",
			pods: []corev1.Pod{
				pod(corev1.PodRunning, "500m"),
				pod(corev1.PodPending, "250m"),
				pod(corev1.PodUnknown, "1"),
				pod(corev1.PodSucceeded, "4"),
				pod(corev1.PodFailed, "4"),
			},
			want: map[string]string{"cpu": "1750m", "memory": "0", "pods": "3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, quantityStrings(summarizePods(tc.pods))); diff != "" {
				t.Errorf("allocated (-want +got):\n%s", diff)
			}
		})
	}
}
