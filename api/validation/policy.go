// Package validation checks objects users hand the hub: resource templates,
// (Cluster)PropagationPolicies, WorkloadRebalancers, ClusterTaintPolicies
// and the taints of Clusters. Every problem is a field.Error with the path of the offending
// field, so the CLI can point at it; nothing here touches the store.
package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"
	sigsjson "sigs.k8s.io/json"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// KarmadaPolicyAPIVersion is accepted for policies as it is.
const KarmadaPolicyAPIVersion = "policy.karmada.io/v1alpha1"

// IsPolicyAPIVersion reports whether apiVersion names a policy group.
func IsPolicyAPIVersion(apiVersion string) bool {
	return apiVersion == v1alpha1.APIVersion || apiVersion == KarmadaPolicyAPIVersion
}

// DecodeStrict decodes JSON into v, reporting unknown and duplicate fields
// with their paths.
func DecodeStrict(raw []byte, v any) field.ErrorList {
	strict, err := sigsjson.UnmarshalStrict(raw, v)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), "", err.Error())}
	}
	var errs field.ErrorList
	for _, e := range strict {
		msg := e.Error()
		if path, ok := strings.CutPrefix(msg, `unknown field "`); ok {
			path = strings.TrimSuffix(path, `"`)
			errs = append(errs, field.Forbidden(fieldPath(path), "unknown field"))
			continue
		}
		errs = append(errs, field.Invalid(field.NewPath(""), "", msg))
	}
	return errs
}

func fieldPath(dotted string) *field.Path {
	parts := strings.Split(dotted, ".")
	return field.NewPath(parts[0], parts[1:]...)
}

// PropagationPolicy decodes and checks a namespaced policy; the apiVersion
// is set to Flotilla's.
func PropagationPolicy(raw []byte) (*v1alpha1.PropagationPolicy, field.ErrorList) {
	p := &v1alpha1.PropagationPolicy{}
	if errs := DecodeStrict(raw, p); len(errs) > 0 {
		return nil, errs
	}
	p.TypeMeta = v1alpha1.TypeMeta(v1alpha1.KindPropagationPolicy)
	errs := objectMeta(&p.ObjectMeta, true)
	errs = append(errs, PropagationSpec(&p.Spec, p.Namespace, field.NewPath("spec"))...)
	return p, errs
}

// ClusterPropagationPolicy decodes and checks a cluster-wide policy.
func ClusterPropagationPolicy(raw []byte) (*v1alpha1.ClusterPropagationPolicy, field.ErrorList) {
	p := &v1alpha1.ClusterPropagationPolicy{}
	if errs := DecodeStrict(raw, p); len(errs) > 0 {
		return nil, errs
	}
	p.TypeMeta = v1alpha1.TypeMeta(v1alpha1.KindClusterPropagationPolicy)
	errs := objectMeta(&p.ObjectMeta, false)
	errs = append(errs, PropagationSpec(&p.Spec, "", field.NewPath("spec"))...)
	return p, errs
}

func objectMeta(m *metav1.ObjectMeta, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("metadata")
	errs = append(errs, name(m.Name, path.Child("name"))...)
	switch {
	case namespaced && m.Namespace == "":
		errs = append(errs, field.Required(path.Child("namespace"), ""))
	case namespaced:
		for _, msg := range validation.IsDNS1123Label(m.Namespace) {
			errs = append(errs, field.Invalid(path.Child("namespace"), m.Namespace, msg))
		}
	case m.Namespace != "":
		errs = append(errs, field.Forbidden(path.Child("namespace"), "the kind is cluster-scoped"))
	}
	errs = append(errs, metav1validation.ValidateLabels(m.Labels, path.Child("labels"))...)
	return errs
}

func name(n string, path *field.Path) field.ErrorList {
	if n == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(n) {
		errs = append(errs, field.Invalid(path, n, msg))
	}
	return errs
}

// PropagationSpec checks a policy's spec; namespace is the policy's ("" for
// a ClusterPropagationPolicy).
func PropagationSpec(spec *v1alpha1.PropagationSpec, namespace string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.ResourceSelectors) == 0 {
		errs = append(errs, field.Required(path.Child("resourceSelectors"), "at least one selector"))
	}
	for i := range spec.ResourceSelectors {
		errs = append(errs, resourceSelector(&spec.ResourceSelectors[i], namespace, path.Child("resourceSelectors").Index(i))...)
	}
	errs = append(errs, Placement(&spec.Placement, path.Child("placement"))...)
	errs = append(errs, failover(spec.Failover, path.Child("failover"))...)
	return errs
}

