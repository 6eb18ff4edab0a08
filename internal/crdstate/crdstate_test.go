package crdstate

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestEstablished(t *testing.T) {
	withConditions := func(conds ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": conds}}}
	}
	cond := func(typ, status string) any { return map[string]any{"type": typ, "status": status} }
	tests := []struct {
		name string
		crd  *unstructured.Unstructured
		want bool
	}{
		{"established", withConditions(cond("NamesAccepted", "True"), cond("Established", "True")), true},
		{"not yet", withConditions(cond("NamesAccepted", "True"), cond("Established", "False")), false},
		{"no conditions", &unstructured.Unstructured{Object: map[string]any{}}, false},
		{"malformed condition", withConditions("Established"), false},
	}
	for _, tt := range tests {
		if got := Established(tt.crd); got != tt.want {
			t.Errorf("%s: Established = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestKind(t *testing.T) {
	crd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"group": "cli.example.com", "names": map[string]any{"kind": "Gadget", "plural": "gadgets"}}}}
	if got, want := Kind(crd), (schema.GroupKind{Group: "cli.example.com", Kind: "Gadget"}); got != want {
		t.Errorf("Kind = %v; want %v", got, want)
	}
}
