package v1alpha1

import (
	"encoding/json"

	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterTaintPolicy adds taints to clusters when their status conditions
// match, and removes them when other conditions match, as Karmada's
// policy.karmada.io ClusterTaintPolicy does (Karmada 1.14 and later).
// Policies are applied in the order they were created; for each one that
// targets the cluster, addOnConditions are evaluated before
// removeOnConditions. Deleting a policy leaves the taints it added.
// Cluster-scoped; only flotilla-admin may write it.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clustertaintpolicies,scope=Cluster,shortName=ctp,categories=flotilla
// +kubebuilder:printcolumn:name="Taints",type=string,JSONPath=`.spec.taints[*].key`,description="Taint keys (the table shows the first)"
// +kubebuilder:printcolumn:name="Effect",type=string,JSONPath=`.spec.taints[*].effect`,description="Taint effects (the table shows the first)"
// +kubebuilder:printcolumn:name="Add-On",type=string,JSONPath=`.spec.addOnConditions[*].conditionType`,description="Condition types that add the taints"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Remove-On",type=string,JSONPath=`.spec.removeOnConditions[*].conditionType`,priority=1,description="Condition types that remove the taints"
// +kubebuilder:printcolumn:name="Target-Clusters",type=string,JSONPath=`.spec.targetClusters.clusterNames`,priority=1,description="Clusters named by targetClusters (empty: see the selectors, or every cluster)"
type ClusterTaintPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which clusters get which taints when.
	Spec ClusterTaintPolicySpec `json:"spec"`
}

// ClusterTaintPolicySpec is a ClusterTaintPolicy's rule.
type ClusterTaintPolicySpec struct {
	// TargetClusters are the clusters the policy applies to; unset means
	// every cluster. A cluster that stops matching keeps its taints.
	// +optional
	TargetClusters *ClusterAffinity `json:"targetClusters,omitempty"`
	// AddOnConditions add the taints when all of them match (ANDed). An
	// empty list adds nothing.
	// +optional
	AddOnConditions []MatchCondition `json:"addOnConditions,omitempty"`
	// RemoveOnConditions remove the taints when all of them match
	// (ANDed). An empty list removes nothing.
	// +optional
	RemoveOnConditions []MatchCondition `json:"removeOnConditions,omitempty"`
	// Taints are added and removed by key and effect; a taint of the same
	// key and effect already on the cluster is left as it is.
	// +kubebuilder:validation:MinItems=1
	Taints []PolicyTaint `json:"taints"`
}

// MatchCondition matches one status condition of a cluster. A cluster
// without a condition of the type matches neither In nor NotIn.
type MatchCondition struct {
	// ConditionType is the type of a condition in the Cluster's status,
	// e.g. Ready, APIServerHealthy or NodesReady.
	// +kubebuilder:validation:MinLength=1
	ConditionType string `json:"conditionType"`
	// Operator is In (the condition's status is one of statusValues) or
	// NotIn (it is none of them).
	Operator MatchConditionOperator `json:"operator"`
	// StatusValues are condition statuses: True, False or Unknown.
	// +kubebuilder:validation:MinItems=1
	StatusValues []metav1.ConditionStatus `json:"statusValues"`
}

// MatchConditionOperator relates a condition's status to statusValues.
type MatchConditionOperator string

// Operators of a MatchCondition.
const (
	MatchConditionOpIn    MatchConditionOperator = "In"
	MatchConditionOpNotIn MatchConditionOperator = "NotIn"
)

// PolicyTaint is a taint a ClusterTaintPolicy adds or removes.
type PolicyTaint struct {
	// Key is the taint key, a qualified name. Karmada's
	// cluster.karmada.io/<name> keys are written as cluster.flotilla.io/<name>,
	// the taints Karmada's tolerations already tolerate.
	Key string `json:"key"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute.
	Effect corev1.TaintEffect `json:"effect"`
	// Value is the taint value, a label value.
	// +optional
	Value string `json:"value,omitempty"`
}

// ClusterTaintPolicyList is a list of ClusterTaintPolicies.
//
// +kubebuilder:object:root=true
type ClusterTaintPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterTaintPolicy `json:"items"`
}

// AnnotationTaintPolicies on a Cluster says which ClusterTaintPolicy added
// which of its taints: a JSON object from "key:Effect" to the policy's
// name, written with the taints.
const AnnotationTaintPolicies = "flotilla.io/taint-policies"

// TaintOwnerKey is a taint's identity, its key and effect, as
// AnnotationTaintPolicies writes it: "key:Effect".
func TaintOwnerKey(t corev1.Taint) string { return t.Key + ":" + string(t.Effect) }

// TaintOwners reads the cluster's AnnotationTaintPolicies, by
// TaintOwnerKey. Anything but a JSON object of strings reads as no owners
// (anyone who may update Clusters can write it).
func (c *Cluster) TaintOwners() map[string]string {
	out := map[string]string{}
	annotation := c.Annotations[AnnotationTaintPolicies]
	if annotation == "" {
		return out
	}
	if err := json.Unmarshal([]byte(annotation), &out); err != nil {
		return map[string]string{}
	}
	return out
}

// Taint key prefixes: Flotilla's, and Karmada's spelling of the same keys.
const (
	FlotillaTaintPrefix = "cluster.flotilla.io/"
	KarmadaTaintPrefix  = "cluster.karmada.io/"
)

// NormalTaintKey is the key a ClusterTaintPolicy's taint is written under:
// a cluster.karmada.io/<name> key becomes cluster.flotilla.io/<name>, so
// that a Karmada policy's taints are the ones Flotilla's default
// tolerations and Karmada's tolerations (which also tolerate
// cluster.flotilla.io/<name>) already cover. Other keys are unchanged.
func NormalTaintKey(key string) string {
	if name, ok := strings.CutPrefix(key, KarmadaTaintPrefix); ok {
		return FlotillaTaintPrefix + name
	}
	return key
}
