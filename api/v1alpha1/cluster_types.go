package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cluster is a member cluster as the hub sees it. It is cluster-scoped and
// registered when the cluster's agent first connects.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusters,scope=Cluster,categories=flotilla
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Status of the Ready condition"
// +kubebuilder:printcolumn:name="Taints",type=string,JSONPath=`.spec.taints[*].key`,description="Taint keys (the table shows the first)"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`,description="Kubernetes version of the member cluster"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.spec.zone`,priority=1
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.spec.region`,priority=1
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`,priority=1
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterSpec   `json:"spec"`
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterSpec is what operators set on a cluster.
type ClusterSpec struct {
	Provider string `json:"provider,omitempty"`
	Region   string `json:"region,omitempty"`
	Zone     string `json:"zone,omitempty"`
	// Taints repel bindings that do not tolerate them. The hub manages the
	// cluster.flotilla.io/* health taints; operators may add their own.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Unschedulable is set by cordon; it adds the unschedulable taint.
	Unschedulable bool `json:"unschedulable,omitempty"`
}

// ClusterStatus is what the hub observed of a cluster.
type ClusterStatus struct {
	// Conditions are Ready, ClockSynced, APIServerHealthy, NodesReady and
	// ResourcesPlausible, one of each at most, all set by the hub.
	// +listType=map
	// +listMapKey=type
	Conditions        []metav1.Condition `json:"conditions,omitempty"`
	KubernetesVersion string             `json:"kubernetesVersion,omitempty"`
	NodeSummary       *NodeSummary       `json:"nodeSummary,omitempty"`
	ResourceSummary   *ResourceSummary   `json:"resourceSummary,omitempty"`
	Agent             *AgentStatus       `json:"agent,omitempty"`
	// APIEnablements are the group versions and resources the member
	// cluster serves, as its agent last reported them; empty means not
	// known yet (the scheduler then assumes every kind is served).
	APIEnablements []APIEnablement `json:"apiEnablements,omitempty"`
}

// APIEnablement is one group version a member cluster serves.
type APIEnablement struct {
	GroupVersion string        `json:"groupVersion"`
	Resources    []APIResource `json:"resources,omitempty"`
}

// APIResource is one resource of a group version: its plural name and kind.
type APIResource struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// NodeSummary counts the member cluster's nodes.
type NodeSummary struct {
	TotalNum int32 `json:"totalNum"`
	ReadyNum int32 `json:"readyNum"`
}

// ResourceSummary sums the member cluster's node allocatable resources and
// what its Pods request of them.
type ResourceSummary struct {
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	Allocated   corev1.ResourceList `json:"allocated,omitempty"`
}

// AgentStatus says which agent serves the cluster and where it is connected.
type AgentStatus struct {
	Version     string       `json:"version,omitempty"`
	ConnectedTo string       `json:"connectedTo,omitempty"`
	ConnectedAt *metav1.Time `json:"connectedAt,omitempty"`
	// Transport is how the agent's session reaches the hub: quic, or
	// websocket (the fallback over TCP where UDP is blocked).
	Transport string `json:"transport,omitempty"`
	// ClockSkew is the agent's clock minus the hub's, as last measured.
	ClockSkew string `json:"clockSkew,omitempty"`
}

// ClusterList is a list of clusters.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}

// Condition types and reasons on a Cluster.
const (
	// ClusterConditionReady is True when the agent renews the lease and its
	// API server is healthy, False when the API server is not, Unknown when
	// the lease expired.
	ClusterConditionReady = "Ready"
	// ClusterConditionClockSynced is False when the agent's clock is skewed
	// beyond the tolerated bound.
	ClusterConditionClockSynced = "ClockSynced"
	// ClusterConditionAPIServerHealthy is the health of the member's API
	// server as its agent last reported it, without Ready's thresholds.
	ClusterConditionAPIServerHealthy = "APIServerHealthy"
	// ClusterConditionNodesReady is False while fewer than all of the
	// member's nodes are Ready, as its agent last reported them.
	ClusterConditionNodesReady = "NodesReady"

	ReasonClusterReady          = "ClusterReady"
	ReasonClusterNotReady       = "ClusterNotReady"
	ReasonLeaseExpired          = "ClusterStatusUnknown"
	ReasonClusterNeverConnected = "ClusterNeverConnected"
	ReasonClockSynced           = "ClockSynced"
	ReasonClockSkewed           = "ClockSkewed"
	ReasonAPIServerHealthy      = "APIServerHealthy"
	ReasonAPIServerUnhealthy    = "APIServerUnhealthy"
	ReasonNodesReady            = "AllNodesReady"
	ReasonNodesNotReady         = "NodesNotReady"
)

// ClusterFinalizer holds a deleted Cluster until no binding is placed on it
// any more (nor has an eviction task from it) and the hub has deleted its
// lease and Works: deleting a Cluster makes its workloads leave through
// the failover path (the terminating taint) before it goes.
const ClusterFinalizer = "flotilla.io/cluster-cleanup"

// TaintEffectPreferNoExecute is a taint effect beyond Kubernetes' and
// Karmada's: for new placements it repels as NoSchedule does; a binding
// already on the cluster that does not tolerate it (or no longer) is
// evicted only when the scheduler can place it on a healthy cluster with
// room, and otherwise stays.
const TaintEffectPreferNoExecute corev1.TaintEffect = "PreferNoExecute"

// Taint keys the hub manages. Karmada's cluster.karmada.io/* keys map to these.
const (
	TaintClusterNotReady      = "cluster.flotilla.io/not-ready"
	TaintClusterUnreachable   = "cluster.flotilla.io/unreachable"
	TaintClusterTerminating   = "cluster.flotilla.io/terminating"
	TaintClusterUnschedulable = "cluster.flotilla.io/unschedulable"
)

// AnnotationEvictionAdmitted on a Cluster is when the hub admitted it to
// eviction (RFC 3339, to the nanosecond): its zone's rate let its failure
// through, and every workload that does not tolerate its NoExecute taints
// may leave it at once. The hub writes it so that the admission outlives a restart or a
// change of leader, and removes it once the cluster carries no NoExecute
// taint.
const AnnotationEvictionAdmitted = "flotilla.io/eviction-admitted"
