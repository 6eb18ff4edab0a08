package templates

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Key names a template across kinds: GROUP/KIND/NAMESPACE/NAME (the group
// empty for the core group, the namespace empty for cluster-scoped kinds).
// The version is not part of it: a kind is one template whatever version
// it is read in.
func Key(u *unstructured.Unstructured) string {
	return KeyFor(u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName())
}

// KeyFor is the Key of the template of kind gk named namespace/name.
func KeyFor(gk schema.GroupKind, namespace, name string) string {
	return gk.Group + "/" + gk.Kind + "/" + namespace + "/" + name
}

// ParseKey splits a Key; ok is false if key is not one.
func ParseKey(key string) (gk schema.GroupKind, namespace, name string, ok bool) {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return schema.GroupKind{}, "", "", false
	}
	return schema.GroupKind{Group: parts[0], Kind: parts[1]}, parts[2], parts[3], true
}
