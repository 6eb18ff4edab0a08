package templates

import (
	"context"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-io/flotilla/hub/controller"
)

// served is one resource as discovery reports it.
type served struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

func (s served) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: s.gvr.Group, Kind: s.kind}
}

// resource runs the dynamic informer of one resource and holds what its
// handlers were told: objs is exactly the state handlers have heard of
// (excluded objects left out), so Get never disagrees with them, and a
// resource that goes away can tell them of every object it still held.
type resource struct {
	served
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
	handlers     func() []controller.Handler[*unstructured.Unstructured]
	stop         context.CancelFunc
	done         chan struct{}

	mu   sync.RWMutex
	objs map[string]*unstructured.Unstructured // by namespace/name or name
	// live is false while a resource replacing another (a new preferred
	// version) fills: its changes reach handlers only once it takes over.
	live bool

	// deliver is held while handlers run, so that a takeover's changes and
	// the informer's own are not interleaved.
	deliver sync.Mutex
}

// newResource prepares the informer of s; start runs it.
func newResource(client dynamic.Interface, s served, live bool, handlers func() []controller.Handler[*unstructured.Unstructured], logger *slog.Logger) *resource {
	r := &resource{served: s, handlers: handlers, objs: map[string]*unstructured.Unstructured{}, live: live, done: make(chan struct{})}
	r.informer = dynamicinformer.NewFilteredDynamicInformer(client, s.gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	// The hub never reads managedFields, which are often the larger part
	// of a small object; a status write without them keeps the stored ones.
	_ = r.informer.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	gr := s.gvr.GroupResource().String()
	_ = r.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		// A resource whose CRD was just deleted fails until the next
		// discovery stops it; the reflector retries with backoff.
		logger.Debug("template watch failed; retrying", "resource", gr, "err", err)
	})
	r.registration, _ = r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.changed(obj, false) },
		UpdateFunc: func(_, obj any) { r.changed(obj, false) },
		DeleteFunc: func(obj any) { r.changed(obj, true) },
	})
	return r
}

// start runs the informer until ctx ends or stopAndWait is called.
func (r *resource) start(ctx context.Context) {
	ctx, r.stop = context.WithCancel(ctx)
	go func() {
		defer close(r.done)
		r.informer.RunWithContext(ctx)
	}()
}

// synced reports whether handlers have heard of the first list.
func (r *resource) synced() bool { return r.registration.HasSynced() }

// stopAndWait stops the informer and returns once no handler runs or will
// run for it; objs no longer changes after that.
func (r *resource) stopAndWait() {
	r.stop()
	<-r.done
}

// changed records an informer event and tells the handlers, if live. It
// runs on the informer's one delivery goroutine.
func (r *resource) changed(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || excludedObject(u) {
		return
	}
	key := controller.Key(u.GetNamespace(), u.GetName())
	r.mu.Lock()
	old := r.objs[key]
	var cur *unstructured.Unstructured
	if deleted {
		delete(r.objs, key)
	} else {
		cur = u
		r.objs[key] = u
	}
	live := r.live
	r.mu.Unlock()
	switch {
	case !live, old == nil && cur == nil:
		return
	case old != nil && cur != nil && old.GetResourceVersion() == cur.GetResourceVersion():
		return // a relist that changed nothing
	}
	r.deliver.Lock()
	defer r.deliver.Unlock()
	r.notify(old, cur)
}

func (r *resource) notify(old, cur *unstructured.Unstructured) {
	for _, h := range r.handlers() {
		h(old, cur)
	}
}

func (r *resource) get(key string) *unstructured.Unstructured {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.objs[key]
}

func (r *resource) list(out []*unstructured.Unstructured) []*unstructured.Unstructured {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, u := range r.objs {
		out = append(out, u)
	}
	return out
}

// snapshot copies objs.
func (r *resource) snapshot() map[string]*unstructured.Unstructured {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]*unstructured.Unstructured, len(r.objs))
	for k, u := range r.objs {
		out[k] = u
	}
	return out
}

// gone tells handlers that every object of a stopped resource is gone.
func (r *resource) gone() {
	r.deliver.Lock()
	defer r.deliver.Unlock()
	for _, u := range r.snapshot() {
		r.notify(u, nil)
	}
}

// takeOver makes r, filled while not live, replace old, which has stopped:
// handlers hear the difference (objects of both as updates, now in r's
// version) and from then on r's own changes.
func (r *resource) takeOver(old *resource) {
	r.deliver.Lock()
	defer r.deliver.Unlock()
	r.mu.Lock()
	cur := make(map[string]*unstructured.Unstructured, len(r.objs))
	for k, u := range r.objs {
		cur[k] = u
	}
	r.live = true
	r.mu.Unlock()
	before := old.snapshot()
	for k, was := range before {
		now := cur[k]
		if now == nil || now.GetResourceVersion() != was.GetResourceVersion() || now.GetAPIVersion() != was.GetAPIVersion() {
			r.notify(was, now)
		}
	}
	for k, now := range cur {
		if before[k] == nil {
			r.notify(nil, now)
		}
	}
}
