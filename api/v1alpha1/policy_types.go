package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PropagationPolicy says which resource templates of its namespace go to
// which member clusters. Field names are Karmada's, so a
// policy.karmada.io/v1alpha1 document is accepted as it is.
//
// +genclient
// +genclient:noStatus
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=propagationpolicies,scope=Namespaced,shortName=pp,categories=flotilla
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,description="Priority among policies matching the same template"
// +kubebuilder:printcolumn:name="Scheduling",type=string,JSONPath=`.spec.placement.replicaScheduling.replicaSchedulingType`,description="Replica scheduling type (empty: Duplicated)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PropagationSpec `json:"spec"`
}

// ClusterPropagationPolicy is a PropagationPolicy for templates of any
// namespace and for cluster-scoped templates. A PropagationPolicy that
// matches a namespaced template wins over any ClusterPropagationPolicy.
//
// +genclient
// +genclient:nonNamespaced
// +genclient:noStatus
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterpropagationpolicies,scope=Cluster,shortName=cpp,categories=flotilla
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,description="Priority among policies matching the same template"
// +kubebuilder:printcolumn:name="Scheduling",type=string,JSONPath=`.spec.placement.replicaScheduling.replicaSchedulingType`,description="Replica scheduling type (empty: Duplicated)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterPropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PropagationSpec `json:"spec"`
}

