package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Cluster decodes and checks a Cluster: its name and labels, and what
// operators set in its spec. The status is the hub's and is not checked.
// Unknown fields are not refused: Clusters are written by the hub itself,
// and a hub of a newer version may know fields this one does not.
func Cluster(raw []byte) (*v1alpha1.Cluster, field.ErrorList) {
	c := &v1alpha1.Cluster{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, c); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath(""), "", err.Error())}
	}
	c.TypeMeta = v1alpha1.TypeMeta(v1alpha1.KindCluster)
	errs := objectMeta(&c.ObjectMeta, false)
	errs = append(errs, ClusterSpec(&c.Spec, field.NewPath("spec"))...)
	return c, errs
}

// ClusterSpec checks a Cluster's spec: its taints.
func ClusterSpec(spec *v1alpha1.ClusterSpec, path *field.Path) field.ErrorList {
	return Taints(spec.Taints, path.Child("taints"))
}

// Taints checks taints as Kubernetes checks a node's: the key is a
// qualified name, the value a label value and the effect one of
// NoSchedule, PreferNoSchedule and NoExecute, or Flotilla's PreferNoExecute.
func Taints(taints []corev1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range taints {
		errs = append(errs, taint(t.Key, t.Value, t.Effect, path.Index(i))...)
	}
	return errs
}

// taint checks one taint's key, value and effect.
func taint(key, value string, effect corev1.TaintEffect, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(key) {
		errs = append(errs, field.Invalid(p.Child("key"), key, msg))
	}
	for _, msg := range validation.IsValidLabelValue(value) {
		errs = append(errs, field.Invalid(p.Child("value"), value, msg))
	}
	if !sets.New(taintEffects...).Has(effect) {
		errs = append(errs, field.NotSupported(p.Child("effect"), effect, taintEffects))
	}
	return errs
}
