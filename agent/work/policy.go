package work

import (
	"errors"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/agent/memberpolicy"
)

// admit returns nil if the member policy lets the engine write ref's
// object, else a *memberpolicy.Refused.
func (e *Engine) admit(ref objectRef) error {
	return e.cfg.Policy.Check(memberpolicy.Object{
		Kind:      memberpolicy.Kind{Group: ref.Group, Kind: ref.Kind},
		Namespace: ref.Namespace, Name: ref.Name, Namespaced: ref.Namespace != "",
	})
}

// isRefused says whether err is the member policy's refusal.
func isRefused(err error) bool {
	var refused *memberpolicy.Refused
	return errors.As(err, &refused)
}

// withPolicyLabels sets the policy's namespace labels (Pod Security) on a
// Namespace the hub sent: the hub cannot lower them.
func (e *Engine) withPolicyLabels(obj *unstructured.Unstructured) {
	extra := e.cfg.Policy.NamespaceLabels()
	if len(extra) == 0 {
		return
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, extra)
	obj.SetLabels(labels)
}
