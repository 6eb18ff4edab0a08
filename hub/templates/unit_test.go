package templates

import (
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func TestExcludedObjects(t *testing.T) {
	crd := func(group string) *unstructured.Unstructured {
		u := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "things."+group)
		_ = unstructured.SetNestedField(u.Object, group, "spec", "group")
		return u
	}
	labelled := func(u *unstructured.Unstructured, key, value string) *unstructured.Unstructured {
		u.SetLabels(map[string]string{key: value})
		return u
	}
	tests := []struct {
		u        *unstructured.Unstructured
		excluded bool
	}{
		{labelled(obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "cluster-admin"), "kubernetes.io/bootstrapping", "rbac-defaults"), true},
		{labelled(obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "flotilla-viewer"), "app.kubernetes.io/part-of", "flotilla"), true},
		{labelled(obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader"), "app.kubernetes.io/part-of", "shop"), false},
		{obj("v1", "ConfigMap", "web", "a"), false},
		{obj("v1", "ConfigMap", "kube-system", "a"), true},
		{obj("v1", "ConfigMap", "flotilla-es-member1", "a"), true},
		{obj("v1", "ConfigMap", "kubeflow", "a"), false},
		{obj("v1", "ConfigMap", "flotilla", "a"), false},
		{obj("v1", "Namespace", "", "web"), false},
		{obj("v1", "Namespace", "default", ""), false},
		{obj("v1", "Namespace", "", "kube-public"), true},
		{obj("v1", "Namespace", "", "flotilla-cluster-lease"), true},
		{obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "kube-reader"), false},
		{crd("flotilla.io"), true},
		{crd("apps.flotilla.io"), true},
		{crd("policy.karmada.io"), true},
		{crd("example.com"), false},
	}
	for _, tt := range tests {
		if got := excludedObject(tt.u); got != tt.excluded {
			t.Errorf("excludedObject(%s %s/%s) = %t, want %t", tt.u.GetKind(), tt.u.GetNamespace(), tt.u.GetName(), got, tt.excluded)
		}
	}
	for gr, excluded := range map[schema.GroupResource]bool{
		{Resource: "events"}:                                                   true,
		{Group: "events.k8s.io", Resource: "events"}:                           true,
		{Group: "coordination.k8s.io", Resource: "leases"}:                     true,
		{Group: "flotilla.io", Resource: "works"}:                              true,
		{Group: "apps", Resource: "deployments"}:                               false,
		{Resource: "configmaps"}:                                               false,
		{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}: false,
	} {
		if got := excludedResource(gr); got != excluded {
			t.Errorf("excludedResource(%s) = %t, want %t", gr, got, excluded)
		}
	}
}

func crd(group, plural string, established, terminating bool, versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: group, Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: "Thing"}, Versions: versions}}
	if established {
		c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	}
	if terminating {
		c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return c
}

func ver(name string, served bool) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: served}
}

func TestDiscoveryAgreesWithCRDs(t *testing.T) {
	things := schema.GroupResource{Group: "example.com", Resource: "things"}
	at := func(v string) discovered {
		return discovered{resources: map[schema.GroupResource]served{things: {gvr: things.WithVersion(v), kind: "Thing", namespaced: true}}}
	}
	none := discovered{resources: map[schema.GroupResource]served{}}
	tests := []struct {
		name    string
		d       discovered
		crds    []*apiextensionsv1.CustomResourceDefinition
		everCRD bool
		agrees  bool
	}{
		{"established and served", at("v1"), []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, false, ver("v1", true))}, true, true},
		{"established, not yet discovered", none, []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, false, ver("v1", true))}, true, false},
		{"not established", none, []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", false, false, ver("v1", true))}, true, true},
		{"not established, still discovered", at("v1"), []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", false, false, ver("v1", true))}, true, false},
		{"higher version", at("v1"), []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, false, ver("v1", true), ver("v2", true))}, true, false},
		{"higher version discovered", at("v2"), []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, false, ver("v1", true), ver("v2", true))}, true, true},
		{"beta below GA", at("v1"), []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, false, ver("v2beta1", true), ver("v1", true))}, true, true},
		{"higher version not served", at("v1"), []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, false, ver("v1", true), ver("v2", false))}, true, true},
		{"nothing served", none, []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, false, ver("v1", false))}, true, true},
		{"terminating, discovered", at("v1"), []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, true, ver("v1", true))}, true, true},
		{"terminating, gone", none, []*apiextensionsv1.CustomResourceDefinition{crd("example.com", "things", true, true, ver("v1", true))}, true, true},
		{"deleted, still discovered", at("v1"), nil, true, false},
		{"deleted and gone", none, nil, true, true},
		{"never a CRD", at("v1"), nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var views []crdView
			for _, c := range tt.crds {
				views = append(views, viewOf(c))
			}
			ever := map[schema.GroupResource]bool{}
			if tt.everCRD {
				ever[things] = true
			}
			if got := agrees(tt.d, views, ever); got != tt.agrees {
				t.Errorf("agrees = %t, want %t", got, tt.agrees)
			}
		})
	}
}
