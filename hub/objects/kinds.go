// Package objects is the hub's access to the propagation objects in the
// store: resource templates (any kind), policies, bindings, Works and
// WorkloadRebalancers, and the all-or-nothing apply and delete of user
// documents.
package objects

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/store"
)

func flotillaKind(resource, kind string, namespaced bool) store.Kind {
	return store.Kind{Resource: resource, GVK: v1alpha1.SchemeGroupVersion.WithKind(kind), Namespaced: namespaced}
}

// Kinds of propagation objects in the store.
var (
	ClusterKind        = flotillaKind("clusters", v1alpha1.KindCluster, false)
	PolicyKind         = flotillaKind("propagationpolicies", v1alpha1.KindPropagationPolicy, true)
	ClusterPolicyKind  = flotillaKind("clusterpropagationpolicies", v1alpha1.KindClusterPropagationPolicy, false)
	BindingKind        = flotillaKind("resourcebindings", v1alpha1.KindResourceBinding, true)
	ClusterBindingKind = flotillaKind("clusterresourcebindings", v1alpha1.KindClusterResourceBinding, false)
	WorkKind           = flotillaKind("works", v1alpha1.KindWork, true)
	// RebalancerKind is cluster-scoped, of group apps.flotilla.io.
	RebalancerKind = store.Kind{Resource: "workloadrebalancers",
		GVK: appsv1alpha1.SchemeGroupVersion.WithKind(appsv1alpha1.KindWorkloadRebalancer)}
	// TemplatesKind lists and watches every template, whatever its kind.
	TemplatesKind = store.Kind{Resource: templatesResource}
)

const templatesResource = "resources"

// TemplateKind is the store kind of the templates of one group and kind:
// keys resources/GROUP/KIND/[NAMESPACE/]NAME, each object keeping its own
// apiVersion (templates of any version of a kind share their keys).
func TemplateKind(gk schema.GroupKind, namespaced bool) store.Kind {
	group := gk.Group
	if group == "" {
		group = "core"
	}
	return store.Kind{Resource: templatesResource + "/" + group + "/" + gk.Kind, Namespaced: namespaced}
}

// Objects holds the typed stores.
type Objects struct {
	Store           *store.Store
	Policies        *store.Resource[v1alpha1.PropagationPolicy, *v1alpha1.PropagationPolicy]
	ClusterPolicies *store.Resource[v1alpha1.ClusterPropagationPolicy, *v1alpha1.ClusterPropagationPolicy]
	Bindings        *store.Resource[v1alpha1.ResourceBinding, *v1alpha1.ResourceBinding]
	ClusterBindings *store.Resource[v1alpha1.ClusterResourceBinding, *v1alpha1.ClusterResourceBinding]
	Works           *store.Resource[v1alpha1.Work, *v1alpha1.Work]
	Clusters        *store.Resource[v1alpha1.Cluster, *v1alpha1.Cluster]
	Templates       *store.Resource[unstructured.Unstructured, *unstructured.Unstructured]
	Rebalancers     *store.Resource[appsv1alpha1.WorkloadRebalancer, *appsv1alpha1.WorkloadRebalancer]
}

// New returns the typed stores of s.
func New(s *store.Store) *Objects {
	return &Objects{
		Store:           s,
		Policies:        store.For[v1alpha1.PropagationPolicy](s, PolicyKind),
		ClusterPolicies: store.For[v1alpha1.ClusterPropagationPolicy](s, ClusterPolicyKind),
		Bindings:        store.For[v1alpha1.ResourceBinding](s, BindingKind),
		ClusterBindings: store.For[v1alpha1.ClusterResourceBinding](s, ClusterBindingKind),
		Works:           store.For[v1alpha1.Work](s, WorkKind),
		Clusters:        store.For[v1alpha1.Cluster](s, ClusterKind),
		Templates:       store.For[unstructured.Unstructured](s, TemplatesKind),
		Rebalancers:     store.For[appsv1alpha1.WorkloadRebalancer](s, RebalancerKind),
	}
}

// Template returns the store of the templates of one group and kind.
func (o *Objects) Template(gk schema.GroupKind, namespaced bool) *store.Resource[unstructured.Unstructured, *unstructured.Unstructured] {
	return store.For[unstructured.Unstructured](o.Store, TemplateKind(gk, namespaced))
}

// clusterScopedKinds are the built-in kinds without a namespace that are
// commonly propagated; the kinds of cluster-scoped CRDs are added from the
// CRDs themselves.
var clusterScopedKinds = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "PersistentVolume"}: true,
	{Kind: "Node"}:             true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
}

// crdScope reads the group, kind and scope a CRD template defines.
func crdScope(u *unstructured.Unstructured) (schema.GroupKind, bool, bool) {
	if u.GetKind() != "CustomResourceDefinition" || !strings.HasPrefix(u.GetAPIVersion(), "apiextensions.k8s.io/") {
		return schema.GroupKind{}, false, false
	}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
	scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
	return schema.GroupKind{Group: group, Kind: kind}, scope == "Cluster", kind != ""
}
