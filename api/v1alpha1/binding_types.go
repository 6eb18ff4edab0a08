package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// ResourceBinding ties one namespaced template to the clusters it runs on.
// The detector creates it (name: template name and lower-case kind), the
// scheduler fills spec.clusters, the binding controller renders Works.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=resourcebindings,scope=Namespaced,shortName=rb,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`,description="Status of the Scheduled condition"
// +kubebuilder:printcolumn:name="FullyApplied",type=string,JSONPath=`.status.conditions[?(@.type=="FullyApplied")].status`,description="Status of the FullyApplied condition"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resource.kind`,priority=1,description="Kind of the template"
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.spec.resource.name`,priority=1,description="Name of the template"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`,priority=1
type ResourceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceBindingSpec   `json:"spec"`
	Status ResourceBindingStatus `json:"status,omitempty"`
}

// ClusterResourceBinding is the binding of a cluster-scoped template
// (namespaced templates get a ResourceBinding, whichever policy matched).
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterresourcebindings,scope=Cluster,shortName=crb,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`,description="Status of the Scheduled condition"
// +kubebuilder:printcolumn:name="FullyApplied",type=string,JSONPath=`.status.conditions[?(@.type=="FullyApplied")].status`,description="Status of the FullyApplied condition"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resource.kind`,priority=1,description="Kind of the template"
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.spec.resource.name`,priority=1,description="Name of the template"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`,priority=1
type ClusterResourceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceBindingSpec   `json:"spec"`
	Status ResourceBindingStatus `json:"status,omitempty"`
}

// ResourceBindingSpec is the desired placement of one template.
type ResourceBindingSpec struct {
	Resource ObjectReference `json:"resource"`
	// ReplicaRequirements is what one replica requests, for capacity.
	ReplicaRequirements *ReplicaRequirements `json:"replicaRequirements,omitempty"`
	// Replicas of the workload (0 for kinds without replicas).
	Replicas int32 `json:"replicas,omitempty"`
	// Placement is copied from the matched policy.
	Placement *Placement `json:"placement,omitempty"`
	// Failover is copied from the matched policy.
	Failover *FailoverBehavior `json:"failover,omitempty"`
	// Clusters is the scheduling result.
	Clusters              []TargetCluster        `json:"clusters,omitempty"`
	GracefulEvictionTasks []GracefulEvictionTask `json:"gracefulEvictionTasks,omitempty"`
	RescheduleTriggeredAt *metav1.Time           `json:"rescheduleTriggeredAt,omitempty"`
	ConflictResolution    string                 `json:"conflictResolution,omitempty"`
	SchedulerName         string                 `json:"schedulerName,omitempty"`
}

