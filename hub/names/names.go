// Package names holds how the hub names and keys what it derives from a
// resource template, so that every controller computes them alike
// without importing another:
//
//   - a template's key across kinds, GROUP/KIND/NAMESPACE/NAME, the key
//     of the hub's template Source (TemplateKey and its variants);
//   - the name of a template's binding, NAME-KIND, and the annotations
//     that tie a binding to its template and policy (BindingName);
//   - the name of a binding's Work in every cluster (WorkName).
package names

import (
	"fmt"
	"hash/fnv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Annotations the detector puts on bindings.
const (
	// AnnotationPolicy names the policy that matched the template.
	AnnotationPolicy = "flotilla.io/policy"
	// AnnotationTemplate holds the TemplateKey of the binding's template.
	AnnotationTemplate = "flotilla.io/template"
)

// TemplateKey names a template across kinds: GROUP/KIND/NAMESPACE/NAME
// (the group empty for the core group, the namespace empty for
// cluster-scoped kinds). The version is not part of it: a kind is one
// template whatever version it is read in.
func TemplateKey(u *unstructured.Unstructured) string {
	return TemplateKeyFor(u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName())
}

// TemplateKeyFor is the TemplateKey of the template of kind gk named
// namespace/name.
func TemplateKeyFor(gk schema.GroupKind, namespace, name string) string {
	return gk.Group + "/" + gk.Kind + "/" + namespace + "/" + name
}

// TemplateKeyOf is the TemplateKey of the template r refers to (a
// binding's spec.resource).
func TemplateKeyOf(r v1alpha1.ObjectReference) string {
	group, _, _ := strings.Cut(r.APIVersion, "/")
	if !strings.Contains(r.APIVersion, "/") {
		group = ""
	}
	return TemplateKeyFor(schema.GroupKind{Group: group, Kind: r.Kind}, r.Namespace, r.Name)
}

// ParseTemplateKey splits a TemplateKey; ok is false if key is not one.
func ParseTemplateKey(key string) (gk schema.GroupKind, namespace, name string, ok bool) {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return schema.GroupKind{}, "", "", false
	}
	return schema.GroupKind{Group: parts[0], Kind: parts[1]}, parts[2], parts[3], true
}

// BindingName is the name of a template's binding: NAME-KIND.
func BindingName(name, kind string) string {
	return name + "-" + strings.ToLower(kind)
}

// maxWorkNamePrefix leaves room for "-" and 8 hex digits in 63 bytes.
const maxWorkNamePrefix = 54

// WorkName is the name of a binding's Work in every cluster: the binding's
// name, cut to fit a label value, and a hash of its key, so bindings of
// different namespaces never share a Work.
func WorkName(bindingKey, bindingName string) string {
	h := fnv.New32a()
	h.Write([]byte(bindingKey))
	prefix := bindingName
	if len(prefix) > maxWorkNamePrefix {
		prefix = strings.TrimRight(prefix[:maxWorkNamePrefix], "-.")
	}
	return fmt.Sprintf("%s-%08x", prefix, h.Sum32())
}
