package admission

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/yaml"
)

// request is an admission request of a test case.
type request struct {
	op          admission.Operation
	gvk         schema.GroupVersionKind
	resource    string // plural; the group and version are gvk's
	subresource string
	name        string // default: the object's name
	obj, old    runtime.Object
	user        user.Info
}

func (r request) attributes() admission.Attributes {
	name, namespace := r.name, ""
	for _, obj := range []runtime.Object{r.obj, r.old} {
		if m, err := meta.Accessor(obj); err == nil && obj != nil {
			namespace = m.GetNamespace()
			if _, typed := obj.(*unstructured.Unstructured); typed && name == "" {
				name = m.GetName()
			}
		}
	}
	u := r.user
	if u == nil {
		u = operator
	}
	return admission.NewAttributesRecord(r.obj, r.old, r.gvk, namespace, name, r.gvk.GroupVersion().WithResource(r.resource),
		r.subresource, r.op, nil, false, u)
}

var (
	operator = &user.DefaultInfo{Name: "otto", Groups: []string{user.AllAuthenticated}}
	admin    = &user.DefaultInfo{Name: "flotilla:admin", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
	hubUser  = &user.DefaultInfo{Name: "flotilla:hub", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
)

// object decodes a YAML document; a nil-returning typo fails the test.
func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("YAML %q: %v", doc, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatalf("object %s: %v", raw, err)
	}
	return u
}
