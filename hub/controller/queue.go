package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Backoff of a key whose reconcile failed.
const (
	retryBase = 5 * time.Millisecond
	retryMax  = 30 * time.Second
)

// DefaultWorkers is how many keys each of the hub's controllers reconciles
// at once unless told otherwise. A reconcile mostly waits for the API
// server's answer to its write: with 4, a failover's evictions queued
// while the hub's share of the cores sat partly idle, and 16 decided them
// twice as fast (docs/performance.md, "Controller workers").
const DefaultWorkers = 16

// Queue is a rate-limited queue of object keys with its worker loop, in
// the shape of kubernetes/sample-controller: Get, reconcile, then Forget
// on success or AddRateLimited on failure, and always Done.
type Queue struct {
	name      string
	queue     workqueue.TypedRateLimitingInterface[string]
	reconcile func(ctx context.Context, key string) error
	logger    *slog.Logger
}

// NewQueue returns a queue whose keys are handled by reconcile.
func NewQueue(name string, reconcile func(ctx context.Context, key string) error, logger *slog.Logger) *Queue {
	return NewQueueWithClock(name, reconcile, logger, clock.RealClock{})
}

// NewQueueWithClock is NewQueue whose AddAfter delays run on clk.
func NewQueueWithClock(name string, reconcile func(ctx context.Context, key string) error, logger *slog.Logger, clk clock.WithTicker) *Queue {
	// Per-key backoff only: client-go's default adds a global 10/s bucket,
	// which would throttle a burst of conflicts between controllers writing
	// the same bindings to a trickle.
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: clk})
	return &Queue{name: name, queue: q, reconcile: reconcile, logger: logger.With("controller", name)}
}

// Add queues key.
func (q *Queue) Add(key string) { q.queue.Add(key) }

// AddAfter queues key once d has passed: a controller that knows when its
// answer changes by time alone (a toleration running out) is woken then,
// without polling. A key already waiting keeps the earlier time.
func (q *Queue) AddAfter(key string, d time.Duration) { q.queue.AddAfter(key, d) }

// Len is the number of keys waiting.
func (q *Queue) Len() int { return q.queue.Len() }

// Run runs workers until ctx ends, then shuts the queue down.
func (q *Queue) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for q.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	q.queue.ShutDown()
	wg.Wait()
}

func (q *Queue) next(ctx context.Context) bool {
	key, shutdown := q.queue.Get()
	if shutdown {
		return false
	}
	defer q.queue.Done(key)
	if err := q.reconcile(ctx, key); err != nil {
		if ctx.Err() != nil {
			return false
		}
		q.logger.Warn("reconcile failed; retrying", "key", key, "err", err, "retries", q.queue.NumRequeues(key))
		q.queue.AddRateLimited(key)
		return true
	}
	q.queue.Forget(key)
	return true
}

// Recorder records events about objects (the hub's registry stores them
// in batches with the cluster events).
type Recorder interface {
	Event(ref corev1.ObjectReference, eventType, reason, message string)
}

// DiscardRecorder drops events, for tests that do not read them.
type DiscardRecorder struct{}

// Event implements Recorder.
func (DiscardRecorder) Event(corev1.ObjectReference, string, string, string) {}

// BindingRef names a ResourceBinding (or, without a namespace, a
// ClusterResourceBinding) in events.
func BindingRef(b metav1.Object) corev1.ObjectReference {
	kind := v1alpha1.KindResourceBinding
	if b.GetNamespace() == "" {
		kind = v1alpha1.KindClusterResourceBinding
	}
	return corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: kind, Namespace: b.GetNamespace(), Name: b.GetName(), UID: b.GetUID()}
}

// TemplateRef names a binding's resource template in events.
func TemplateRef(r v1alpha1.ObjectReference) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}
