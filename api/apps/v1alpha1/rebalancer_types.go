package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadRebalancer asks for a Fresh reschedule of its workloads: the
// hub writes the rebalancer's creationTimestamp into
// spec.rescheduleTriggeredAt of each workload's binding, and the scheduler,
// seeing it later than the binding's status.lastScheduledTime, places the
// replicas from scratch instead of keeping the current placement. It is
// cluster-scoped.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=workloadrebalancers,scope=Cluster,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Finished",type=date,JSONPath=`.status.finishTime`,description="When every workload had a result"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkloadRebalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what to rebalance.
	Spec WorkloadRebalancerSpec `json:"spec"`
	// Status is the hub's: the result per workload.
	Status WorkloadRebalancerStatus `json:"status,omitempty"`
}

// WorkloadRebalancerSpec is the desired behaviour of a WorkloadRebalancer.
type WorkloadRebalancerSpec struct {
	// Workloads to reschedule; at least one, no duplicates.
	// +kubebuilder:validation:MinItems=1
	Workloads []ObjectReference `json:"workloads"`

	// TTLSecondsAfterFinished limits the lifetime of a finished
	// WorkloadRebalancer (every workload has a result): it is deleted this
	// long after status.finishTime. Unset: never deleted by the hub; zero:
	// deleted as soon as it finishes.
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ObjectReference names a workload: a resource template of the hub.
type ObjectReference struct {
	// APIVersion of the template, such as apps/v1.
	APIVersion string `json:"apiVersion"`
	// Kind of the template, such as Deployment.
	Kind string `json:"kind"`
	// Name of the template.
	Name string `json:"name"`
	// Namespace of the template; empty for a cluster-scoped one.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// WorkloadRebalancerStatus is what the hub did.
type WorkloadRebalancerStatus struct {
	// ObservedWorkloads holds the result per workload, sorted by apiVersion,
	// kind, namespace and name.
	// +optional
	ObservedWorkloads []ObservedWorkload `json:"observedWorkloads,omitempty"`

	// ObservedGeneration is the metadata.generation the status is about;
	// while it is lower, the hub has not acted on the latest spec.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// FinishTime is when every workload had a result.
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`
}

// ObservedWorkload is the result of one workload.
type ObservedWorkload struct {
	// Workload is the workload, as in the spec.
	Workload ObjectReference `json:"workload"`
	// Result is Successful or Failed; empty while the hub still retries.
	// +optional
	Result RebalanceResult `json:"result,omitempty"`
	// Reason says why it failed.
	// +optional
	Reason RebalanceFailedReason `json:"reason,omitempty"`
}

// RebalanceResult is the outcome for one workload.
type RebalanceResult string

// Results of a workload.
const (
	// RebalanceFailed: the reschedule could not be triggered.
	RebalanceFailed RebalanceResult = "Failed"
	// RebalanceSuccessful: the workload's binding asks for a Fresh
	// reschedule.
	RebalanceSuccessful RebalanceResult = "Successful"
)

// RebalanceFailedReason is a machine-readable reason of a failure.
type RebalanceFailedReason string

// Reasons of a failure.
const (
	// RebalanceObjectNotFound: the workload has no binding (no such
	// template, or no policy propagates it). The hub does not retry.
	RebalanceObjectNotFound RebalanceFailedReason = "ReferencedBindingNotFound"
)

// Finished reports whether the status is about the current generation and
// every workload of it has a result.
func (r *WorkloadRebalancer) Finished() bool {
	if r.Status.FinishTime == nil || r.Status.ObservedGeneration != r.Generation {
		return false
	}
	for _, w := range r.Status.ObservedWorkloads {
		if w.Result == "" {
			return false
		}
	}
	return true
}

// WorkloadRebalancerList is a list of WorkloadRebalancers.
//
// +kubebuilder:object:root=true
type WorkloadRebalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkloadRebalancer `json:"items"`
}