func resourceSelector(s *v1alpha1.ResourceSelector, namespace string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.APIVersion == "" {
		errs = append(errs, field.Required(path.Child("apiVersion"), ""))
	}
	if s.Kind == "" {
		errs = append(errs, field.Required(path.Child("kind"), ""))
	}
	if namespace != "" && s.Namespace != "" && s.Namespace != namespace {
		errs = append(errs, field.Invalid(path.Child("namespace"), s.Namespace, "a PropagationPolicy selects templates of its own namespace "+namespace+" only"))
	}
	return append(errs, labelSelector(s.LabelSelector, path.Child("labelSelector"))...)
}

func labelSelector(s *metav1.LabelSelector, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, path)
}

// Placement checks affinity, tolerations, spread and replica scheduling.
func Placement(p *v1alpha1.Placement, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.ClusterAffinity != nil && len(p.ClusterAffinities) > 0 {
		errs = append(errs, field.Forbidden(path.Child("clusterAffinities"), "clusterAffinity and clusterAffinities are exclusive"))
	}
	errs = append(errs, clusterAffinity(p.ClusterAffinity, path.Child("clusterAffinity"))...)
	seen := sets.New[string]()
	overflow := overflowAllowed(p.ReplicaScheduling)
	for i := range p.ClusterAffinities {
		term, tp := &p.ClusterAffinities[i], path.Child("clusterAffinities").Index(i)
		switch {
		case term.AffinityName == "":
			errs = append(errs, field.Required(tp.Child("affinityName"), ""))
		case seen.Has(term.AffinityName):
			errs = append(errs, field.Duplicate(tp.Child("affinityName"), term.AffinityName))
		}
		seen.Insert(term.AffinityName)
		errs = append(errs, clusterAffinity(&term.ClusterAffinity, tp)...)
		errs = append(errs, overflowAffinities(term, overflow, tp)...)
	}
	for i := range p.ClusterTolerations {
		errs = append(errs, toleration(&p.ClusterTolerations[i], path.Child("clusterTolerations").Index(i))...)
	}
	for i := range p.SpreadConstraints {
		errs = append(errs, spreadConstraint(&p.SpreadConstraints[i], path.Child("spreadConstraints").Index(i))...)
	}
	return append(errs, replicaScheduling(p.ReplicaScheduling, path.Child("replicaScheduling"))...)
}

// overflowAllowed reports whether a placement with this replica
// scheduling may have overflow tiers: only a division by room (Divided by
// dynamic weight, or Aggregated) fills one tier before the next, so only
// it can overflow (as Karmada's webhook says).
func overflowAllowed(r *v1alpha1.ReplicaSchedulingStrategy) bool {
	if r == nil || r.ReplicaSchedulingType != v1alpha1.ReplicaSchedulingTypeDivided {
		return false
	}
	switch r.ReplicaDivisionPreference {
	case v1alpha1.ReplicaDivisionPreferenceAggregated:
		return true
	case "", v1alpha1.ReplicaDivisionPreferenceWeighted:
		return r.WeightPreference != nil && r.WeightPreference.DynamicWeight != ""
	}
	return false
}

// overflowAffinities checks a group's overflow tiers as Karmada's webhook
// does: only with a division by room (allowed) and a primary tier that
// selects something, each tier named (a label key, as Karmada wants) apart
// from the group and the other tiers. An empty list counts as set, as in
// Karmada.
func overflowAffinities(term *v1alpha1.ClusterAffinityTerm, allowed bool, path *field.Path) field.ErrorList {
	if term.OverflowAffinities == nil {
		return nil
	}
	var errs field.ErrorList
	op := path.Child("overflowAffinities")
	if !allowed {
		errs = append(errs, field.Forbidden(op, "overflow tiers need replicaScheduling Divided with weightPreference.dynamicWeight or replicaDivisionPreference Aggregated: "+
			"only a division by room fills one tier before the next"))
	}
	if emptyAffinity(&term.ClusterAffinity) {
		errs = append(errs, field.Forbidden(op, "overflow tiers need the group's own clusterNames, exclude, labelSelector or fieldSelector: it is the primary tier"))
	}
	names := sets.New(term.AffinityName)
	for i := range term.OverflowAffinities {
		o, ip := &term.OverflowAffinities[i], op.Index(i)
		switch {
		case o.AffinityName == "":
			errs = append(errs, field.Required(ip.Child("affinityName"), "each overflow tier needs a name"))
		case names.Has(o.AffinityName):
			errs = append(errs, field.Invalid(ip.Child("affinityName"), o.AffinityName,
				"already names the group or an earlier tier of it: each tier needs its own name"))
		default:
			for _, msg := range validation.IsQualifiedName(o.AffinityName) {
				errs = append(errs, field.Invalid(ip.Child("affinityName"), o.AffinityName, msg))
			}
		}
		names.Insert(o.AffinityName)
		errs = append(errs, clusterAffinity(&o.ClusterAffinity, ip)...)
	}
	return errs
}

