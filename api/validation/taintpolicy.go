package validation

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// ClusterTaintPolicy decodes and checks a ClusterTaintPolicy; the
// apiVersion is set to Flotilla's.
func ClusterTaintPolicy(raw []byte) (*v1alpha1.ClusterTaintPolicy, field.ErrorList) {
	p := &v1alpha1.ClusterTaintPolicy{}
	if errs := DecodeStrict(raw, p); len(errs) > 0 {
		return nil, errs
	}
	p.TypeMeta = v1alpha1.TypeMeta(v1alpha1.KindClusterTaintPolicy)
	errs := objectMeta(&p.ObjectMeta, false)
	errs = append(errs, ClusterTaintPolicySpec(&p.Spec, field.NewPath("spec"))...)
	return p, errs
}

// ClusterTaintPolicySpec checks a ClusterTaintPolicy's spec: its target
// clusters, its conditions (a condition type, In or NotIn, and at least
// one of True, False and Unknown) and its taints (at least one; valid
// keys, values and effects; no two with the same key and effect, Karmada's
// spelling of a key counting as Flotilla's; none the hub owns).
func ClusterTaintPolicySpec(spec *v1alpha1.ClusterTaintPolicySpec, path *field.Path) field.ErrorList {
	errs := clusterAffinity(spec.TargetClusters, path.Child("targetClusters"))
	for i := range spec.AddOnConditions {
		errs = append(errs, matchCondition(&spec.AddOnConditions[i], path.Child("addOnConditions").Index(i))...)
	}
	for i := range spec.RemoveOnConditions {
		errs = append(errs, matchCondition(&spec.RemoveOnConditions[i], path.Child("removeOnConditions").Index(i))...)
	}
	return append(errs, policyTaints(spec.Taints, path.Child("taints"))...)
}

var (
	matchOperators  = []v1alpha1.MatchConditionOperator{v1alpha1.MatchConditionOpIn, v1alpha1.MatchConditionOpNotIn}
	conditionValues = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
)

func matchCondition(c *v1alpha1.MatchCondition, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.ConditionType == "" {
		errs = append(errs, field.Required(path.Child("conditionType"), "a condition type of the Cluster's status, e.g. Ready"))
	} else {
		for _, msg := range validation.IsQualifiedName(c.ConditionType) {
			errs = append(errs, field.Invalid(path.Child("conditionType"), c.ConditionType, msg))
		}
	}
	if !slices.Contains(matchOperators, c.Operator) {
		errs = append(errs, field.NotSupported(path.Child("operator"), c.Operator, matchOperators))
	}
	if len(c.StatusValues) == 0 {
		errs = append(errs, field.Required(path.Child("statusValues"), "at least one of True, False and Unknown"))
	}
	for i, v := range c.StatusValues {
		if !slices.Contains(conditionValues, v) {
			errs = append(errs, field.NotSupported(path.Child("statusValues").Index(i), v, conditionValues))
		}
	}
	return errs
}

func policyTaints(taints []v1alpha1.PolicyTaint, path *field.Path) field.ErrorList {
	if len(taints) == 0 {
		return field.ErrorList{field.Required(path, "at least one taint")}
	}
	var errs field.ErrorList
	seen := map[corev1.Taint]int{}
	for i, t := range taints {
		p := path.Index(i)
		errs = append(errs, taint(t.Key, t.Value, t.Effect, p)...)
		if msg := hubOwnedTaint(t); msg != "" {
			errs = append(errs, field.Forbidden(p.Child("key"), msg))
		}
		id := corev1.Taint{Key: v1alpha1.NormalTaintKey(t.Key), Effect: t.Effect}
		if first, dup := seen[id]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("same key and effect (%s:%s) as %s", id.Key, id.Effect, path.Index(first))))
			continue
		}
		seen[id] = i
	}
	return errs
}

// hubOwnedTaint says why a policy may not set t, or "" if it may. The hub
// sets the not-ready and unreachable NoSchedule taints from Ready, and the
// terminating and unschedulable taints from deletion and cordon; a policy
// setting them would fight it. The not-ready and unreachable NoExecute
// taints are the policies' to set when the hub runs with
// --health-no-execute-taints=false (Karmada's behaviour since 1.14);
// otherwise the hub owns them and such a policy taint is not applied.
func hubOwnedTaint(t v1alpha1.PolicyTaint) string {
	key := v1alpha1.NormalTaintKey(t.Key)
	switch key {
	case v1alpha1.TaintClusterTerminating, v1alpha1.TaintClusterUnschedulable:
		return fmt.Sprintf("the hub sets %s itself (on deletion and cordon); use a key of your own, e.g. example.com/degraded", key)
	case v1alpha1.TaintClusterNotReady, v1alpha1.TaintClusterUnreachable:
		if t.Effect != corev1.TaintEffectNoExecute {
			return fmt.Sprintf("the hub sets %s:%s itself from the Ready condition; a policy may set only its NoExecute taint "+
				"(applied when the hub runs with --health-no-execute-taints=false), or use a key of your own", key, t.Effect)
		}
	}
	return ""
}
