package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Taint key prefixes. Karmada policies tolerate cluster.karmada.io/* taints;
// the hub sets the same taints under cluster.flotilla.io/*.
const (
	karmadaTaintPrefix  = "cluster.karmada.io/"
	flotillaTaintPrefix = "cluster.flotilla.io/"
)

// reasonAffinity completes "N cluster(s) ..." for clusters the affinity
// rejects. It does not say which part of the affinity failed so that the
// message groups them, as the Kubernetes scheduler does for node affinity.
const reasonAffinity = "did not match the placement's cluster affinity"

// reasonEvicted completes "N cluster(s) ..." for a cluster in the binding's
// graceful eviction tasks.
const reasonEvicted = "is being evicted from this binding"

// taintReason completes "N cluster(s) ..." for a cluster with an untolerated
// taint, in the Kubernetes scheduler's wording.
func taintReason(t *corev1.Taint) string {
	return fmt.Sprintf("had untolerated taint {%s: %s}", t.Key, t.Value)
}

// Filter returns the clusters that match affinity (nil matches all) and
// tolerate tolerations, sorted by name, and for every other cluster the
// reason it was left out (the text completes "N cluster(s) ..."). Clusters
// named in placed pass the taint check whatever their taints; clusters
// named in evicted never pass, even when placed. An invalid affinity is an
// error.
func Filter(affinity *v1alpha1.ClusterAffinity, tolerations []corev1.Toleration, clusters []*v1alpha1.Cluster, placed []v1alpha1.TargetCluster, evicted []string) ([]*v1alpha1.Cluster, map[string]string, error) {
	m, err := compileAffinity(affinity)
	if err != nil {
		return nil, nil, err
	}
	sorted, err := sortedClusters(clusters)
	if err != nil {
		return nil, nil, err
	}
	reasons := map[string]string{}
	cands := candidates{clusters: sorted, tolerations: tolerations, placed: targetNames(placed), excluded: exclusions(evicted, "", "", nil, nil)}
	fit := cands.filter(&m, nil, reasons)
	return fit, reasons, nil
}

// candidates are the clusters a placement's affinity is tried on, with
// what else decides whether one fits.
type candidates struct {
	clusters    []*v1alpha1.Cluster
	tolerations []corev1.Toleration // the placement's
	// placed are the clusters of the previous result: they pass the taint
	// check whatever their taints.
	placed map[string]bool
	// excluded are no candidates whatever the placement says, with why
	// (see exclusions).
	excluded map[string]string
}

// filter returns the clusters that fit m, in their order, and records why
// the others do not in reasons unless it is nil (Schedule only needs
// reasons when nothing fits, and putting a taint into words costs more
// than filtering). matched, when not nil, is m's verdict on each of the
// clusters by index: a Fleet's memo.
func (cs *candidates) filter(m *affinityMatcher, matched []bool, reasons map[string]string) []*v1alpha1.Cluster {
	fit := make([]*v1alpha1.Cluster, 0, len(cs.clusters))
	for i, c := range cs.clusters {
		matches := matched != nil && matched[i] || matched == nil && m.matches(c)
		reason, taint := rejection(matches, cs.tolerations, c, cs.placed, cs.excluded)
		switch {
		case reason == "" && taint == nil:
			fit = append(fit, c)
		case reasons == nil:
		case taint != nil:
			reasons[c.Name] = taintReason(taint)
		default:
			reasons[c.Name] = reason
		}
	}
	return fit
}

// rejection is why c does not fit: a reason, or the taint it does not
// tolerate (put into words by taintReason); neither if it fits. matches
// is whether the placement's affinity matches c. Exclusions (eviction, a
// kind the cluster does not serve) are checked first: they hold whatever
// else does. Affinity comes next: it is the user's stated intent, so it is
// the clearer reason than a taint.
func rejection(matches bool, tolerations []corev1.Toleration, c *v1alpha1.Cluster, placed map[string]bool, excluded map[string]string) (string, *corev1.Taint) {
	if reason, ok := excluded[c.Name]; ok {
		return reason, nil
	}
	if !matches {
		return reasonAffinity, nil
	}
	if len(c.Spec.Taints) == 0 || placed[c.Name] {
		return "", nil
	}
	return "", untoleratedTaint(c.Spec.Taints, tolerations)
}

// exclusions maps the clusters that are no candidates whatever the
// placement says to why: being evicted from the binding, or reporting the
// APIs they serve without apiVersion's kind (from fleet when given, else
// from clusters). A cluster that has reported no APIs yet is not excluded:
// unknown is not absent. The map may be the Fleet's: read it only.
func exclusions(evicted []string, apiVersion, kind string, clusters []*v1alpha1.Cluster, fleet *Fleet) map[string]string {
	var out map[string]string
	switch {
	case kind == "":
	case fleet != nil:
		out = fleet.unservedBy(apiVersion, kind)
	default:
		out = unserved(apiVersion, kind, clusters)
	}
	if len(evicted) == 0 {
		return out
	}
	out = maps.Clone(out)
	if out == nil {
		out = make(map[string]string, len(evicted))
	}
	for _, name := range evicted {
		out[name] = reasonEvicted
	}
	return out
}

// unserved maps the clusters that report the APIs they serve without
// apiVersion's kind to why they are excluded; nil when there are none.
func unserved(apiVersion, kind string, clusters []*v1alpha1.Cluster) map[string]string {
	var out map[string]string
	for _, c := range clusters {
		if len(c.Status.APIEnablements) > 0 && !serves(c.Status.APIEnablements, apiVersion, kind) {
			if out == nil {
				out = map[string]string{}
			}
			out[c.Name] = fmt.Sprintf("did not serve %s %s", apiVersion, kind)
		}
	}
	return out
}

func serves(apis []v1alpha1.APIEnablement, apiVersion, kind string) bool {
	for _, gv := range apis {
		if gv.GroupVersion != apiVersion {
			continue
		}
		for _, r := range gv.Resources {
			if r.Kind == kind {
				return true
			}
		}
	}
	return false
}

// untoleratedTaint returns the first NoSchedule, NoExecute or
// PreferNoExecute taint that no toleration tolerates, or nil.
// PreferNoSchedule would only lower a score, and scoring does not count
// taints.
func untoleratedTaint(taints []corev1.Taint, tolerations []corev1.Toleration) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute && t.Effect != v1alpha1.TaintEffectPreferNoExecute {
			continue
		}
		if !Tolerates(tolerations, t) {
			return t
		}
	}
	return nil
}

// Tolerates reports whether any of tolerations tolerates taint, with the
// semantics of corev1.Toleration.ToleratesTaint (the alpha comparison
// operators Lt and Gt tolerate nothing), plus one addition: a toleration of
// a cluster.karmada.io/<x> key also tolerates the cluster.flotilla.io/<x>
// taint.
func Tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerates(&tolerations[i], taint) {
			return true
		}
	}
	return false
}

func tolerates(t *corev1.Toleration, taint *corev1.Taint) bool {
	// The logger is only used for Lt/Gt, which are disabled; the zero
	// logr.Logger discards anyway.
	if t.ToleratesTaint(klog.Logger{}, taint, false) {
		return true
	}
	suffix, ok := strings.CutPrefix(t.Key, karmadaTaintPrefix)
	if !ok {
		return false
	}
	mapped := *t
	mapped.Key = flotillaTaintPrefix + suffix
	return mapped.ToleratesTaint(klog.Logger{}, taint, false)
}

// affinityMatcher is a ClusterAffinity parsed once, to be matched against
// many clusters. The zero value matches every cluster.
type affinityMatcher struct {
	names   map[string]bool // nil: any name
	exclude []string
	labels  labels.Selector // nil: any labels
	fields  []fieldRequirement
	// key is the same for affinities that match the same clusters,
	// written the same way, for a Fleet to remember what matched; "":
	// too long to be worth remembering.
	key string
}

// maxKeyedNames is the most cluster names an affinity may list and still
// get a key: building a key costs as much as the names are long.
const maxKeyedNames = 64

func compileAffinity(a *v1alpha1.ClusterAffinity) (affinityMatcher, error) {
	var m affinityMatcher
	if a == nil {
		return m, nil
	}
	if len(a.ClusterNames) > 0 {
		// A set, because a names rule can list every cluster of a large fleet.
		m.names = make(map[string]bool, len(a.ClusterNames))
		for _, n := range a.ClusterNames {
			m.names[n] = true
		}
	}
	m.exclude = a.Exclude
	// LabelSelectorAsSelector turns nil into "nothing"; an absent selector
	// means no constraint here.
	if a.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(a.LabelSelector)
		if err != nil {
			return m, fmt.Errorf("labelSelector: %w", err)
		}
		m.labels = sel
	}
	if a.FieldSelector != nil {
		for i, req := range a.FieldSelector.MatchExpressions {
			f, err := compileField(req)
			if err != nil {
				return m, fmt.Errorf("fieldSelector.matchExpressions[%d]: %w", i, err)
			}
			m.fields = append(m.fields, f)
		}
	}
	if len(a.ClusterNames)+len(a.Exclude) <= maxKeyedNames {
		m.key = affinityKey(a, m.labels)
	}
	return m, nil
}

// affinityKey writes a down with its label selector in canonical form.
func affinityKey(a *v1alpha1.ClusterAffinity, sel labels.Selector) string {
	var b strings.Builder
	// Quoted lists: a name or value with a separator in it cannot make
	// two affinities look the same.
	fmt.Fprintf(&b, "names=%q exclude=%q", a.ClusterNames, a.Exclude)
	if sel != nil {
		fmt.Fprintf(&b, " labels=%q", sel.String())
	}
	if a.FieldSelector != nil {
		for _, req := range a.FieldSelector.MatchExpressions {
			fmt.Fprintf(&b, " field=%q %q %q", req.Key, req.Operator, req.Values)
		}
	}
	return b.String()
}

func (m *affinityMatcher) matches(c *v1alpha1.Cluster) bool {
	if m.names != nil && !m.names[c.Name] {
		return false
	}
	if slices.Contains(m.exclude, c.Name) {
		return false
	}
	if m.labels != nil && !m.labels.Matches(labels.Set(c.Labels)) {
		return false
	}
	for i := range m.fields {
		if !m.fields[i].matches(&c.Spec) {
			return false
		}
	}
	return true
}

// fieldRequirement is one fieldSelector expression on a ClusterSpec field.
// An empty field counts as absent, as in Karmada, which matches fields as
// labels set only when non-empty.
type fieldRequirement struct {
	get    func(*v1alpha1.ClusterSpec) string
	op     corev1.NodeSelectorOperator
	values []string
}

func compileField(req corev1.NodeSelectorRequirement) (fieldRequirement, error) {
	f := fieldRequirement{get: fieldGetter(req.Key), op: req.Operator, values: req.Values}
	if f.get == nil {
		return f, fmt.Errorf("key %q: unknown, want %s, %s or %s", req.Key, v1alpha1.FieldProvider, v1alpha1.FieldRegion, v1alpha1.FieldZone)
	}
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			return f, fmt.Errorf("operator %s needs values", req.Operator)
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			return f, fmt.Errorf("operator %s takes no values", req.Operator)
		}
	default:
		return f, fmt.Errorf("operator %q: unsupported, want In, NotIn, Exists or DoesNotExist", req.Operator)
	}
	return f, nil
}

func fieldGetter(key string) func(*v1alpha1.ClusterSpec) string {
	switch key {
	case v1alpha1.FieldProvider:
		return func(s *v1alpha1.ClusterSpec) string { return s.Provider }
	case v1alpha1.FieldRegion:
		return func(s *v1alpha1.ClusterSpec) string { return s.Region }
	case v1alpha1.FieldZone:
		return func(s *v1alpha1.ClusterSpec) string { return s.Zone }
	}
	return nil
}

func (f *fieldRequirement) matches(spec *v1alpha1.ClusterSpec) bool {
	v := f.get(spec)
	switch f.op {
	case corev1.NodeSelectorOpIn:
		return v != "" && slices.Contains(f.values, v)
	case corev1.NodeSelectorOpNotIn:
		return v == "" || !slices.Contains(f.values, v)
	case corev1.NodeSelectorOpExists:
		return v != ""
	default: // DoesNotExist; compileField rejects other operators
		return v == ""
	}
}
