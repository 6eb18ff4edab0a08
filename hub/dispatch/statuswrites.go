package dispatch

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// statusWrites runs the API writes that agents' reports cause (a Work's
// status, a deleted Work's finalizer) off the sessions' loops, several at
// once, in order per Work. A session's loop hands a write over and goes
// back to reading its stream: were it to wait for the API server, a busy
// API server (a failover of a thousand Works) would stop the hub reading
// the agent's stream, and the agent, unable to write, would drop a healthy
// connection.
//
// What waits is bounded by what the sessions hand over: one answer per
// Work generation sent, and reports paced and coalesced per Work.
type statusWrites struct {
	queue workqueue.TypedInterface[string]

	mu      sync.Mutex
	pending map[string][]func(context.Context) // by Work key, in the order handed over
}

func newStatusWrites() *statusWrites {
	return &statusWrites{queue: workqueue.NewTyped[string](), pending: map[string][]func(context.Context){}}
}

// add queues write for the Work key, after the writes of that Work
// already queued.
func (w *statusWrites) add(key string, write func(context.Context)) {
	w.mu.Lock()
	w.pending[key] = append(w.pending[key], write)
	w.mu.Unlock()
	w.queue.Add(key)
}

// run writes with workers goroutines until ctx ends; the workqueue gives a
// key to one worker at a time, which keeps each Work's writes in order.
// What is still queued then is dropped: the agents report again to the
// next leader.
func (w *statusWrites) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
}

// next runs the queued writes of one Work; false once the queue is shut
// down.
func (w *statusWrites) next(ctx context.Context) bool {
	key, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(key)
	w.mu.Lock()
	writes := w.pending[key]
	delete(w.pending, key)
	w.mu.Unlock()
	for _, write := range writes {
		if ctx.Err() != nil {
			return true
		}
		write(ctx)
	}
	return true
}
