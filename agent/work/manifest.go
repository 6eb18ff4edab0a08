package work

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// manifest is one manifest of a Work, decoded.
type manifest struct {
	ordinal int
	obj     *unstructured.Unstructured // nil when err is set
	err     error
}

// decodeManifests decodes every manifest; one that is not a Kubernetes
// object with a name carries its error instead.
func decodeManifests(raws []json.RawMessage) []manifest {
	ms := make([]manifest, len(raws))
	for i, raw := range raws {
		obj, err := decodeManifest(raw)
		if err != nil {
			err = fmt.Errorf("manifest %d: %w", i, err)
		}
		ms[i] = manifest{ordinal: i, obj: obj, err: err}
	}
	return ms
}

func decodeManifest(raw json.RawMessage) (*unstructured.Unstructured, error) {
	var content map[string]any
	// This Unmarshal keeps integers int64, as unstructured objects need.
	if err := utiljson.Unmarshal(raw, &content); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	obj := &unstructured.Unstructured{Object: content}
	var err error
	switch {
	case obj.GetAPIVersion() == "" || obj.GetKind() == "":
		err = errors.New("apiVersion and kind are required")
	case obj.GetName() == "":
		err = errors.New("metadata.name is empty (generateName is not supported)")
	default:
		_, err = schema.ParseGroupVersion(obj.GetAPIVersion())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", describe(obj), err)
	}
	return obj, nil
}

// describe names a manifest before it is mapped to a resource.
func describe(obj *unstructured.Unstructured) string {
	s := obj.GetAPIVersion() + " " + obj.GetKind() + " "
	if ns := obj.GetNamespace(); ns != "" {
		s += ns + "/"
	}
	return s + obj.GetName()
}

var (
	namespaceKind = schema.GroupKind{Kind: "Namespace"}
	crdKind       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
)

// phases splits the manifests into the order of applying them. early holds
// the Namespaces, so that objects in them can be created, then the
// CustomResourceDefinitions, so that custom resources can be mapped once
// they are established; late holds everything else in manifest order.
func phases(ms []manifest) (early, late []int) {
	var crds []int
	for _, m := range ms {
		switch kindOf(m) {
		case namespaceKind:
			early = append(early, m.ordinal)
		case crdKind:
			crds = append(crds, m.ordinal)
		default:
			late = append(late, m.ordinal)
		}
	}
	return append(early, crds...), late
}

func kindOf(m manifest) schema.GroupKind {
	if m.obj == nil {
		return schema.GroupKind{}
	}
	return m.obj.GroupVersionKind().GroupKind()
}

// Fields the API server owns: applying them would fail or fight it.
var serverFields = []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"}

// prepare returns the object to apply: a copy of obj in namespace (empty
// for cluster-scoped objects) without server-owned fields and status,
// labelled and annotated as the Work's.
func prepare(obj *unstructured.Unstructured, namespace, work, binding string) *unstructured.Unstructured {
	u := obj.DeepCopy()
	unstructured.RemoveNestedField(u.Object, "status")
	for _, field := range serverFields {
		unstructured.RemoveNestedField(u.Object, "metadata", field)
	}
	u.SetNamespace(namespace)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy], labels[LabelWork] = ManagedBy, work
	u.SetLabels(labels)
	if binding != "" {
		annotations := u.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationBinding] = binding
		u.SetAnnotations(annotations)
	}
	return u
}
