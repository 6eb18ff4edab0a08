package dashboard

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// keepAlive is how often an idle stream gets a comment, so that proxies
// keep it open and the page notices a dead hub.
const keepAlive = 15 * time.Second

// subscriber is one open stream: the changes not sent yet, latest per
// object, so that a slow browser never holds up the others.
type subscriber struct {
	clusters *coalescer[ClusterView]
	bindings *coalescer[BindingView]

	mu    sync.Mutex
	zones map[string]string // nil: unchanged since the last send
	wake  chan struct{}
}

func newSubscriber() *subscriber {
	return &subscriber{clusters: newCoalescer[ClusterView](), bindings: newCoalescer[BindingView](), wake: make(chan struct{}, 1)}
}

func (s *subscriber) setZones(z map[string]string) {
	s.mu.Lock()
	s.zones = maps.Clone(z)
	if s.zones == nil {
		s.zones = map[string]string{}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// delta takes what is pending; visible filters bindings by namespace.
func (s *subscriber) delta(now int64, visible func(namespace string) bool) (Delta, bool) {
	d := Delta{Now: now}
	clusters, removed := s.clusters.take()
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		d.Clusters = append(d.Clusters, clusters[name])
	}
	d.RemovedClusters = removed
	bindings, gone := s.bindings.take()
	for _, key := range slices.Sorted(maps.Keys(bindings)) {
		if b := bindings[key]; visible(b.Namespace) {
			d.Bindings = append(d.Bindings, b)
		}
	}
	d.RemovedBindings = gone // names only: nothing to hide
	s.mu.Lock()
	d.Zones, s.zones = s.zones, nil
	s.mu.Unlock()
	return d, len(d.Clusters)+len(d.RemovedClusters)+len(d.Bindings)+len(d.RemovedBindings) > 0 || d.Zones != nil
}

// stream serves GET /dashboard/api/stream: a snapshot, then deltas, until
// the request's context ends.
func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request, u *user) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming not supported by this connection", http.StatusInternalServerError)
		return
	}
	ctx := r.Context()
	visible, err := d.namespaceFilter(ctx, u)
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	s := newSubscriber()
	// Subscribed before the snapshot is read: a change in between is sent
	// again, never lost (every delta carries whole objects).
	d.subscribe(s)
	defer d.unsubscribe(s)
	snap := d.snapshot()
	all := snap.Bindings
	snap.Bindings = snap.Bindings[:0:0]
	for _, b := range all {
		if visible.can(ctx, b.Namespace) {
			snap.Bindings = append(snap.Bindings, b)
		}
	}
	snap.BindingsLimited = !visible.all || !visible.clusterB
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var id uint64
	if err := writeJSONEvent(w, "snapshot", id, snap); err != nil {
		return
	}
	flusher.Flush()
	ping := d.cfg.Clock.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C():
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		case <-s.clusters.Ready():
		case <-s.bindings.Ready():
		case <-s.wake:
		}
		delta, any := s.delta(millis(d.cfg.Clock.Now()), func(ns string) bool { return visible.can(ctx, ns) })
		if any {
			id++
			if err := writeJSONEvent(w, "delta", id, delta); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

// namespaces says which bindings a user may see: all, if it may list
// ResourceBindings everywhere; else those of the namespaces where it may
// (asked once per namespace, then cached). ClusterResourceBindings need
// list on them.
type namespaces struct {
	d        *Dashboard
	u        *user
	all      bool
	clusterB bool
}

func (d *Dashboard) namespaceFilter(ctx context.Context, u *user) (*namespaces, error) {
	all, err := d.auth.allowed(ctx, u.token, u.id, Access{Verb: "list", Group: "flotilla.io", Resource: "resourcebindings"})
	if err != nil {
		return nil, err
	}
	clusterB, err := d.auth.allowed(ctx, u.token, u.id, Access{Verb: "list", Group: "flotilla.io", Resource: "clusterresourcebindings"})
	if err != nil {
		return nil, err
	}
	return &namespaces{d: d, u: u, all: all, clusterB: clusterB}, nil
}

func (n *namespaces) can(ctx context.Context, namespace string) bool {
	if namespace == "" {
		return n.clusterB
	}
	if n.all {
		return true
	}
	ok, err := n.d.auth.allowed(ctx, n.u.token, n.u.id, Access{Verb: "list", Group: "flotilla.io", Resource: "resourcebindings", Namespace: namespace})
	if err != nil && !errors.Is(err, context.Canceled) {
		n.d.cfg.Logger.Warn("dashboard: access review failed; binding hidden", "user", n.u.id.User, "namespace", namespace, "err", err)
	}
	return ok && err == nil
}
