package admission

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// TaintTime is the FlotillaTaintTime plugin. On CREATE and UPDATE of a
// Cluster it sets timeAdded on every taint of spec.taints that has none, so
// that every taint has an age, as Kubernetes gives NoExecute taints of
// nodes one. A taint the Cluster had already (same key and effect, the
// identity of a taint in Kubernetes) keeps its time when the request
// dropped it, as a whole-object update or an apply of the taint list does;
// a new one gets the clock's now. Taints that are not objects, or a list
// that is not one, are left alone for the schema to refuse.
type TaintTime struct {
	*admission.Handler
	clock clock.PassiveClock
}

var _ admission.MutationInterface = (*TaintTime)(nil)

// NewTaintTime returns the FlotillaTaintTime plugin stamping with clk (nil
// means the real clock).
func NewTaintTime(clk clock.PassiveClock) *TaintTime {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &TaintTime{Handler: admission.NewHandler(admission.Create, admission.Update), clock: clk}
}

var clusterKind = schema.GroupKind{Group: v1alpha1.GroupName, Kind: v1alpha1.KindCluster}

const timeAdded = "timeAdded"

// Admit stamps the taints of the Cluster in a.
func (p *TaintTime) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetSubresource() != "" || a.GetKind().GroupKind() != clusterKind {
		return nil
	}
	u, ok := a.GetObject().(*unstructured.Unstructured)
	if !ok {
		return nil // custom resources are unstructured
	}
	taints := taintsOf(u.Object)
	if len(taints) == 0 {
		return nil
	}
	var before []any
	if old, ok := a.GetOldObject().(runtime.Unstructured); ok && a.GetOperation() == admission.Update {
		before = taintsOf(old.UnstructuredContent())
	}
	now := metav1.NewTime(p.clock.Now()).ToUnstructured()
	for _, t := range taints {
		taint, ok := t.(map[string]any)
		if !ok || hasTime(taint) {
			continue
		}
		if prev := sameTaint(before, taint); prev != nil {
			taint[timeAdded] = prev[timeAdded]
			continue
		}
		taint[timeAdded] = now
	}
	return nil
}

// taintsOf is the spec.taints list of a Cluster, nil when there is none or
// it is not a list.
func taintsOf(obj map[string]any) []any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, "spec", "taints")
	taints, _ := v.([]any)
	return taints
}

func hasTime(taint map[string]any) bool {
	v, ok := taint[timeAdded]
	return ok && v != nil && v != ""
}

// sameTaint is the taint among taints with the key and effect of t and a
// time, nil if there is none.
func sameTaint(taints []any, t map[string]any) map[string]any {
	for _, o := range taints {
		if old, ok := o.(map[string]any); ok && hasTime(old) && sameString(old, t, "key") && sameString(old, t, "effect") {
			return old
		}
	}
	return nil
}

// sameString reports whether a and b have the same string at key (values
// of other types are never compared: maps and lists are not comparable).
func sameString(a, b map[string]any, key string) bool {
	x, ok1 := a[key].(string)
	y, ok2 := b[key].(string)
	return ok1 && ok2 && x == y
}
