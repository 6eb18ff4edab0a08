package status

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/hub/controller"
)

// object is a pointer to an API object.
type object interface {
	comparable
	metav1.Object
}

// writes holds objects as the controller last wrote them, by key, until
// the informer has them: a reconcile that follows a write closely builds
// on that write, not on the older version in the informer, which would
// only conflict.
type writes[PT object] struct {
	mu   sync.Mutex
	objs map[string]PT
}

func newWrites[PT object]() *writes[PT] { return &writes[PT]{objs: map[string]PT{}} }

// latest returns the newer of cached (the informer's version, or nil) and
// the controller's last write of key. A newer generation in the informer
// is another controller's spec write after it; another version at the same
// generation is taken to be older (if it is not, the next write conflicts,
// which forgets the controller's version). Callers must not modify it.
func (w *writes[PT]) latest(key string, cached PT) PT {
	var zero PT
	w.mu.Lock()
	defer w.mu.Unlock()
	mine, ok := w.objs[key]
	switch {
	case !ok:
	case cached == zero || cached.GetGeneration() < mine.GetGeneration() ||
		cached.GetGeneration() == mine.GetGeneration() && cached.GetResourceVersion() != mine.GetResourceVersion():
		return mine
	default:
		delete(w.objs, key)
	}
	return cached
}

// wrote remembers what a write of key returned, or forgets key if the
// write failed.
func (w *writes[PT]) wrote(key string, obj PT, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		delete(w.objs, key)
		return
	}
	w.objs[key] = obj
}

// caughtUp is an informer handler: it forgets a written object once the
// informer has that version, or has seen the object deleted. key names
// objects as the controller's keys do.
func (w *writes[PT]) caughtUp(key func(PT) string) controller.Handler[PT] {
	return func(old, cur PT) {
		var zero PT
		subject := cur
		if cur == zero {
			subject = old
		}
		k := key(subject)
		w.mu.Lock()
		defer w.mu.Unlock()
		if mine, ok := w.objs[k]; ok && (cur == zero || mine.GetResourceVersion() == cur.GetResourceVersion()) {
			delete(w.objs, k)
		}
	}
}
