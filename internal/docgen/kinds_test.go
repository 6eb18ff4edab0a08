package docgen

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestKindsAndPrinterColumns(t *testing.T) {
	crds := []*apiextensionsv1.CustomResourceDefinition{{
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets", ShortNames: []string{"wg"}, Categories: []string{"example"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
					AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
						{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
						{Name: "Zone", Type: "string", JSONPath: ".spec.zone", Priority: 1, Description: "the <zone>"},
					}},
				{Name: "v0", Served: false},
			},
		},
	}, {
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.io", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gadget", Plural: "gadgets"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true}},
		},
	}}
	wantKinds := "| kind | group/version | scope | resource | short names | categories | subresources |\n" +
		"|---|---|---|---|---|---|---|\n" +
		"| `Widget` | `example.io/v1` | cluster | `widgets` | `wg` | `example` | status |\n" +
		"| `Gadget` | `example.io/v1` | namespace | `gadgets` |  |  |  |\n"
	if diff := cmp.Diff(wantKinds, Kinds(crds)); diff != "" {
		t.Errorf("Kinds (-want +got):\n%s", diff)
	}
	wantColumns := "| kind | column | type | JSONPath | shown | description |\n" +
		"|---|---|---|---|---|---|\n" +
		"| `Widget` | READY | string | `.status.conditions[?(@.type==\"Ready\")].status` | always |  |\n" +
		"| `Widget` | ZONE | string | `.spec.zone` | `-o wide` | the &lt;zone&gt; |\n"
	if diff := cmp.Diff(wantColumns, PrinterColumns(crds)); diff != "" {
		t.Errorf("PrinterColumns (-want +got):\n%s", diff)
	}
}
