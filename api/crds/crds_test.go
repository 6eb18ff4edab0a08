package crds_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"

	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/internal/apitest"
)

func TestAllHasOneCRDPerKind(t *testing.T) {
	var want []string
	for _, k := range apitest.Kinds() {
		want = append(want, k.CRDName())
	}
	slices.Sort(want)
	all, err := crds.All()
	if err != nil {
		t.Fatalf("crds.All: %v", err)
	}
	var got []string
	for _, crd := range all {
		got = append(got, crd.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD names (-want +got):\n%s", diff)
	}
	again, err := crds.All()
	if err != nil {
		t.Fatalf("crds.All: %v", err)
	}
	again[0].Spec.Group = "changed.example"
	if all[0].Spec.Group == "changed.example" {
		t.Error("crds.All returns shared objects: a change to one call's result shows in another's")
	}
}

func TestCRDNamesScopeAndSubresources(t *testing.T) {
	byName := loadCRDs(t)
	for _, k := range apitest.Kinds() {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			crd := byName[k.CRDName()]
			if crd == nil {
				t.Fatalf("no CRD %s", k.CRDName())
			}
			scope := apiextensionsv1.ClusterScoped
			if k.Namespaced {
				scope = apiextensionsv1.NamespaceScoped
			}
			wantNames := apiextensionsv1.CustomResourceDefinitionNames{
				Plural: k.Resource, Singular: strings.ToLower(k.GVK.Kind), Kind: k.GVK.Kind, ListKind: k.GVK.Kind + "List",
				ShortNames: k.ShortNames, Categories: []string{"flotilla"},
			}
			if diff := cmp.Diff(wantNames, crd.Spec.Names, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if crd.Spec.Group != k.GVK.Group || crd.Spec.Scope != scope {
				t.Errorf("group %q scope %q, want %q %q", crd.Spec.Group, crd.Spec.Scope, k.GVK.Group, scope)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != k.GVK.Version || !v.Served || !v.Storage {
				t.Errorf("version %q served %v storage %v, want %q served and stored", v.Name, v.Served, v.Storage, k.GVK.Version)
			}
			hasStatus := v.Subresources != nil && v.Subresources.Status != nil
			if hasStatus != k.HasStatus {
				t.Errorf("status subresource %v, want %v", hasStatus, k.HasStatus)
			}
			if v.Subresources != nil && v.Subresources.Scale != nil {
				t.Error("unexpected scale subresource")
			}
		})
	}
}

func TestCRDPrinterColumns(t *testing.T) {
	byName := loadCRDs(t)
	// Columns whose path the test pins, beyond their names.
	paths := map[string]string{
		"clusters.flotilla.io/Ready":                    `.status.conditions[?(@.type=="Ready")].status`,
		"clusters.flotilla.io/Taints":                   `.spec.taints[*].key`,
		"clusters.flotilla.io/Version":                  `.status.kubernetesVersion`,
		"clusters.flotilla.io/Zone":                     `.spec.zone`,
		"clusters.flotilla.io/Region":                   `.spec.region`,
		"clusters.flotilla.io/Provider":                 `.spec.provider`,
		"resourcebindings.flotilla.io/Scheduled":        `.status.conditions[?(@.type=="Scheduled")].status`,
		"resourcebindings.flotilla.io/FullyApplied":     `.status.conditions[?(@.type=="FullyApplied")].status`,
		"clusterresourcebindings.flotilla.io/Scheduled": `.status.conditions[?(@.type=="Scheduled")].status`,
		"works.flotilla.io/Applied":                     `.status.conditions[?(@.type=="Applied")].status`,
	}
	for _, k := range apitest.Kinds() {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			crd := byName[k.CRDName()]
			if crd == nil {
				t.Fatalf("no CRD %s", k.CRDName())
			}
			var names, wide []string
			for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
				switch c.Priority {
				case 0:
					if len(wide) > 0 {
						t.Errorf("column %s comes after the wide ones", c.Name)
					}
					names = append(names, c.Name)
				case 1:
					wide = append(wide, c.Name)
				default:
					t.Errorf("column %s has priority %d", c.Name, c.Priority)
				}
				if c.Name == "Age" && (c.Type != "date" || c.JSONPath != ".metadata.creationTimestamp") {
					t.Errorf("Age column is %s %s, want date .metadata.creationTimestamp", c.Type, c.JSONPath)
				}
				if want, ok := paths[k.CRDName()+"/"+c.Name]; ok && c.JSONPath != want {
					t.Errorf("column %s: path %s, want %s", c.Name, c.JSONPath, want)
				}
			}
			if diff := cmp.Diff(k.Columns, names); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(k.WideColumns, wide, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("wide columns (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCRDsValid runs the checks the API server runs when a CRD is
// created: among them, that the schema is structural and that printer
// column paths and list types are valid.
func TestCRDsValid(t *testing.T) {
	for name, crd := range loadCRDs(t) {
		t.Run(name, func(t *testing.T) {
			s := serve(t, crd)
			if errs := structuralschema.ValidateStructural(nil, s.structural); len(errs) > 0 {
				t.Errorf("not structural: %v", errs.ToAggregate())
			}
			if errs := crdvalidation.ValidateCustomResourceDefinition(t.Context(), internalCRD(t, crd)); len(errs) > 0 {
				t.Errorf("invalid CRD: %v", errs.ToAggregate())
			}
		})
	}
}
