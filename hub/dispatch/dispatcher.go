// Package dispatch sends Works down the agents' QUIC connections and
// records what the agents report back. Each agent session has one work
// stream; on a new stream the agent's inventory says which generation of
// each Work it holds, and only what differs is sent, plus the deletions.
// Works of a disconnected cluster simply wait in the store.
package dispatch

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/objects"
)

// Dispatcher routes Work changes to the session of their cluster.
type Dispatcher struct {
	objs   *objects.Objects
	clock  clock.PassiveClock
	logger *slog.Logger
	works  *controller.Informer[v1alpha1.Work, *v1alpha1.Work]

	mu       sync.Mutex
	sessions map[string]*session // by cluster: the newest session

	upserts, deletes atomic.Int64
}

// Counts are what the dispatcher has sent since the hub started.
type Counts struct {
	Upserts, Deletes int64
}

// Counts returns what was sent so far.
func (d *Dispatcher) Counts() Counts {
	return Counts{Upserts: d.upserts.Load(), Deletes: d.deletes.Load()}
}

// New returns a dispatcher over objs; Run must be running for Serve to work.
func New(objs *objects.Objects, clk clock.PassiveClock, logger *slog.Logger) *Dispatcher {
	d := &Dispatcher{objs: objs, clock: clk, logger: logger.With("component", "dispatch"), sessions: map[string]*session{}}
	d.works = controller.NewInformer(objs.Works, nil, logger)
	d.works.AddHandler(func(old, cur *v1alpha1.Work) {
		w := cur
		if w == nil {
			w = old
		}
		cluster, ok := strings.CutPrefix(w.Namespace, v1alpha1.ExecutionNamespacePrefix)
		if !ok {
			return
		}
		d.mu.Lock()
		s := d.sessions[cluster]
		d.mu.Unlock()
		if s != nil {
			s.notify(w.Name)
		}
	})
	return d
}

// Run keeps the Work mirror current until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) { d.works.Run(ctx) }

// worksOf returns the Works of a cluster by name.
func (d *Dispatcher) worksOf(cluster string) map[string]*v1alpha1.Work {
	namespace := v1alpha1.ExecutionNamespace(cluster)
	out := map[string]*v1alpha1.Work{}
	for _, w := range d.works.List() {
		if w.Namespace == namespace {
			out[w.Name] = w
		}
	}
	return out
}

func (d *Dispatcher) attach(s *session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sessions[s.cluster] = s
}

func (d *Dispatcher) detach(s *session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions[s.cluster] == s {
		delete(d.sessions, s.cluster)
	}
}
