package work

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/protocol"
)

// objectRef identifies one object in the member cluster. Records store it
// as JSON.
type objectRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// identity is what makes two refs the same object: the version is only how
// the object is read.
type identity struct {
	group, kind, namespace, name string
}

func (r objectRef) identity() identity {
	return identity{group: r.Group, kind: r.Kind, namespace: r.Namespace, name: r.Name}
}

func (r objectRef) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

func (r objectRef) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// String names the object the way messages to operators do:
// "apps/v1 Deployment default/nginx", "v1 Namespace demo".
func (r objectRef) String() string {
	s := r.gvk().GroupVersion().String() + " " + r.Kind + " "
	if r.Namespace != "" {
		s += r.Namespace + "/"
	}
	return s + r.Name
}

// result is the start of a ManifestResult for the object at ordinal.
func (r objectRef) result(ordinal int) protocol.ManifestResult {
	return protocol.ManifestResult{Ordinal: ordinal, Group: r.Group, Version: r.Version, Kind: r.Kind,
		Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}

// union returns a followed by the refs of b that are not in a.
func union(a, b []objectRef) []objectRef {
	out := append([]objectRef(nil), a...)
	return append(out, subtract(b, a)...)
}

// subtract returns the refs of a that are not in b.
func subtract(a, b []objectRef) []objectRef {
	in := make(map[identity]bool, len(b))
	for _, r := range b {
		in[r.identity()] = true
	}
	var out []objectRef
	for _, r := range a {
		if !in[r.identity()] {
			out = append(out, r)
		}
	}
	return out
}
