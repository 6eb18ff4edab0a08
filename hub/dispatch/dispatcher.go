// Package dispatch sends Works down the agents' QUIC connections and
// records what the agents report back. Each agent session has one work
// stream; on a new stream the agent's inventory says which generation of
// each Work it holds, and only what differs is sent, plus the deletions.
// Works of a disconnected cluster simply wait in the API server.
//
// What the agents report goes on the Works through the status subresource.
// A deleted Work keeps its finalizer (v1alpha1.WorkFinalizer) until its
// agent confirms the objects are gone; a deleted Work of a Cluster that no
// longer exists loses it at once: nobody is left to confirm.
package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// Dispatcher routes Work changes to the session of their cluster.
type Dispatcher struct {
	clients  *kube.Clients
	recorder controller.Recorder
	logger   *slog.Logger
	works    *controller.Shared[*v1alpha1.Work]
	clusters controller.Source[*v1alpha1.Cluster]
	// released holds deleted clusters whose Works must lose their
	// finalizer.
	released *controller.Queue
	// writes runs the API writes the agents' reports cause.
	writes *statusWrites

	mu       sync.Mutex
	sessions map[string]*session // by cluster: the newest session
	// paces are the clusters' status limiters, kept across their sessions
	// until the Cluster goes.
	paces map[string]statusLimiter

	clock            clock.PassiveClock
	upserts, deletes atomic.Int64
	// observeLatency, if set, is told how long each Work change waited
	// from the informer's notification to being written on its agent's
	// stream, by operation (upsert, delete).
	observeLatency atomic.Pointer[func(op string, d time.Duration)]
	limits         limitCounters
	// allowWrite, if set, says whether the store takes agent-driven
	// writes now (store.Guard).
	allowWrite atomic.Pointer[func() bool]
}

// SetStoreGate makes the dispatcher drop the agents' status reports (not
// their answers to what it sent) while allow says the store is too full.
// A hub replica sets it when it starts to lead (its store guard runs
// there), while its dispatcher already serves.
func (d *Dispatcher) SetStoreGate(allow func() bool) { d.allowWrite.Store(&allow) }

// storeFull says whether the store gate refuses agent-driven writes now.
func (d *Dispatcher) storeFull() bool {
	allow := d.allowWrite.Load()
	return allow != nil && !(*allow)()
}

// SetLatencyObserver sets what is told each Work change's dispatch
// latency. A hub replica sets it when it starts to lead, while its
// dispatcher already serves.
func (d *Dispatcher) SetLatencyObserver(fn func(op string, d time.Duration)) {
	d.observeLatency.Store(&fn)
}

// Counts are what the dispatcher has sent since the hub started.
type Counts struct {
	Upserts, Deletes int64
}

// Counts returns what was sent so far.
func (d *Dispatcher) Counts() Counts {
	return Counts{Upserts: d.upserts.Load(), Deletes: d.deletes.Load()}
}

// New returns a dispatcher that reads Works and Clusters from informers
// and writes Works through clients. It adds its handlers to the shared
// informers; Run must be running for Serve to work. The clock times
// dispatch latencies only: the agent's reports carry no times the hub
// stamps.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, clk clock.PassiveClock, logger *slog.Logger) *Dispatcher {
	d := &Dispatcher{clients: clients, recorder: recorder, clock: clk, logger: logger.With("component", "dispatch"),
		works: informers.Works, clusters: informers.Clusters, sessions: map[string]*session{}, paces: map[string]statusLimiter{},
		writes: newStatusWrites(logger)}
	d.released = controller.NewQueue("dispatch-released", d.release, logger)
	d.works.AddHandler(func(old, cur *v1alpha1.Work) {
		w := controller.Subject(old, cur)
		cluster, ok := strings.CutPrefix(w.Namespace, v1alpha1.ExecutionNamespacePrefix)
		if !ok {
			return
		}
		if cur != nil && cur.DeletionTimestamp != nil && slices.Contains(cur.Finalizers, v1alpha1.WorkFinalizer) && d.revoked(cluster) {
			d.released.Add(cluster) // deleted after its cluster: nobody will confirm
		}
		// Only a new generation or a deletion is sent: what the agent
		// reported (status) or an annotation changes nothing for it.
		if old != nil && cur != nil && old.Generation == cur.Generation && (old.DeletionTimestamp == nil) == (cur.DeletionTimestamp == nil) {
			return
		}
		d.mu.Lock()
		s := d.sessions[cluster]
		d.mu.Unlock()
		if s != nil {
			s.notify(w.Name)
		}
	})
	d.clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		if cur == nil || cur.DeletionTimestamp != nil {
			d.released.Add(controller.Subject(old, cur).Name)
		}
		if cur == nil {
			d.mu.Lock()
			delete(d.paces, controller.Subject(old, cur).Name)
			d.mu.Unlock()
		}
	})
	return d
}

