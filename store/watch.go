package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// EventType says what happened to an object.
type EventType string

// Event types, as in Kubernetes watches.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	// Error ends a watch; Err says why (Gone when the start revision was compacted).
	Error EventType = "ERROR"
)

// Event is one change seen by a watch.
type Event[PT any] struct {
	Type EventType
	// Object is the object after the change, or its last state for Deleted.
	Object PT
	// Revision is the store revision of the change.
	Revision int64
	Err      error
}

const watchBuffer = 64

// Watch streams changes in a namespace ("" for all) after fromRevision,
// usually the revision of a List. fromRevision 0 starts with an Added event
// for every current object.
//
// The watch keeps going across etcd reconnects, resuming after the last
// revision it delivered. If that revision has been compacted meanwhile, it
// relists and delivers the difference (Added, Modified, Deleted) against
// what it had delivered, so the consumer's view stays exact. If fromRevision
// itself is compacted before the watch starts, the only event is an Error
// with a Gone (410) error: list again. The channel closes when ctx ends.
func (r *Resource[T, PT]) Watch(ctx context.Context, namespace string, fromRevision int64) <-chan Event[PT] {
	out := make(chan Event[PT], watchBuffer)
	go func() {
		defer close(out)
		w := &watcher[T, PT]{r: r, namespace: namespace, out: out, known: map[string]PT{}}
		if err := w.run(ctx, fromRevision); err != nil && ctx.Err() == nil {
			w.send(ctx, Event[PT]{Type: Error, Err: err})
		}
	}()
	return out
}

// watcher is the state of one Watch, owned by its goroutine.
type watcher[T any, PT Object[T]] struct {
	r         *Resource[T, PT]
	namespace string
	out       chan<- Event[PT]
	// known is what the consumer has been told exists, by key.
	known    map[string]PT
	revision int64
	resume   <-chan struct{} // set while paused by a test
}

var errPaused = errors.New("paused")

func (w *watcher[T, PT]) run(ctx context.Context, fromRevision int64) error {
	if fromRevision == 0 {
		if err := w.resync(ctx); err != nil {
			return err
		}
	} else if err := w.loadKnown(ctx, fromRevision); err != nil {
		return err
	}
	retry := retryMin
	for ctx.Err() == nil {
		started := time.Now()
		err := w.follow(ctx)
		if time.Since(started) > retryReset {
			retry = retryMin
		}
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			w.r.store.logger.Warn("store: watch fell behind compaction, relisting", "resource", w.r.kind.Resource, "revision", w.revision)
			if err := w.resync(ctx); err != nil {
				w.r.store.logger.Warn("store: relist failed, retrying", "resource", w.r.kind.Resource, "retryIn", retry, "err", err)
				retry = w.wait(ctx, retry)
			}
		case errors.Is(err, errPaused):
			select {
			case <-w.resume:
			case <-ctx.Done():
			}
		case err != nil:
			w.r.store.logger.Warn("store: watch interrupted, resuming", "resource", w.r.kind.Resource, "revision", w.revision, "retryIn", retry, "err", err)
			retry = w.wait(ctx, retry)
		}
	}
	return nil
}

// Retry pacing of a broken watch: doubling from retryMin to retryMax, back
// to retryMin after a watch that lasted retryReset.
const (
	retryMin   = 100 * time.Millisecond
	retryMax   = 5 * time.Second
	retryReset = 10 * time.Second
)

// wait sleeps for d or until ctx ends, and returns the next delay.
func (w *watcher[T, PT]) wait(ctx context.Context, d time.Duration) time.Duration {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return min(2*d, retryMax)
}

// loadKnown reads the objects as of fromRevision, so a later compaction can
// be reconciled against them.
func (w *watcher[T, PT]) loadKnown(ctx context.Context, fromRevision int64) error {
	resp, err := w.r.store.client.Get(ctx, w.r.prefixFor(w.namespace), clientv3.WithPrefix(), clientv3.WithRev(fromRevision))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return apierrors.NewResourceExpired(fmt.Sprintf("watch %s from revision %d: compacted, list again", w.r.kind.Resource, fromRevision))
	}
	if err != nil {
		return fmt.Errorf("watch %s from revision %d: %w", w.r.kind.Resource, fromRevision, err)
	}
	for _, kv := range resp.Kvs {
		obj, err := w.r.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return err
		}
		w.known[string(kv.Key)] = obj
	}
	w.revision = fromRevision
	return nil
}

// follow streams etcd events until the watch breaks. It returns the error
// that ended it, nil when ctx ended.
func (w *watcher[T, PT]) follow(ctx context.Context) error {
	watchCtx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := w.r.store.client.Watch(watchCtx, w.r.prefixFor(w.namespace),
		clientv3.WithPrefix(), clientv3.WithRev(w.revision+1), clientv3.WithPrevKV())
	for {
		select {
		case <-ctx.Done():
			return nil
		case w.resume = <-w.r.pause:
			return errPaused
		case resp, ok := <-events:
			if !ok {
				return errors.New("etcd watch channel closed")
			}
			if err := resp.Err(); err != nil {
				return err
			}
			for _, ev := range resp.Events {
				if err := w.deliver(ctx, ev); err != nil {
					return err
				}
			}
			// Only whole responses count as seen: one transaction's events
			// share a revision, and a failure must resume before all of them.
			if n := len(resp.Events); n > 0 {
				w.revision = resp.Events[n-1].Kv.ModRevision
			}
		}
	}
}

// deliver passes one etcd event on.
func (w *watcher[T, PT]) deliver(ctx context.Context, ev *clientv3.Event) error {
	key := string(ev.Kv.Key)
	if ev.Type == mvccpb.DELETE {
		last, ok := w.known[key]
		if !ok && ev.PrevKv != nil {
			var err error
			if last, err = w.r.decode(ev.PrevKv.Value, ev.PrevKv.ModRevision); err != nil {
				return err
			}
		}
		delete(w.known, key)
		w.send(ctx, Event[PT]{Type: Deleted, Object: last, Revision: ev.Kv.ModRevision})
		return nil
	}
	obj, err := w.r.decode(ev.Kv.Value, ev.Kv.ModRevision)
	if err != nil {
		return err
	}
	kind := Modified
	if _, ok := w.known[key]; !ok {
		kind = Added
	}
	w.known[key] = obj
	w.send(ctx, Event[PT]{Type: kind, Object: obj, Revision: ev.Kv.ModRevision})
	return nil
}

// resync lists the current objects and delivers the difference from what
// the consumer knows.
func (w *watcher[T, PT]) resync(ctx context.Context) error {
	resp, err := w.r.store.client.Get(ctx, w.r.prefixFor(w.namespace), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("watch %s: relist: %w", w.r.kind.Resource, err)
	}
	rev := resp.Header.Revision
	current := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		current[key] = true
		old, seen := w.known[key]
		if seen && old.GetResourceVersion() == fmt.Sprint(kv.ModRevision) {
			continue
		}
		obj, err := w.r.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return err
		}
		kind := Added
		if seen {
			kind = Modified
		}
		w.known[key] = obj
		w.send(ctx, Event[PT]{Type: kind, Object: obj, Revision: rev})
	}
	for key, last := range w.known {
		if !current[key] {
			delete(w.known, key)
			w.send(ctx, Event[PT]{Type: Deleted, Object: last, Revision: rev})
		}
	}
	w.revision = rev
	return nil
}

func (w *watcher[T, PT]) send(ctx context.Context, ev Event[PT]) {
	select {
	case w.out <- ev:
	case <-ctx.Done():
	}
}
