// Package templateclient reaches resource templates of any kind in the
// hub's API server, one at a time, for controllers that must read one live
// or write its status: it resolves a kind through the REST mapper (reset
// once when it does not know the kind, as a CRD may be new) and reads and
// writes through the dynamic client. The hub's in-memory template Source
// (package templates) is what controllers read otherwise.
package templateclient

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// FieldManager names the hub in what it writes to templates.
const FieldManager = "flotilla-hub"

// Writer reaches templates of any kind in the API server for controllers
// that write them (the status controller sums the clusters' statuses into
// a template's status) or must check one the Source does not hold.
type Writer struct {
	clients *kube.Clients
}

// NewWriter returns a Writer over clients (Dynamic and Mapper).
func NewWriter(clients *kube.Clients) *Writer { return &Writer{clients: clients} }

// Resolve returns the resource of gvk and whether it is namespaced. A
// kind the RESTMapper does not know (a CRD created since it last looked)
// resets it and is tried once more; a kind still unknown is a no-match
// error (meta.IsNoMatchError).
func (w *Writer) Resolve(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	m, err := w.mapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// mapping maps gk at one of versions (none: the preferred one).
func (w *Writer) mapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := w.clients.Mapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		w.clients.Mapper.Reset()
		m, err = w.clients.Mapper.RESTMapping(gk, versions...)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", gk, err)
	}
	return m, nil
}

// client returns the dynamic client of m's resource in namespace.
func (w *Writer) client(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	r := w.clients.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Namespace(namespace)
	}
	return r
}

// Get reads the template of kind gk named namespace/name from the API
// server, in the kind's preferred version: for a decision that must not
// rest on an informer that may lag (or a kind no longer served, reported
// as a no-match error).
func (w *Writer) Get(ctx context.Context, gk schema.GroupKind, namespace, name string) (*unstructured.Unstructured, error) {
	m, err := w.mapping(gk)
	if err != nil {
		return nil, err
	}
	return w.client(m, namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateStatus writes u's status through the status subresource of its
// kind (the API server ignores everything else of u); u's resourceVersion
// makes it conditional: a Conflict means the template changed since. Kinds
// without a status subresource answer NotFound.
func (w *Writer) UpdateStatus(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := u.GroupVersionKind()
	m, err := w.mapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	out, err := w.client(m, u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("update status of %s %s: %w", gvk.Kind, controller.Key(u.GetNamespace(), u.GetName()), err)
	}
	return out, nil
}
