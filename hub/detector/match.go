package detector

import (
	"cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Specificity of the selector that matched: a name beats a label selector,
// which beats apiVersion and kind alone.
const (
	noMatch = iota
	matchKind
	matchLabels
	matchName
)

// candidate is a policy that matches a template.
type candidate struct {
	namespaced  bool // a PropagationPolicy, which beats any ClusterPropagationPolicy
	priority    int32
	specificity int
	name        string // namespace/name or name, last tie-breaker
	spec        *v1alpha1.PropagationSpec
	meta        metav1.Object
}

// better reports whether a should win over b.
func better(a, b *candidate) bool {
	if a.namespaced != b.namespaced {
		return a.namespaced
	}
	if c := cmp.Compare(a.priority, b.priority); c != 0 {
		return c > 0
	}
	if a.specificity != b.specificity {
		return a.specificity > b.specificity
	}
	return a.name < b.name
}

// specificity returns how specifically spec selects u, or noMatch.
func specificity(spec *v1alpha1.PropagationSpec, u *unstructured.Unstructured) int {
	best := noMatch
	for i := range spec.ResourceSelectors {
		best = max(best, selectorMatch(&spec.ResourceSelectors[i], u))
	}
	return best
}

func selectorMatch(s *v1alpha1.ResourceSelector, u *unstructured.Unstructured) int {
	if s.APIVersion != u.GetAPIVersion() || s.Kind != u.GetKind() {
		return noMatch
	}
	if s.Namespace != "" && s.Namespace != u.GetNamespace() {
		return noMatch
	}
	if s.Name != "" {
		if s.Name == u.GetName() {
			return matchName
		}
		return noMatch
	}
	if s.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(u.GetLabels())) {
			return noMatch
		}
		return matchLabels
	}
	return matchKind
}

func priorityOf(spec *v1alpha1.PropagationSpec) int32 {
	if spec.Priority == nil {
		return 0
	}
	return *spec.Priority
}
