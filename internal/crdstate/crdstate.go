// Package crdstate reads what a CustomResourceDefinition, as unstructured
// content, says about being served: its Established condition and the
// kind it defines. The agent and the CLI both wait, after applying a CRD,
// until its kind is served before applying objects of that kind.
package crdstate

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Established reports whether the CRD's Established condition is True.
func Established(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		if cond, ok := c.(map[string]any); ok && cond["type"] == "Established" && cond["status"] == "True" {
			return true
		}
	}
	return false
}

// Kind is the group and kind the CRD defines.
func Kind(crd *unstructured.Unstructured) schema.GroupKind {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}
}
