package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// clusterNames are the three member clusters a sample binding is placed on.
var clusterNames = []string{"member-1", "member-2", "member-3"}

// binding is a realistic ResourceBinding of a Deployment placed on three
// clusters, about 1.6 KB as JSON with its status (see bindingStatus).
func binding(ns, name string) *v1alpha1.ResourceBinding {
	b := &v1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{"propagationpolicy.flotilla.io/name": "nginx-spread", "app": "nginx"}},
		Spec: v1alpha1.ResourceBindingSpec{
			Resource: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name,
				UID: "6f1c0f52-3c1e-4d53-9a43-1b6f0c9d2e71", ResourceVersion: "123456"},
			ReplicaRequirements: &v1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}},
			Replicas:      6,
			SchedulerName: "default-scheduler",
		},
	}
	for _, c := range clusterNames {
		b.Spec.Clusters = append(b.Spec.Clusters, v1alpha1.TargetCluster{Name: c, Replicas: 2})
	}
	return b
}

// bindingStatus sets b's status: scheduled, applied and healthy on every
// cluster with its Deployment's status, the condition's message saying n
// so that each write changes something.
func bindingStatus(b *v1alpha1.ResourceBinding, n int) {
	now := metav1.Now()
	b.Status = v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 1, LastScheduledTime: &now,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScheduled, Message: "Binding has been scheduled successfully.", LastTransitionTime: now},
			{Type: v1alpha1.BindingConditionFullyApplied, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonFullyApplied, Message: fmt.Sprintf("All works have been successfully applied (%d)", n), LastTransitionTime: now},
		}}
	for _, c := range clusterNames {
		status := []byte(`{"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2,"observedGeneration":1}`)
		b.Status.AggregatedStatus = append(b.Status.AggregatedStatus, v1alpha1.AggregatedStatusItem{ClusterName: c,
			Status: &runtime.RawExtension{Raw: status}, Applied: true, Health: v1alpha1.HealthHealthy})
	}
}

// configMap is the reference built-in object, of the same size as a
// binding with its status.
func configMap(ns, name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "nginx"}},
		Data: map[string]string{}}
	for i := range 12 {
		cm.Data[fmt.Sprintf("key-%02d", i)] = fmt.Sprintf("%0100d", i)
	}
	return cm
}