// ObjectReference names the template of a binding.
type ObjectReference struct {
	APIVersion      string    `json:"apiVersion"`
	Kind            string    `json:"kind"`
	Namespace       string    `json:"namespace,omitempty"`
	Name            string    `json:"name"`
	UID             types.UID `json:"uid,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
}

// ReplicaRequirements is what one replica of a workload requests.
type ReplicaRequirements struct {
	ResourceRequest corev1.ResourceList `json:"resourceRequest,omitempty"`
}

// TargetCluster is one cluster of a scheduling result.
type TargetCluster struct {
	Name     string `json:"name"`
	Replicas int32  `json:"replicas,omitempty"`
}

// GracefulEvictionTask keeps a workload on a cluster it is leaving until
// its replacement is healthy.
type GracefulEvictionTask struct {
	FromCluster        string       `json:"fromCluster"`
	PurgeMode          string       `json:"purgeMode,omitempty"`
	Replicas           *int32       `json:"replicas,omitempty"`
	Reason             string       `json:"reason"`
	Message            string       `json:"message,omitempty"`
	Producer           string       `json:"producer"`
	GracePeriodSeconds *int32       `json:"gracePeriodSeconds,omitempty"`
	SuppressDeletion   *bool        `json:"suppressDeletion,omitempty"`
	CreationTimestamp  *metav1.Time `json:"creationTimestamp,omitempty"`
	// PreservedLabelState is the workload's state in FromCluster, read by
	// the policy's statePreservation rules from its status there: label
	// name to value. The binding controller adds these labels to the copy
	// placed in the new cluster (see docs/failover.md).
	// +optional
	PreservedLabelState map[string]string `json:"preservedLabelState,omitempty"`
	// ClustersBeforeFailover are the clusters the workload ran in before
	// this eviction; a copy already in one of them gets no labels.
	// +optional
	ClustersBeforeFailover []string `json:"clustersBeforeFailover,omitempty"`
	// PreservedStateObservedAt is when the hub last heard from FromCluster's
	// agent at the time of the eviction: the preserved state is at least
	// that recent. Long before the eviction means the cluster was
	// unreachable and the state is the last status the hub held. Flotilla
	// only (Karmada reads state from reachable clusters only).
	// +optional
	PreservedStateObservedAt *metav1.Time `json:"preservedStateObservedAt,omitempty"`
}

// EvictingClusters names the clusters of the graceful eviction tasks: the
// binding is leaving them, so they are no scheduling candidates.
func (s *ResourceBindingSpec) EvictingClusters() []string {
	var out []string
	for _, task := range s.GracefulEvictionTasks {
		out = append(out, task.FromCluster)
	}
	return out
}

// ResourceBindingStatus is what the hub observed of a binding.
type ResourceBindingStatus struct {
	SchedulerObservedGeneration   int64        `json:"schedulerObservedGeneration,omitempty"`
	SchedulerObservedAffinityName string       `json:"schedulerObservedAffinityName,omitempty"`
	LastScheduledTime             *metav1.Time `json:"lastScheduledTime,omitempty"`
	// Conditions are Scheduled and FullyApplied, one of each at most.
	// +listType=map
	// +listMapKey=type
	Conditions       []metav1.Condition     `json:"conditions,omitempty"`
	AggregatedStatus []AggregatedStatusItem `json:"aggregatedStatus,omitempty"`
	// FailbackClusters are clusters the binding was evicted from while its
	// policy asks for failback: once one has been Ready for the
	// stabilization period, the binding gets a Fresh reschedule.
	FailbackClusters []FailbackCluster `json:"failbackClusters,omitempty"`
}

// FailbackCluster is a cluster a binding may return to.
type FailbackCluster struct {
	Name      string      `json:"name"`
	EvictedAt metav1.Time `json:"evictedAt"`
}

// AggregatedStatusItem is the workload's state in one cluster.
type AggregatedStatusItem struct {
	ClusterName string                `json:"clusterName"`
	Status      *runtime.RawExtension `json:"status,omitempty"`
	// StateValues are the values of the binding's statePreservation
	// JSONPath templates (failover.application and failover.cluster), by
	// template, as the cluster's agent read them on the workload's status
	// in the member cluster at its latest report (WorkSpec.StatePaths).
	// A template that did not evaluate there (a missing field) has no
	// value. Failover takes the preserved labels from them, and evaluates
	// the rules on Status for a template without one.
	// +optional
	StateValues    map[string]string `json:"stateValues,omitempty"`
	Applied        bool              `json:"applied,omitempty"`
	AppliedMessage string            `json:"appliedMessage,omitempty"`
	Health         string            `json:"health,omitempty"`
}

// Health of a workload or manifest in a member cluster.
const (
	HealthHealthy   = "Healthy"
	HealthUnhealthy = "Unhealthy"
	HealthUnknown   = "Unknown"
)

// Condition types and reasons on bindings.
const (
	BindingConditionScheduled    = "Scheduled"
	BindingConditionFullyApplied = "FullyApplied"

	ReasonScheduled            = "Success"
	ReasonUnschedulable        = "Unschedulable"
	ReasonNoClusterFit         = "NoClusterFit"
	ReasonFullyApplied         = "FullyAppliedSuccess"
	ReasonFullyAppliedFailed   = "FullyAppliedFailed"
	ReasonFullyAppliedProgress = "Applying"
)

// ResourceBindingList is a list of ResourceBindings.
//
// +kubebuilder:object:root=true
type ResourceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceBinding `json:"items"`
}

// ClusterResourceBindingList is a list of ClusterResourceBindings.
//
// +kubebuilder:object:root=true
type ClusterResourceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterResourceBinding `json:"items"`
}