// emptyAffinity reports whether a selects every cluster, constraining
// nothing.
func emptyAffinity(a *v1alpha1.ClusterAffinity) bool {
	return a.LabelSelector == nil && a.FieldSelector == nil && len(a.ClusterNames) == 0 && len(a.Exclude) == 0
}

func clusterAffinity(a *v1alpha1.ClusterAffinity, path *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	errs := labelSelector(a.LabelSelector, path.Child("labelSelector"))
	if a.FieldSelector != nil {
		for i, req := range a.FieldSelector.MatchExpressions {
			errs = append(errs, fieldRequirement(req, path.Child("fieldSelector", "matchExpressions").Index(i))...)
		}
	}
	return errs
}

var clusterFields = []string{v1alpha1.FieldProvider, v1alpha1.FieldRegion, v1alpha1.FieldZone}

func fieldRequirement(req corev1.NodeSelectorRequirement, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !sets.New(clusterFields...).Has(req.Key) {
		errs = append(errs, field.NotSupported(path.Child("key"), req.Key, clusterFields))
	}
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(path.Child("values"), "In and NotIn need values"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(path.Child("values"), "Exists and DoesNotExist take no values"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), req.Operator,
			[]corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist}))
	}
	return errs
}

var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute, v1alpha1.TaintEffectPreferNoExecute}

func toleration(t *corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(path.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(path.Child("operator"), t.Operator, "an empty key needs operator Exists"))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, "operator Exists takes no value"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	if t.Effect != "" && !sets.New(taintEffects...).Has(t.Effect) {
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect, taintEffects))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(path.Child("tolerationSeconds"), *t.TolerationSeconds, "only NoExecute tolerations take tolerationSeconds"))
	}
	return errs
}

var spreadFields = []string{v1alpha1.SpreadByFieldCluster, v1alpha1.SpreadByFieldRegion, v1alpha1.SpreadByFieldZone, v1alpha1.SpreadByFieldProvider}

func spreadConstraint(s *v1alpha1.SpreadConstraint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case s.SpreadByField != "" && s.SpreadByLabel != "":
		errs = append(errs, field.Forbidden(path.Child("spreadByLabel"), "spreadByField and spreadByLabel are exclusive"))
	case s.SpreadByField == "" && s.SpreadByLabel == "":
		errs = append(errs, field.Required(path.Child("spreadByField"), "spreadByField or spreadByLabel"))
	case s.SpreadByField != "" && !sets.New(spreadFields...).Has(s.SpreadByField):
		errs = append(errs, field.NotSupported(path.Child("spreadByField"), s.SpreadByField, spreadFields))
	}
	if s.MinGroups < 0 {
		errs = append(errs, field.Invalid(path.Child("minGroups"), s.MinGroups, "must not be negative"))
	}
	if s.MaxGroups < 0 || (s.MaxGroups > 0 && s.MaxGroups < s.MinGroups) {
		errs = append(errs, field.Invalid(path.Child("maxGroups"), s.MaxGroups, fmt.Sprintf("must not be negative or less than minGroups %d", s.MinGroups)))
	}
	return errs
}

func replicaScheduling(r *v1alpha1.ReplicaSchedulingStrategy, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	switch r.ReplicaSchedulingType {
	case "", v1alpha1.ReplicaSchedulingTypeDuplicated, v1alpha1.ReplicaSchedulingTypeDivided:
	default:
		errs = append(errs, field.NotSupported(path.Child("replicaSchedulingType"), r.ReplicaSchedulingType,
			[]string{v1alpha1.ReplicaSchedulingTypeDuplicated, v1alpha1.ReplicaSchedulingTypeDivided}))
	}
	switch r.ReplicaDivisionPreference {
	case "", v1alpha1.ReplicaDivisionPreferenceAggregated, v1alpha1.ReplicaDivisionPreferenceWeighted:
	default:
		errs = append(errs, field.NotSupported(path.Child("replicaDivisionPreference"), r.ReplicaDivisionPreference,
			[]string{v1alpha1.ReplicaDivisionPreferenceAggregated, v1alpha1.ReplicaDivisionPreferenceWeighted}))
	}
	if w := r.WeightPreference; w != nil {
		wp := path.Child("weightPreference")
		if w.DynamicWeight != "" && w.DynamicWeight != v1alpha1.DynamicWeightByAvailableReplicas {
			errs = append(errs, field.NotSupported(wp.Child("dynamicWeight"), w.DynamicWeight, []string{v1alpha1.DynamicWeightByAvailableReplicas}))
		}
		if w.DynamicWeight != "" && len(w.StaticWeightList) > 0 {
			errs = append(errs, field.Forbidden(wp.Child("staticWeightList"), "staticWeightList and dynamicWeight are exclusive"))
		}
		for i := range w.StaticWeightList {
			sw, sp := &w.StaticWeightList[i], wp.Child("staticWeightList").Index(i)
			if sw.Weight < 0 {
				errs = append(errs, field.Invalid(sp.Child("weight"), sw.Weight, "must not be negative"))
			}
			errs = append(errs, clusterAffinity(&sw.TargetCluster, sp.Child("targetCluster"))...)
		}
	}
	return errs
}

