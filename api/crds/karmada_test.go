package crds

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKarmadaCopiesFlotillasSchemas(t *testing.T) {
	karmada, err := Karmada()
	if err != nil {
		t.Fatal(err)
	}
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, crd := range all {
		byName[crd.Name] = i
	}
	want := map[string]string{
		"propagationpolicies.policy.karmada.io":        "propagationpolicies.flotilla.io",
		"clusterpropagationpolicies.policy.karmada.io": "clusterpropagationpolicies.flotilla.io",
		"clustertaintpolicies.policy.karmada.io":       "clustertaintpolicies.flotilla.io",
		"workloadrebalancers.apps.karmada.io":          "workloadrebalancers.apps.flotilla.io",
	}
	got := map[string]string{}
	for _, crd := range karmada {
		got[crd.Name] = crd.Labels[LabelAliasOf]
		i, ok := byName[crd.Labels[LabelAliasOf]]
		if !ok {
			t.Errorf("%s: copies %q, which is not one of Flotilla's CRDs", crd.Name, crd.Labels[LabelAliasOf])
			continue
		}
		orig := all[i]
		if len(crd.Spec.Names.ShortNames) != 0 || len(crd.Spec.Names.Categories) != 0 {
			t.Errorf("%s: short names %v and categories %v stay with %s", crd.Name, crd.Spec.Names.ShortNames, crd.Spec.Names.Categories, orig.Name)
		}
		if diff := cmp.Diff(orig.Spec.Versions, crd.Spec.Versions); diff != "" {
			t.Errorf("%s: versions differ from %s (-flotilla +karmada):\n%s", crd.Name, orig.Name, diff)
		}
		if crd.Spec.Scope != orig.Spec.Scope || crd.Spec.Names.Kind != orig.Spec.Names.Kind {
			t.Errorf("%s: scope %s kind %s, want %s %s", crd.Name, crd.Spec.Scope, crd.Spec.Names.Kind, orig.Spec.Scope, orig.Spec.Names.Kind)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Karmada CRDs (-want +got):\n%s", diff)
	}
	hub, err := Hub()
	if err != nil {
		t.Fatal(err)
	}
	if len(hub) != len(all)+len(karmada) {
		t.Errorf("Hub has %d CRDs, want %d", len(hub), len(all)+len(karmada))
	}
}
