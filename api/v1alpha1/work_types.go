package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Work is what one member cluster must run for one binding: the rendered
// manifests, in the cluster's execution namespace (ExecutionNamespace). Its
// metadata.generation grows with every change of the manifests; the agent
// acknowledges the generation it applied.
//
// Deleting a Work sets its deletionTimestamp: it stays as a tombstone until
// the agent confirms the objects are gone from the member cluster.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=works,scope=Namespaced,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`,description="Status of the Applied condition"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=`.metadata.generation`,priority=1,description="Generation of the manifests"
// +kubebuilder:printcolumn:name="Acked",type=integer,JSONPath=`.status.observedGeneration`,priority=1,description="Generation the agent acknowledged"
type Work struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkSpec   `json:"spec"`
	Status WorkStatus `json:"status,omitempty"`
}

// WorkSpec holds the manifests and how the agent guards them.
type WorkSpec struct {
	Workload WorkloadTemplate `json:"workload"`
	// Fencing, from the binding's failover.cluster.fencing, tells the agent
	// to stop the workload if it is cut off from the hub that long.
	Fencing *WorkFencing `json:"fencing,omitempty"`
	// StatePaths are the JSONPath templates of the binding's
	// statePreservation rules, sorted and without duplicates: the agent
	// evaluates each on the status of the first manifest's object in the
	// member cluster and reports the values with its status
	// (ManifestStatus.StateValues), so that failover can preserve state
	// of any kind without the agent shipping whole statuses.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	StatePaths []string `json:"statePaths,omitempty"`
}

// WorkFencing is the fencing setting a Work carries to its agent.
type WorkFencing struct {
	// StopAfterSeconds: an agent that has had no acknowledged lease
	// renewal for this long scales the Work's workloads to zero (and
	// suspends its Jobs) until the hub sends the Work again.
	StopAfterSeconds int32 `json:"stopAfterSeconds"`
}

// WorkloadTemplate is the list of manifests of a Work.
type WorkloadTemplate struct {
	Manifests []Manifest `json:"manifests,omitempty"`
}

// Manifest is one Kubernetes object, as JSON. The API server keeps every
// field of it: it is not checked against any schema.
//
// +kubebuilder:validation:Type=object
// +kubebuilder:pruning:PreserveUnknownFields
type Manifest struct {
	runtime.RawExtension `json:",inline"`
}

// WorkStatus is what the agent reported about a Work.
type WorkStatus struct {
	// ObservedGeneration is the generation the agent last acknowledged.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Applied and Fenced, one of each at most.
	// +listType=map
	// +listMapKey=type
	Conditions       []metav1.Condition `json:"conditions,omitempty"`
	ManifestStatuses []ManifestStatus   `json:"manifestStatuses,omitempty"`
}

// ManifestStatus is the state of one applied manifest.
type ManifestStatus struct {
	Identifier ResourceIdentifier `json:"identifier"`
	// Status holds key status fields of the object (e.g. readyReplicas).
	Status *runtime.RawExtension `json:"status,omitempty"`
	// StateValues are the values of the Work's StatePaths on the
	// object's status, by template, as the agent read them; a template
	// that did not evaluate (a missing field) is absent.
	// +optional
	StateValues map[string]string `json:"stateValues,omitempty"`
	// Health is Healthy, Unhealthy or Unknown.
	Health string `json:"health,omitempty"`
	// Message says why, for anything but Healthy.
	Message string `json:"message,omitempty"`
}

// ResourceIdentifier names one manifest of a Work.
type ResourceIdentifier struct {
	// Ordinal is the manifest's index in the Work.
	Ordinal int `json:"ordinal"`
	// Group is empty for the core group.
	// +optional
	Group     string `json:"group"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Condition types of a Work.
const (
	WorkConditionApplied = "Applied"

	ReasonAppliedSuccessful = "AppliedSuccessful"
	ReasonAppliedFailed     = "AppliedFailed"
	ReasonAppliedPending    = "Pending"
	// ReasonRefusedByMemberPolicy: the member cluster's own policy (set
	// by its owner in the agent's values) refused a manifest; the agent
	// applied the others. The message names each refused manifest and the
	// rule.
	ReasonRefusedByMemberPolicy = "RefusedByMemberPolicy"

	// WorkConditionFenced is True once the agent reported (when it
	// reconnected) that it had stopped the Work's workloads while cut off,
	// and False again, reason Restored, once it applied the Work anew.
	WorkConditionFenced = "Fenced"

	ReasonFencedCutOff   = "StoppedWhileCutOff"
	ReasonFencedRestored = "Restored"
)

// WorkFinalizer is on every Work the hub creates: a deleted Work stays,
// with its deletionTimestamp set, until the agent confirms that the
// Work's objects are gone from the member cluster and the hub removes the
// finalizer (or until its Cluster is deleted: nobody is left to confirm).
const WorkFinalizer = "flotilla.io/agent-cleanup"

// AnnotationWorkBinding on a Work names the binding it renders:
// NAMESPACE/NAME, or NAME for a ClusterResourceBinding.
const AnnotationWorkBinding = "flotilla.io/binding"

// AnnotationWorkReplicas on a Work is the replicas its binding assigned
// the cluster when the Work was rendered. Status counts a Work as applied
// only when this matches the binding's current assignment, so a Work not
// yet updated after a reschedule is not taken for the new placement.
const AnnotationWorkReplicas = "flotilla.io/replicas"

// ExecutionNamespacePrefix starts the namespace that holds a cluster's Works.
const ExecutionNamespacePrefix = "flotilla-es-"

// ExecutionNamespace is the namespace of the Works of a cluster.
func ExecutionNamespace(cluster string) string { return ExecutionNamespacePrefix + cluster }

// WorkList is a list of Works.
//
// +kubebuilder:object:root=true
type WorkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Work `json:"items"`
}
