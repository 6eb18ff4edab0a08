package work

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// watchSelector limits the informers to objects the agent applied for a
// Work, so their caches hold nothing else.
const watchSelector = LabelManagedBy + "=" + ManagedBy + "," + LabelWork

// watcher runs one informer per resource the Works use, started the first
// time it is needed and stopped when no Work uses the resource any more (a
// watch on a deleted CRD's resource would fail forever), and tells the
// engine which Work an event concerns. With perNamespace, namespaced
// resources get one informer per namespace instead of one across the
// cluster, so the agent needs no cluster-wide list and watch of them.
type watcher struct {
	ctx          context.Context
	client       dynamic.Interface
	perNamespace bool
	// changed is called with the Work named by a changed object's label;
	// synced with every resource whose informer finished its first list.
	changed func(work string)
	synced  func(schema.GroupVersionResource)

	mu        sync.Mutex
	informers map[watchKey]*informer
	wg        sync.WaitGroup
}

// watchKey names one informer: a resource, in one namespace or ("") all.
type watchKey struct {
	gvr       schema.GroupVersionResource
	namespace string
}

// key is the informer that watches ref's object.
func (w *watcher) key(ref objectRef) watchKey {
	if w.perNamespace && ref.Namespace != "" {
		return watchKey{gvr: ref.gvr(), namespace: ref.Namespace}
	}
	return watchKey{gvr: ref.gvr()}
}

type informer struct {
	cache.SharedIndexInformer
	stop context.CancelFunc
}

func newWatcher(ctx context.Context, client dynamic.Interface, perNamespace bool, changed func(string), synced func(schema.GroupVersionResource)) *watcher {
	return &watcher{ctx: ctx, client: client, perNamespace: perNamespace, changed: changed, synced: synced,
		informers: map[watchKey]*informer{}}
}

// ensure starts the informer that watches ref's object unless it runs
// already.
func (w *watcher) ensure(ref objectRef) cache.SharedIndexInformer {
	key := w.key(ref)
	w.mu.Lock()
	defer w.mu.Unlock()
	if inf, ok := w.informers[key]; ok {
		return inf
	}
	gvr := key.gvr
	inf := dynamicinformer.NewFilteredDynamicInformer(w.client, gvr, key.namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = watchSelector }).Informer()
	// The handler cannot fail on an informer that has not started.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.onEvent,
		UpdateFunc: func(_, obj any) { w.onEvent(obj) },
		DeleteFunc: w.onEvent,
	})
	ctx, stop := context.WithCancel(w.ctx)
	w.informers[key] = &informer{SharedIndexInformer: inf, stop: stop}
	w.wg.Go(func() { inf.RunWithContext(ctx) })
	w.wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			w.synced(gvr)
		}
	})
	return inf
}

// retain stops the informers not in keep.
func (w *watcher) retain(keep map[watchKey]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, inf := range w.informers {
		if !keep[key] {
			inf.stop()
			delete(w.informers, key)
		}
	}
}

func (w *watcher) onEvent(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if work := u.GetLabels()[LabelWork]; work != "" {
			w.changed(work)
		}
	}
}

// get returns the cached object of ref, nil if the cache has none; synced
// says whether the cache has been filled yet. Callers must not modify the
// object.
func (w *watcher) get(ref objectRef) (obj *unstructured.Unstructured, synced bool) {
	inf := w.ensure(ref)
	synced = inf.HasSynced() // before the lookup, so a synced miss is a real one
	key := ref.Name
	if ref.Namespace != "" {
		key = ref.Namespace + "/" + ref.Name
	}
	item, exists, err := inf.GetStore().GetByKey(key)
	if err != nil || !exists {
		return nil, synced
	}
	u, _ := item.(*unstructured.Unstructured)
	return u, synced
}

// wait waits for the informers to stop; the watcher's context must have
// ended.
func (w *watcher) wait() { w.wg.Wait() }
