package crds_test

import (
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-io/flotilla/api/crds"
)

// loadCRDs decodes the embedded CRDs by name.
func loadCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatalf("crds.All: %v", err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range all {
		byName[crd.Name] = crd
	}
	return byName
}

// internalCRD is the CRD in the API server's internal form, defaulted as
// the server defaults it on create.
func internalCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	v1 := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, out, nil); err != nil {
		t.Fatalf("convert %s to the internal form: %v", crd.Name, err)
	}
	return out
}

// served is the schema of a CRD's only version, the structural form the
// API server prunes and defaults with, and its validator.
type served struct {
	props      *apiextensions.JSONSchemaProps
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

func serve(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) served {
	t.Helper()
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		t.Fatalf("%s: want one version with a schema, got %d versions", crd.Name, len(crd.Spec.Versions))
	}
	props := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, props, nil); err != nil {
		t.Fatalf("%s: convert the schema: %v", crd.Name, err)
	}
	s, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatalf("%s: structural schema: %v", crd.Name, err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatalf("%s: schema validator: %v", crd.Name, err)
	}
	return served{props: props, structural: s, validator: validator}
}

// admission is what the API server made of an object: what it stores,
// the fields it dropped as unknown, and why it would refuse it.
type admission struct {
	stored  map[string]any
	dropped []string
	errs    field.ErrorList
}

// admit does to obj what the API server does to a custom resource on
// create, in its order: prune unknown fields, drop nulls the schema does
// not allow, apply defaults, then validate against the schema and the list
// types. obj is not changed.
func (s served) admit(obj map[string]any) admission {
	stored := runtime.DeepCopyJSON(obj)
	dropped := structuralpruning.PruneWithOptions(stored, s.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(stored, s.structural)
	structuraldefaulting.Default(stored, s.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, stored, s.validator)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.structural, stored)...)
	return admission{stored: stored, dropped: dropped, errs: errs}
}
