// Package controller holds the parts every hub controller shares: the
// clients of the hub's API server, its shared informers seen as Sources,
// the loop that drains a rate-limited work queue of object keys, and the
// event recorder.
package controller

import "context"

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

// Syncer is a Source as StartAndSync sees it.
type Syncer interface {
	Run(ctx context.Context)
	Synced() <-chan struct{}
}

// StartAndSync runs every source and waits until all hold their first
// list, so no reconcile mistakes "not listed yet" for "gone". It returns
// false if ctx ended first.
func StartAndSync(ctx context.Context, sources ...Syncer) bool {
	for _, s := range sources {
		go s.Run(ctx)
	}
	for _, s := range sources {
		select {
		case <-s.Synced():
		case <-ctx.Done():
			return false
		}
	}
	return true
}
