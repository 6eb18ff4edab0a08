package work

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// mapping finds the resource of a kind. Discovery is cached, so a kind the
// cache does not know makes it read discovery again, once.
func (e *Engine) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		e.mapper.Reset()
		m, err = e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// resource is the dynamic client of ref's resource, in its namespace.
func (e *Engine) resource(ref objectRef) dynamic.ResourceInterface {
	r := e.dyn.Resource(ref.gvr())
	if ref.Namespace != "" {
		return r.Namespace(ref.Namespace)
	}
	return r
}
