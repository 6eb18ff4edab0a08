package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/admission"
)

func TestPlugins(t *testing.T) {
	type plugin struct {
		Name                 string
		Mutating, Validating bool
		Handles              []admission.Operation
	}
	want := []plugin{
		{Name: "FlotillaValidation", Validating: true, Handles: []admission.Operation{admission.Create, admission.Update}},
		{Name: "FlotillaTaintTime", Mutating: true, Handles: []admission.Operation{admission.Create, admission.Update}},
		{Name: "FlotillaProtection", Validating: true, Handles: []admission.Operation{admission.Create, admission.Update, admission.Delete}},
	}
	var got []plugin
	for _, p := range Plugins(nil, "flotilla:hub") {
		i, err := p.New()
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		_, mutating := i.(admission.MutationInterface)
		_, validating := i.(admission.ValidationInterface)
		got = append(got, plugin{Name: p.Name, Mutating: mutating, Validating: validating})
		for _, op := range []admission.Operation{admission.Create, admission.Update, admission.Delete, admission.Connect} {
			if i.Handles(op) {
				got[len(got)-1].Handles = append(got[len(got)-1].Handles, op)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plugins (-want +got):\n%s", diff)
	}
}