var purgeModes = []string{v1alpha1.PurgeModeGracefully, v1alpha1.PurgeModeDirectly, v1alpha1.PurgeModeNever,
	v1alpha1.PurgeModeGraciously, v1alpha1.PurgeModeImmediately}

func failover(f *v1alpha1.FailoverBehavior, path *field.Path) field.ErrorList {
	if f == nil {
		return nil
	}
	var errs field.ErrorList
	if a := f.Application; a != nil {
		ap := path.Child("application")
		errs = append(errs, purgeMode(a.PurgeMode, ap.Child("purgeMode"))...)
		if s := a.DecisionConditions.TolerationSeconds; s != nil && *s < 0 {
			errs = append(errs, field.Invalid(ap.Child("decisionConditions", "tolerationSeconds"), *s, "must not be negative"))
		}
		if s := a.GracePeriodSeconds; s != nil && *s <= 0 {
			errs = append(errs, field.Invalid(ap.Child("gracePeriodSeconds"), *s, "must be positive"))
		}
		errs = append(errs, statePreservation(a.StatePreservation, ap.Child("statePreservation"))...)
	}
	if c := f.Cluster; c != nil {
		cp := path.Child("cluster")
		errs = append(errs, purgeMode(c.PurgeMode, cp.Child("purgeMode"))...)
		if c.Fencing != nil {
			switch s := c.Fencing.StopAfterSeconds; {
			case s <= 0:
				errs = append(errs, field.Invalid(cp.Child("fencing", "stopAfterSeconds"), s, "must be positive"))
			case s > v1alpha1.MaxFencingStopAfterSeconds:
				errs = append(errs, field.Invalid(cp.Child("fencing", "stopAfterSeconds"), s,
					fmt.Sprintf("must be at most %d (30 days)", v1alpha1.MaxFencingStopAfterSeconds)))
			}
		}
		errs = append(errs, statePreservation(c.StatePreservation, cp.Child("statePreservation"))...)
		if c.Failback != nil && c.Failback.StabilizationSeconds < 0 {
			errs = append(errs, field.Invalid(cp.Child("failback", "stabilizationSeconds"), c.Failback.StabilizationSeconds, "must not be negative"))
		}
	}
	return errs
}

// maxJSONPathLength bounds a statePreservation rule's JSONPath.
const maxJSONPathLength = v1alpha1.MaxStateJSONPathLength

// statePreservation checks that each rule names a label key the new copy
// can carry and a JSONPath template that parses, and that there are few.
func statePreservation(sp *v1alpha1.StatePreservation, path *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	rules := path.Child("rules")
	switch n := len(sp.Rules); {
	case n == 0:
		errs = append(errs, field.Required(rules, "at least one rule, or leave statePreservation out"))
	case n > v1alpha1.MaxStatePreservationRules:
		errs = append(errs, field.TooMany(rules, n, v1alpha1.MaxStatePreservationRules))
	}
	seen := sets.New[string]()
	for i, r := range sp.Rules {
		rp := rules.Index(i)
		switch {
		case r.AliasLabelName == "":
			errs = append(errs, field.Required(rp.Child("aliasLabelName"), "the label key the value is injected under"))
		case seen.Has(r.AliasLabelName):
			errs = append(errs, field.Duplicate(rp.Child("aliasLabelName"), r.AliasLabelName))
		default:
			for _, msg := range validation.IsQualifiedName(r.AliasLabelName) {
				errs = append(errs, field.Invalid(rp.Child("aliasLabelName"), r.AliasLabelName, "not a valid label key: "+msg))
			}
		}
		seen.Insert(r.AliasLabelName)
		if r.JSONPath == "" {
			errs = append(errs, field.Required(rp.Child("jsonPath"), `a JSONPath template on the workload's status, such as "{.updateRevision}"`))
		} else if len(r.JSONPath) > maxJSONPathLength {
			errs = append(errs, field.TooLong(rp.Child("jsonPath"), "", maxJSONPathLength))
		} else if err := jsonpath.New(r.AliasLabelName).Parse(r.JSONPath); err != nil {
			errs = append(errs, field.Invalid(rp.Child("jsonPath"), r.JSONPath, "does not parse as a JSONPath template: "+err.Error()))
		}
	}
	return errs
}

func purgeMode(mode string, path *field.Path) field.ErrorList {
	if mode == "" || sets.New(purgeModes...).Has(mode) {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, mode, purgeModes)}
}