// PropagationSpec is the desired propagation of the selected templates.
type PropagationSpec struct {
	// ResourceSelectors select the templates; at least one is required.
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`
	// Priority decides between policies that match the same template:
	// higher wins; for equal priority the most specific selector wins
	// (name over labelSelector over kind only), then the name.
	Priority *int32 `json:"priority,omitempty"`

	Placement Placement         `json:"placement,omitempty"`
	Failover  *FailoverBehavior `json:"failover,omitempty"`

	// Accepted for compatibility with Karmada documents; not acted on yet.
	PropagateDeps               bool   `json:"propagateDeps,omitempty"`
	SchedulerName               string `json:"schedulerName,omitempty"`
	Preemption                  string `json:"preemption,omitempty"`
	ConflictResolution          string `json:"conflictResolution,omitempty"`
	ActivationPreference        string `json:"activationPreference,omitempty"`
	PreserveResourcesOnDeletion *bool  `json:"preserveResourcesOnDeletion,omitempty"`
	// DependentOverrides and Suspension are kept as written.
	DependentOverrides []string    `json:"dependentOverrides,omitempty"`
	Suspension         *Suspension `json:"suspension,omitempty"`
}

// Suspension pauses dispatching (Karmada compatibility; not acted on yet).
type Suspension struct {
	Dispatching *bool `json:"dispatching,omitempty"`
}

// ResourceSelector selects templates by apiVersion and kind, and optionally
// namespace, name or labels (name and labelSelector are exclusive in effect:
// a name selects one template whatever its labels).
type ResourceSelector struct {
	APIVersion    string                `json:"apiVersion"`
	Kind          string                `json:"kind"`
	Namespace     string                `json:"namespace,omitempty"`
	Name          string                `json:"name,omitempty"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// Placement says where selected templates may run and how replicas divide.
type Placement struct {
	ClusterAffinity *ClusterAffinity `json:"clusterAffinity,omitempty"`
	// ClusterAffinities are ordered fallback groups; exclusive with
	// ClusterAffinity.
	ClusterAffinities  []ClusterAffinityTerm      `json:"clusterAffinities,omitempty"`
	ClusterTolerations []corev1.Toleration        `json:"clusterTolerations,omitempty"`
	SpreadConstraints  []SpreadConstraint         `json:"spreadConstraints,omitempty"`
	ReplicaScheduling  *ReplicaSchedulingStrategy `json:"replicaScheduling,omitempty"`
}

// ClusterAffinity selects clusters by name, labels and fields; Exclude
// removes clusters whatever else matches.
type ClusterAffinity struct {
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	FieldSelector *FieldSelector        `json:"fieldSelector,omitempty"`
	ClusterNames  []string              `json:"clusterNames,omitempty"`
	Exclude       []string              `json:"exclude,omitempty"`
}

// ClusterAffinityTerm is one named fallback group of ClusterAffinities.
type ClusterAffinityTerm struct {
	AffinityName    string `json:"affinityName"`
	ClusterAffinity `json:",inline"`
	// OverflowAffinities are further tiers of this group, in order: the
	// scheduler fills the clusters of the inline ClusterAffinity (the
	// primary tier) first and places on a tier only the replicas the
	// tiers before it have no room for; a scale-down takes replicas from
	// the last tier used first. A cluster belongs to the first tier that
	// matches it. Only with Divided replica scheduling by dynamic weight
	// or Aggregated, and only with a non-empty inline ClusterAffinity.
	OverflowAffinities []OverflowClusterAffinity `json:"overflowAffinities,omitempty"`
}

// OverflowClusterAffinity is one overflow tier of a ClusterAffinityTerm.
type OverflowClusterAffinity struct {
	AffinityName    string `json:"affinityName"`
	ClusterAffinity `json:",inline"`
}

// FieldSelector matches cluster fields: provider, region and zone.
type FieldSelector struct {
	MatchExpressions []corev1.NodeSelectorRequirement `json:"matchExpressions,omitempty"`
}

// Cluster fields a FieldSelector can name.
const (
	FieldProvider = "provider"
	FieldRegion   = "region"
	FieldZone     = "zone"
)

// SpreadConstraint spreads replicas over groups of clusters.
type SpreadConstraint struct {
	// SpreadByField is cluster, region, zone or provider.
	SpreadByField string `json:"spreadByField,omitempty"`
	SpreadByLabel string `json:"spreadByLabel,omitempty"`
	MaxGroups     int    `json:"maxGroups,omitempty"`
	MinGroups     int    `json:"minGroups,omitempty"`
}

// Spread fields.
const (
	SpreadByFieldCluster  = "cluster"
	SpreadByFieldRegion   = "region"
	SpreadByFieldZone     = "zone"
	SpreadByFieldProvider = "provider"
)

// ReplicaSchedulingStrategy says how replicas are placed.
type ReplicaSchedulingStrategy struct {
	// ReplicaSchedulingType is Duplicated (default) or Divided.
	ReplicaSchedulingType string `json:"replicaSchedulingType,omitempty"`
	// ReplicaDivisionPreference is Aggregated or Weighted, for Divided.
	ReplicaDivisionPreference string              `json:"replicaDivisionPreference,omitempty"`
	WeightPreference          *ClusterPreferences `json:"weightPreference,omitempty"`
}

// Replica scheduling types and division preferences.
const (
	ReplicaSchedulingTypeDuplicated     = "Duplicated"
	ReplicaSchedulingTypeDivided        = "Divided"
	ReplicaDivisionPreferenceAggregated = "Aggregated"
	ReplicaDivisionPreferenceWeighted   = "Weighted"
	DynamicWeightByAvailableReplicas    = "AvailableReplicas"
)

// ClusterPreferences weigh clusters for Divided/Weighted.
type ClusterPreferences struct {
	StaticWeightList []StaticClusterWeight `json:"staticWeightList,omitempty"`
	// DynamicWeight is AvailableReplicas or empty.
	DynamicWeight string `json:"dynamicWeight,omitempty"`
}

// StaticClusterWeight gives the clusters its affinity matches a weight.
type StaticClusterWeight struct {
	TargetCluster ClusterAffinity `json:"targetCluster"`
	Weight        int64           `json:"weight"`
}

// FailoverBehavior says how the workload leaves a failed cluster.
type FailoverBehavior struct {
	Application *ApplicationFailoverBehavior `json:"application,omitempty"`
	Cluster     *ClusterFailoverBehavior     `json:"cluster,omitempty"`
}

// ApplicationStatePreservation is application failover's
// statePreservation; nil when f or its application part is nil.
func (f *FailoverBehavior) ApplicationStatePreservation() *StatePreservation {
	if f == nil || f.Application == nil {
		return nil
	}
	return f.Application.StatePreservation
}

// ClusterStatePreservation is cluster failover's statePreservation; nil
// when f or its cluster part is nil.
func (f *FailoverBehavior) ClusterStatePreservation() *StatePreservation {
	if f == nil || f.Cluster == nil {
		return nil
	}
	return f.Cluster.StatePreservation
}

// ApplicationFailoverBehavior evicts a workload that stays unhealthy.
type ApplicationFailoverBehavior struct {
	DecisionConditions DecisionConditions `json:"decisionConditions,omitempty"`
	PurgeMode          string             `json:"purgeMode,omitempty"`
	GracePeriodSeconds *int32             `json:"gracePeriodSeconds,omitempty"`
	StatePreservation  *StatePreservation `json:"statePreservation,omitempty"`
}

// DecisionConditions of application failover.
type DecisionConditions struct {
	TolerationSeconds *int32 `json:"tolerationSeconds,omitempty"`
}

// ClusterFailoverBehavior says how a workload leaves a failed cluster.
type ClusterFailoverBehavior struct {
	// PurgeMode is Gracefully (default: the old copy stays until the
	// replacement is healthy or the grace period ends), Directly (removed
	// at once) or Never (kept until someone acts).
	PurgeMode         string             `json:"purgeMode,omitempty"`
	StatePreservation *StatePreservation `json:"statePreservation,omitempty"`
	// Fencing (opt-in) stops the workload in a cluster whose agent is cut
	// off from the hub, so that it never runs in two places.
	Fencing *Fencing `json:"fencing,omitempty"`
	// Failback (opt-in) brings the workload back to a cluster it was
	// evicted from once that cluster is healthy again.
	Failback *Failback `json:"failback,omitempty"`
}

// Fencing scales the workload to zero in a cluster whose agent has been
// cut off from the hub for StopAfterSeconds; the hub restores it.
type Fencing struct {
	StopAfterSeconds int32 `json:"stopAfterSeconds"`
}

// MaxFencingStopAfterSeconds (30 days) bounds Fencing.StopAfterSeconds.
const MaxFencingStopAfterSeconds = 30 * 24 * 3600

// Failback gives the binding a Fresh reschedule once a cluster it was
// evicted from has been Ready for StabilizationSeconds.
type Failback struct {
	// StabilizationSeconds may be 0 (fail back as soon as the cluster is
	// Ready), so it may also be left out.
	// +optional
	StabilizationSeconds int32 `json:"stabilizationSeconds"`
}

// StatePreservation keeps part of a workload's state across a failover:
// at eviction each rule's JSONPath is read from the workload's status in
// the cluster it leaves, and the values become labels of its copy in the
// new cluster (purgeMode Directly, one target cluster), as in Karmada.
type StatePreservation struct {
	// Rules, at most MaxStatePreservationRules.
	Rules []StatePreservationRule `json:"rules"`
}

// MaxStatePreservationRules bounds StatePreservation.Rules.
const MaxStatePreservationRules = 16

// MaxStateJSONPathLength bounds StatePreservationRule.JSONPath, in bytes.
const MaxStateJSONPathLength = 1024

// StatePreservationRule names a label and the JSONPath it is taken from.
type StatePreservationRule struct {
	// AliasLabelName is the label key the value is injected under.
	AliasLabelName string `json:"aliasLabelName"`
	// JSONPath is a kubectl JSONPath template evaluated on the workload's
	// status (not the whole object): "{.updateRevision}", not
	// "{.status.updateRevision}". At most 1024 bytes.
	JSONPath string `json:"jsonPath"`
}

// Purge modes of graceful eviction.
const (
	PurgeModeGracefully = "Gracefully"
	PurgeModeDirectly   = "Directly"
	PurgeModeNever      = "Never"
	// Karmada's older names, accepted as written: Graciously is
	// Gracefully, Immediately is Directly.
	PurgeModeGraciously  = "Graciously"
	PurgeModeImmediately = "Immediately"
)

// NormalPurgeMode maps a policy's purge mode to Gracefully, Directly or
// Never; empty is Gracefully.
func NormalPurgeMode(mode string) string {
	switch mode {
	case "", PurgeModeGraciously:
		return PurgeModeGracefully
	case PurgeModeImmediately:
		return PurgeModeDirectly
	}
	return mode
}

// PropagationPolicyList is a list of PropagationPolicies.
//
// +kubebuilder:object:root=true
type PropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PropagationPolicy `json:"items"`
}

// ClusterPropagationPolicyList is a list of ClusterPropagationPolicies.
//
// +kubebuilder:object:root=true
type ClusterPropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPropagationPolicy `json:"items"`
}
