package controllertest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// StatusWriter writes bindings' aggregated status as busily as the status
// controller during a rollout: read, set its own field, UpdateStatus,
// retried on conflict, every binding at once, round after round. It stops
// between writes.
type StatusWriter struct {
	stopping  chan struct{}
	stopOnce  sync.Once
	rounds    chan int64
	completed atomic.Int64
	wg        sync.WaitGroup

	mu        sync.Mutex
	last      map[string]string // name: the last stored value
	conflicts int
}

// StartStatusWriter starts writing, as round N, an aggregated status of
// cluster with the applied message "round N" into each of the bindings
// names, and returns once every binding has one. It stops at the end of
// the test, if StopAfterNextRound did not stop it before.
func StartStatusWriter(t *testing.T, bindings flotillav1alpha1.ResourceBindingInterface, cluster string, names []string) *StatusWriter {
	t.Helper()
	w := &StatusWriter{stopping: make(chan struct{}), rounds: make(chan int64, 1000), last: map[string]string{}}
	ctx := t.Context()
	write := func(name, value string) {
		for !w.stopped() {
			b, err := bindings.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return
			}
			b.Status.AggregatedStatus = []v1alpha1.AggregatedStatusItem{{ClusterName: cluster, Applied: true, Health: v1alpha1.HealthHealthy, AppliedMessage: value}}
			_, err = bindings.UpdateStatus(ctx, b, metav1.UpdateOptions{})
			w.mu.Lock()
			switch {
			case apierrors.IsConflict(err):
				w.conflicts++
			case err == nil:
				w.last[name] = value
			}
			w.mu.Unlock()
			if !apierrors.IsConflict(err) {
				return
			}
		}
	}
	w.wg.Go(func() {
		for round := 0; !w.stopped(); round++ {
			var all sync.WaitGroup
			for _, name := range names {
				all.Go(func() { write(name, fmt.Sprintf("round %d", round)) })
			}
			all.Wait()
			w.completed.Store(int64(round))
			select {
			case w.rounds <- int64(round):
			case <-w.stopping:
			}
		}
	})
	t.Cleanup(w.stop)
	<-w.rounds // every binding has an aggregated status
	return w
}

func (w *StatusWriter) stopped() bool {
	select {
	case <-w.stopping:
		return true
	default:
		return false
	}
}

func (w *StatusWriter) stop() {
	w.stopOnce.Do(func() { close(w.stopping) })
	w.wg.Wait()
}

// StopAfterNextRound waits for one more full round, begun after the call,
// then stops the writer.
func (w *StatusWriter) StopAfterNextRound() {
	after := w.completed.Load() + 1
	for round := range w.rounds {
		if round >= after {
			break
		}
	}
	w.stop()
}

// Last is the last value stored into the binding name.
func (w *StatusWriter) Last(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[name]
}

// Conflicts is how many of the writer's writes conflicted.
func (w *StatusWriter) Conflicts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conflicts
}
