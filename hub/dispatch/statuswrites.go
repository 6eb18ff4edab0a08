package dispatch

import (
	"context"
	"log/slog"
	"sync"

	"github.com/flotilla-io/flotilla/hub/controller"
)

// statusWrites runs the API writes that agents' reports cause (a Work's
// status, a deleted Work's finalizer) off the sessions' loops, several at
// once, in order per Work. A session's loop hands a write over and goes
// back to reading its stream: were it to wait for the API server, a busy
// API server (a failover of a thousand Works) would stop the hub reading
// the agent's stream, and the agent, unable to write, would drop a healthy
// connection.
//
// What waits is bounded by what the sessions hand over, however slow the
// API server: one answer per Work generation sent, and reports, which
// replace the Work's report still waiting, as the newest report says all
// an older one did.
type statusWrites struct {
	queue *controller.Queue

	mu      sync.Mutex
	pending map[string][]statusWrite // by Work key, in the order handed over
}

type statusWrite struct {
	write  func(context.Context)
	report bool // a report, which a newer one replaces
}

func newStatusWrites(logger *slog.Logger) *statusWrites {
	w := &statusWrites{pending: map[string][]statusWrite{}}
	w.queue = controller.NewQueue("dispatch-status", w.runKey, logger)
	return w
}

// add queues write for the Work key, after the writes of that Work
// already queued; a report replaces the last one queued if nothing was
// queued after it.
func (w *statusWrites) add(key string, write func(context.Context), report bool) {
	w.mu.Lock()
	queued := w.pending[key]
	if n := len(queued); report && n > 0 && queued[n-1].report {
		queued[n-1].write = write
	} else {
		w.pending[key] = append(queued, statusWrite{write: write, report: report})
	}
	w.mu.Unlock()
	w.queue.Add(key)
}

// run writes with workers goroutines until ctx ends; the queue gives a
// key to one worker at a time, which keeps each Work's writes in order.
// What is still queued then is dropped: the agents report again to the
// next leader.
func (w *statusWrites) run(ctx context.Context, workers int) { w.queue.Run(ctx, workers) }

// runKey runs the queued writes of one Work. Each write handles its own
// errors (a status write logs what it could not store): there is nothing
// to retry here.
func (w *statusWrites) runKey(ctx context.Context, key string) error {
	w.mu.Lock()
	writes := w.pending[key]
	delete(w.pending, key)
	w.mu.Unlock()
	for _, queued := range writes {
		if ctx.Err() != nil {
			return nil
		}
		queued.write(ctx)
	}
	return nil
}
