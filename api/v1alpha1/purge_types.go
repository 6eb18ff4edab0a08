package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PurgeRequest ends a binding's graceful eviction task from one cluster
// now, whatever its purge mode and grace period say (the way out of purge
// mode Never): the hub removes the task, so the evicted cluster's copy is
// deleted. It is an API object, not a binding edit, so RBAC can grant it
// alone (ClusterRole flotilla-operator does) and the audit log names who
// asked. Cluster-scoped.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=purgerequests,scope=Cluster,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Binding",type=string,JSONPath=`.spec.binding.name`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.binding.namespace`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Result",type=string,JSONPath=`.status.result`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PurgeRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which task to end.
	Spec PurgeRequestSpec `json:"spec"`
	// Status is the hub's answer.
	// +optional
	Status PurgeRequestStatus `json:"status,omitempty"`
}

// PurgeRequestSpec names a binding and the cluster whose eviction task ends.
type PurgeRequestSpec struct {
	// Binding is a ResourceBinding (namespace set) or a
	// ClusterResourceBinding (namespace empty).
	Binding BindingReference `json:"binding"`
	// Cluster is the cluster the binding is being evicted from.
	// +kubebuilder:validation:MinLength=1
	Cluster string `json:"cluster"`
	// TTLSecondsAfterFinished deletes the request this long after
	// status.finishTime; unset means 300.
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// BindingReference names a binding.
type BindingReference struct {
	// Namespace of a ResourceBinding; empty for a ClusterResourceBinding.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// PurgeRequestStatus is what the hub did.
type PurgeRequestStatus struct {
	// Result is Purged (the task ended; the old copy is being removed) or
	// Failed (see reason and message: no such binding, no task for the
	// cluster).
	// +optional
	Result string `json:"result,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// FinishTime is when the hub answered.
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`
}

// Results of a PurgeRequest.
const (
	PurgeResultPurged = "Purged"
	PurgeResultFailed = "Failed"
)

// PurgeRequestList is a list of PurgeRequests.
//
// +kubebuilder:object:root=true
type PurgeRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PurgeRequest `json:"items"`
}
