package templates

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// excludedGroups serve objects that are not templates: Flotilla's own
// kinds (and Karmada's, should they be served), events, leases, and the API
// server's own machinery.
var excludedGroups = map[string]bool{
	"flotilla.io":                  true,
	"apps.flotilla.io":             true,
	"policy.karmada.io":            true,
	"apps.karmada.io":              true,
	"events.k8s.io":                true,
	"coordination.k8s.io":          true,
	"apiregistration.k8s.io":       true,
	"flowcontrol.apiserver.k8s.io": true,
	"authentication.k8s.io":        true,
	"authorization.k8s.io":         true,
	"certificates.k8s.io":          true,
}

// excludedResource reports whether the objects of gr are never templates.
func excludedResource(gr schema.GroupResource) bool {
	return excludedGroups[gr.Group] || gr == schema.GroupResource{Resource: "events"}
}

// excludedNamespace reports whether ns is one of the hub's own namespaces
// (flotilla-*) or of the API server's (kube-*), whose objects are not
// templates.
func excludedNamespace(ns string) bool {
	return strings.HasPrefix(ns, "flotilla-") || strings.HasPrefix(ns, "kube-")
}

var (
	namespaceKind = schema.GroupKind{Kind: "Namespace"}
	crdKind       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
)

// Labels of objects the API server and the hub create for themselves: the
// default RBAC roles and bindings (cluster-admin, admin, edit, view,
// system:*) and the hub's own ClusterRoles (flotilla-viewer...).
const (
	bootstrapLabel = "kubernetes.io/bootstrapping"
	partOfLabel    = "app.kubernetes.io/part-of"
)

// excludedObject reports whether u, of a resource that holds templates, is
// the hub's own or its API server's: an object in an excluded namespace,
// such a Namespace, the CustomResourceDefinition of an excluded group
// (Flotilla's kinds, which the hub installs), a default RBAC object
// (labelled kubernetes.io/bootstrapping) or one the hub installs (labelled
// app.kubernetes.io/part-of=flotilla). A policy selecting every
// ClusterRole must not send the hub's cluster-admin to the fleet.
func excludedObject(u *unstructured.Unstructured) bool {
	if excludedNamespace(u.GetNamespace()) {
		return true
	}
	if labels := u.GetLabels(); labels[bootstrapLabel] != "" || labels[partOfLabel] == "flotilla" {
		return true
	}
	switch u.GroupVersionKind().GroupKind() {
	case namespaceKind:
		return excludedNamespace(u.GetName())
	case crdKind:
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		return excludedGroups[group]
	}
	return false
}
