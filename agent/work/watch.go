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
// engine which Work an event concerns.
type watcher struct {
	ctx    context.Context
	client dynamic.Interface
	// changed is called with the Work named by a changed object's label;
	// synced with every resource whose informer finished its first list.
	changed func(work string)
	synced  func(schema.GroupVersionResource)

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]*informer
	wg        sync.WaitGroup
}

type informer struct {
	cache.SharedIndexInformer
	stop context.CancelFunc
}

func newWatcher(ctx context.Context, client dynamic.Interface, changed func(string), synced func(schema.GroupVersionResource)) *watcher {
	return &watcher{ctx: ctx, client: client, changed: changed, synced: synced,
		informers: map[schema.GroupVersionResource]*informer{}}
}

// ensure starts the informer of gvr unless it runs already.
func (w *watcher) ensure(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if inf, ok := w.informers[gvr]; ok {
		return inf
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(w.client, gvr, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = watchSelector }).Informer()
	// The handler cannot fail on an informer that has not started.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.onEvent,
		UpdateFunc: func(_, obj any) { w.onEvent(obj) },
		DeleteFunc: w.onEvent,
	})
	ctx, stop := context.WithCancel(w.ctx)
	w.informers[gvr] = &informer{SharedIndexInformer: inf, stop: stop}
	w.wg.Go(func() { inf.RunWithContext(ctx) })
	w.wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			w.synced(gvr)
		}
	})
	return inf
}

// retain stops the informers of the resources not in keep.
func (w *watcher) retain(keep map[schema.GroupVersionResource]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for gvr, inf := range w.informers {
		if !keep[gvr] {
			inf.stop()
			delete(w.informers, gvr)
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
	inf := w.ensure(ref.gvr())
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
