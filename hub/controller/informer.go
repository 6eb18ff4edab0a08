// Package controller holds the parts every hub controller shares: an
// informer that mirrors one store kind in memory from List and Watch, and
// the loop that drains a rate-limited work queue of object keys.
package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/flotilla-io/flotilla/store"
)

// Key names an object: "namespace/name", or "name" when cluster-scoped.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Subject is the object a handler call is about: cur, or old when the
// object was deleted.
func Subject[PT comparable](old, cur PT) PT {
	var zero PT
	if cur != zero {
		return cur
	}
	return old
}

// Handler hears of every change: old is nil for an add, cur is nil for a
// delete. It runs on the informer's goroutine and must not block.
type Handler[PT any] func(old, cur PT)

// Informer mirrors one kind of the store in memory.
type Informer[T any, PT store.Object[T]] struct {
	resource *store.Resource[T, PT]
	keyOf    func(PT) string
	logger   *slog.Logger
	handlers []Handler[PT]

	mu     sync.RWMutex
	items  map[string]PT
	synced chan struct{}
}

// NewInformer mirrors resource (all namespaces). keyOf names objects; nil
// means Key(namespace, name), which fits every kind but mixed templates.
func NewInformer[T any, PT store.Object[T]](resource *store.Resource[T, PT], keyOf func(PT) string, logger *slog.Logger) *Informer[T, PT] {
	if keyOf == nil {
		keyOf = func(obj PT) string { return Key(obj.GetNamespace(), obj.GetName()) }
	}
	return &Informer[T, PT]{resource: resource, keyOf: keyOf, logger: logger, items: map[string]PT{}, synced: make(chan struct{})}
}

// AddHandler registers h; call before Run.
func (i *Informer[T, PT]) AddHandler(h Handler[PT]) { i.handlers = append(i.handlers, h) }

// Synced is closed once the first list is in memory.
func (i *Informer[T, PT]) Synced() <-chan struct{} { return i.synced }

// Get returns the object with key, or nil. Callers must not modify it.
func (i *Informer[T, PT]) Get(key string) PT {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.items[key]
}

// List returns every object. Callers must not modify them.
func (i *Informer[T, PT]) List() []PT {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := make([]PT, 0, len(i.items))
	for _, obj := range i.items {
		out = append(out, obj)
	}
	return out
}

// relistDelay spaces relists after a watch ends with an error.
const relistDelay = time.Second

// Run watches until ctx ends. Watch from revision 0 delivers every current
// object as Added; a watch that fails (its start was compacted) starts over
// and tells handlers the difference.
func (i *Informer[T, PT]) Run(ctx context.Context) {
	var syncOnce sync.Once
	for ctx.Err() == nil {
		rev, err := i.relist(ctx)
		if err != nil {
			if ctx.Err() == nil {
				i.logger.Error("informer list", "err", err)
			}
		} else {
			syncOnce.Do(func() { close(i.synced) })
			i.follow(ctx, rev)
		}
		if !wait(ctx, relistDelay) {
			return
		}
	}
}

// relist replaces the mirror with a fresh list, telling handlers the
// difference, and returns the list's revision.
func (i *Informer[T, PT]) relist(ctx context.Context) (int64, error) {
	items, rev, err := i.resource.List(ctx, "")
	if err != nil {
		return 0, err
	}
	seen := make(map[string]bool, len(items))
	for _, obj := range items {
		key := i.keyOf(obj)
		seen[key] = true
		i.set(key, obj)
	}
	i.mu.RLock()
	var gone []string
	for key := range i.items {
		if !seen[key] {
			gone = append(gone, key)
		}
	}
	i.mu.RUnlock()
	for _, key := range gone {
		i.remove(key)
	}
	return rev, nil
}

// follow applies watch events after rev until the watch fails or ctx ends.
func (i *Informer[T, PT]) follow(ctx context.Context, rev int64) {
	ctx, cancel := context.WithCancel(ctx) // ends the watch when follow returns early
	defer cancel()
	for ev := range i.resource.Watch(ctx, "", rev) {
		switch ev.Type {
		case store.Error:
			i.logger.Warn("informer watch ended; relisting", "err", ev.Err)
			return
		case store.Deleted:
			if ev.Object == nil { // the watch had no last state: relist
				return
			}
			i.remove(i.keyOf(ev.Object))
		default:
			i.set(i.keyOf(ev.Object), ev.Object)
		}
	}
}

func (i *Informer[T, PT]) set(key string, obj PT) {
	i.mu.Lock()
	old := i.items[key]
	if old != nil && old.GetResourceVersion() == obj.GetResourceVersion() {
		i.mu.Unlock()
		return
	}
	i.items[key] = obj
	i.mu.Unlock()
	for _, h := range i.handlers {
		h(old, obj)
	}
}

func (i *Informer[T, PT]) remove(key string) {
	i.mu.Lock()
	old, ok := i.items[key]
	delete(i.items, key)
	i.mu.Unlock()
	if ok {
		for _, h := range i.handlers {
			h(old, nil)
		}
	}
}

func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Syncer is an informer as StartAndSync sees it.
type Syncer interface {
	Run(ctx context.Context)
	Synced() <-chan struct{}
}

// StartAndSync runs every informer and waits until all hold their first
// list, so no reconcile mistakes "not listed yet" for "gone". It returns
// false if ctx ended first.
func StartAndSync(ctx context.Context, informers ...Syncer) bool {
	for _, inf := range informers {
		go inf.Run(ctx)
	}
	for _, inf := range informers {
		select {
		case <-inf.Synced():
		case <-ctx.Done():
			return false
		}
	}
	return true
}
