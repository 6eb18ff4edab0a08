package karmada

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-io/flotilla/hub/controller"
)

// twins reads the twins of one kind from the hub's shared (typed)
// informer, as unstructured objects.
type twins interface {
	// get returns the twin with key, or nil.
	get(key string) (*unstructured.Unstructured, error)
	// addHandler calls h with the key of every twin that changes.
	addHandler(h func(key string))
	syncer() controller.Syncer
}

type typed[PT runtime.Object] struct {
	shared *controller.Shared[PT]
	gvk    schema.GroupVersionKind
}

func typedTwins[PT runtime.Object](shared *controller.Shared[PT], gvr schema.GroupVersionResource, kind string) twins {
	return &typed[PT]{shared: shared, gvk: gvr.GroupVersion().WithKind(kind)}
}

func (t *typed[PT]) get(key string) (*unstructured.Unstructured, error) {
	obj, ok, err := t.shared.Informer().GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s %s: %w", t.gvk.Kind, key, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(t.gvk)
	return u, nil
}

func (t *typed[PT]) addHandler(h func(key string)) {
	t.shared.AddHandler(func(old, cur PT) {
		obj := any(cur)
		if isNil(cur) {
			obj = old
		}
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			h(key)
		}
	})
}

func (t *typed[PT]) syncer() controller.Syncer { return t.shared }

// isNil reports whether a typed pointer is nil (the zero PT a Handler gets
// for adds and deletes).
func isNil[PT runtime.Object](p PT) bool {
	var zero PT
	return any(p) == any(zero)
}
