package cli

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestServedKind: the kind waitEstablished looks up in discovery is the
// CRD's kind in its first served version; a CRD serving none has none.
func TestServedKind(t *testing.T) {
	crd := func(versions ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"group": "cli.example.com", "names": map[string]any{"kind": "Gadget"}, "versions": versions}}}
	}
	version := func(name string, served bool) any { return map[string]any{"name": name, "served": served} }
	tests := []struct {
		name string
		crd  *unstructured.Unstructured
		want schema.GroupVersionKind
		ok   bool
	}{
		{"one served", crd(version("v1", true)), schema.GroupVersionKind{Group: "cli.example.com", Version: "v1", Kind: "Gadget"}, true},
		{"the first served", crd(version("v1alpha1", false), version("v1beta1", true), version("v1", true)),
			schema.GroupVersionKind{Group: "cli.example.com", Version: "v1beta1", Kind: "Gadget"}, true},
		{"none served", crd(version("v1", false)), schema.GroupVersionKind{}, false},
		{"no versions", crd(), schema.GroupVersionKind{}, false},
		{"malformed version", crd("v1"), schema.GroupVersionKind{}, false},
	}
	for _, tt := range tests {
		got, ok := servedKind(tt.crd)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: servedKind = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
