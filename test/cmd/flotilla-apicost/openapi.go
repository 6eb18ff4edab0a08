package main

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Definition names of the meta types, as openapi-gen names them.
var (
	objectMetaDef = metav1.ObjectMeta{}.OpenAPIModelName()
	listMetaDef   = metav1.ListMeta{}.OpenAPIModelName()
)

// openAPIDefinitions are Kubernetes' generated definitions plus
// ResourceBinding's, taken from its CRD's schema: the spike's stand-in for
// openapi-gen on api/v1alpha1, which the generic server needs for its
// server-side-apply type converter.
func openAPIDefinitions() (common.GetOpenAPIDefinitions, error) {
	all, err := crds.Hub()
	if err != nil {
		return nil, err
	}
	var schema *spec.Schema
	for _, crd := range all {
		if crd.Spec.Group != v1alpha1.GroupName || crd.Spec.Names.Kind != "ResourceBinding" {
			continue
		}
		raw, err := json.Marshal(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("ResourceBinding schema: %w", err)
		}
		schema = &spec.Schema{}
		if err := json.Unmarshal(raw, schema); err != nil {
			return nil, fmt.Errorf("ResourceBinding schema: %w", err)
		}
	}
	if schema == nil {
		return nil, fmt.Errorf("no ResourceBinding CRD in api/crds")
	}
	kind, list := defName(&v1alpha1.ResourceBinding{}), defName(&v1alpha1.ResourceBindingList{})
	return func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		defs := generatedopenapi.GetOpenAPIDefinitions(ref)
		s := *schema
		s.Properties = cloneProps(s.Properties)
		s.Properties["metadata"] = refSchema(ref(objectMetaDef))
		defs[kind] = common.OpenAPIDefinition{Schema: s, Dependencies: []string{objectMetaDef}}
		items := spec.ArrayProperty(ptrTo(refSchema(ref(kind))))
		defs[list] = common.OpenAPIDefinition{
			Schema: spec.Schema{SchemaProps: spec.SchemaProps{
				Type:     []string{"object"},
				Required: []string{"items"},
				Properties: map[string]spec.Schema{
					"apiVersion": *spec.StringProperty(),
					"kind":       *spec.StringProperty(),
					"metadata":   refSchema(ref(listMetaDef)),
					"items":      *items,
				},
			}},
			Dependencies: []string{kind, listMetaDef},
		}
		return defs
	}, nil
}

func defName(obj any) string {
	t := reflect.TypeOf(obj).Elem()
	return t.PkgPath() + "." + t.Name()
}

func refSchema(r spec.Ref) spec.Schema { return spec.Schema{SchemaProps: spec.SchemaProps{Ref: r}} }

func ptrTo[T any](v T) *T { return &v }

func cloneProps(in map[string]spec.Schema) map[string]spec.Schema {
	out := make(map[string]spec.Schema, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	return out
}

// withKinds makes name give the group-version-kind extensions of
// ResourceBinding's definitions, which the server-side-apply type converter
// indexes its types by. The namer knows the kinds under their REST-friendly
// names (io.k8s...), openapi-gen's new key; the builder asks by Go type
// path, the key this spike's definitions have.
func withKinds(scheme *runtime.Scheme, name func(string) (string, spec.Extensions)) (func(string) (string, spec.Extensions), error) {
	friendly := map[string]string{}
	for _, kind := range []string{"ResourceBinding", "ResourceBindingList"} {
		gvk := v1alpha1.SchemeGroupVersion.WithKind(kind)
		obj, err := scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		if friendly[defName(obj)], err = scheme.ToOpenAPIDefinitionName(gvk); err != nil {
			return nil, err
		}
	}
	return func(n string) (string, spec.Extensions) {
		if f, ok := friendly[n]; ok {
			_, ext := name(f)
			return n, ext
		}
		return name(n)
	}, nil
}