// revoked reports whether cluster's agent can never confirm a deletion
// again: its Cluster is gone or being deleted (both revoke its
// certificates).
func (d *Dispatcher) revoked(cluster string) bool {
	cl := d.clusters.Get(cluster)
	return cl == nil || cl.DeletionTimestamp != nil
}

// Run waits for the informers the dispatcher reads, then stores what the
// agents report and releases the Works of deleted clusters, until ctx
// ends.
func (d *Dispatcher) Run(ctx context.Context) {
	if !controller.StartAndSync(ctx, d.works, d.clusters) {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { d.writes.run(ctx, controller.DefaultWorkers) })
	d.released.Run(ctx, 1)
	wg.Wait()
}

// release removes the finalizer from every Work being deleted of a
// cluster that no longer exists or is being deleted: no agent will come
// back to confirm, so
// they go at once. A Work of such a cluster deleted later is released as
// soon as the informer reports its deletion (New's handler). Live Works
// keep their finalizer, which the binding controller would only put back.
func (d *Dispatcher) release(ctx context.Context, cluster string) error {
	if !d.revoked(cluster) {
		return nil // it exists (again): its agent confirms
	}
	for _, w := range d.works.ByIndex(cache.NamespaceIndex, v1alpha1.ExecutionNamespace(cluster)) {
		if w.DeletionTimestamp == nil || !slices.Contains(w.Finalizers, v1alpha1.WorkFinalizer) {
			continue
		}
		w = w.DeepCopy()
		w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == v1alpha1.WorkFinalizer })
		_, err := d.clients.Flotilla.FlotillaV1alpha1().Works(w.Namespace).Update(ctx, w, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil: // a Conflict is retried once the informer has caught up
			return fmt.Errorf("remove the finalizer of Work %s/%s: %w", w.Namespace, w.Name, err)
		}
		d.logger.Info("cluster deleted: its Work goes without waiting for the agent", "cluster", cluster, "work", w.Name)
	}
	return nil
}

// worksOf returns the Works of a cluster by name.
func (d *Dispatcher) worksOf(cluster string) map[string]*v1alpha1.Work {
	out := map[string]*v1alpha1.Work{}
	for _, w := range d.works.ByIndex(cache.NamespaceIndex, v1alpha1.ExecutionNamespace(cluster)) {
		out[w.Name] = w
	}
	return out
}

// paceOf returns cluster's status limiter, new for a cluster it has not
// seen. There is one per Cluster that has had a session (each needs a
// valid agent certificate), so the map is bounded by the fleet.
func (d *Dispatcher) paceOf(cluster string) statusLimiter {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.paces[cluster]
	if !ok {
		l = newStatusLimiter()
		d.paces[cluster] = l
	}
	return l
}

// attach makes s the session its cluster's Works go to, unless a newer
// session has it: then it returns that session's seq, else 0. A replaced
// session may get here after its replacement (both wait for the informer
// when the hub starts); were it attached, the replacement would get
// nothing, and its detach would leave the cluster with no session at all.
func (d *Dispatcher) attach(s *session) (newer uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.sessions[s.cluster]; cur != nil && cur.seq > s.seq {
		return cur.seq
	}
	d.sessions[s.cluster] = s
	return 0
}

func (d *Dispatcher) detach(s *session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions[s.cluster] == s {
		delete(d.sessions, s.cluster)
	}
}
