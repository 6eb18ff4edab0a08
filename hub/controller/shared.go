package controller

import (
	"context"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// Source is one kind held in memory for a controller: Get and List read
// it, handlers hear of every change, and StartAndSync waits for the first
// list. Informer (over the store) and Shared (over a client-go shared
// informer) are Sources.
type Source[PT any] interface {
	Syncer
	Get(key string) PT
	List() []PT
	AddHandler(h Handler[PT])
}

// Shared is a client-go shared informer seen as a Source: many
// controllers share one watch per kind. Its factory runs it; Run only
// waits for the first list.
type Shared[PT any] struct {
	informer cache.SharedIndexInformer
	synced   chan struct{}
	once     sync.Once

	mu       sync.Mutex
	handlers []cache.ResourceEventHandlerRegistration // guarded by mu
}

// NewShared wraps informer; objects in it must be PT.
func NewShared[PT any](informer cache.SharedIndexInformer) *Shared[PT] {
	return &Shared[PT]{informer: informer, synced: make(chan struct{})}
}

// Run closes Synced once the informer has listed and every handler added
// so far has been handed the listed objects, or returns when ctx ends.
// Every controller reading the informer calls it (through StartAndSync).
func (s *Shared[PT]) Run(ctx context.Context) {
	s.mu.Lock()
	synced := []cache.InformerSynced{s.informer.HasSynced}
	for _, reg := range s.handlers {
		synced = append(synced, reg.HasSynced)
	}
	s.mu.Unlock()
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		s.once.Do(func() { close(s.synced) })
	}
}

// Synced is closed once the first list is in memory and has reached the
// handlers (a controller that counts from its handler sees every object).
func (s *Shared[PT]) Synced() <-chan struct{} { return s.synced }

// Get returns the object with key (namespace/name, or name), or the zero
// PT. Callers must not modify it.
func (s *Shared[PT]) Get(key string) PT {
	obj, ok, err := s.informer.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		var zero PT
		return zero
	}
	return obj.(PT)
}

// List returns every object. Callers must not modify them.
func (s *Shared[PT]) List() []PT {
	items := s.informer.GetIndexer().List()
	out := make([]PT, 0, len(items))
	for _, obj := range items {
		out = append(out, obj.(PT))
	}
	return out
}

// ByIndex returns the objects whose index name has value (see the
// indexers NewInformers adds). Callers must not modify them.
func (s *Shared[PT]) ByIndex(name, value string) []PT {
	items, err := s.informer.GetIndexer().ByIndex(name, value)
	if err != nil {
		return nil
	}
	out := make([]PT, 0, len(items))
	for _, obj := range items {
		out = append(out, obj.(PT))
	}
	return out
}

// Informer is the client-go informer underneath.
func (s *Shared[PT]) Informer() cache.SharedIndexInformer { return s.informer }

// AddHandler registers h for adds (old is zero), updates and deletes (cur
// is zero); a delete whose final state was missed reports the last known
// object. Resyncs that change nothing are not reported.
func (s *Shared[PT]) AddHandler(h Handler[PT]) {
	var zero PT
	reg, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cur, ok := obj.(PT); ok {
				h(zero, cur)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(PT)
			cur, ok2 := newObj.(PT)
			if ok1 && ok2 && resourceVersion(old) != resourceVersion(cur) {
				h(old, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if old, ok := obj.(PT); ok {
				h(old, zero)
			}
		},
	})
	if err != nil {
		return // the informer has stopped: nothing more will be delivered
	}
	s.mu.Lock()
	s.handlers = append(s.handlers, reg)
	s.mu.Unlock()
}

func resourceVersion(obj any) string {
	if o, ok := obj.(interface{ GetResourceVersion() string }); ok {
		return o.GetResourceVersion()
	}
	return ""
}
