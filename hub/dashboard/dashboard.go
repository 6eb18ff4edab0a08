package dashboard

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/netlimit"
)

// Config is what the dashboard reads and how it reaches the hub's API.
type Config struct {
	Clusters        controller.Source[*v1alpha1.Cluster]
	Bindings        controller.Source[*v1alpha1.ResourceBinding]
	ClusterBindings controller.Source[*v1alpha1.ClusterResourceBinding]
	// Leases is the registry's in-memory view of renewals.
	Leases LeaseSource
	// ZoneModes returns each zone's partition protection mode.
	ZoneModes func() map[string]string
	// Kube is the hub's own client: TokenReview and SubjectAccessReview.
	Kube kubernetes.Interface
	// API is the hub's client configuration; actions use its address and
	// CA with the user's token instead of the hub's credentials.
	API *rest.Config
	// Settings are the thresholds the page shows leases against.
	Settings Settings
	// EvictionGrace is the hub's default graceful eviction timeout.
	EvictionGrace time.Duration
	// FlushInterval between batches of changes (default 250 ms).
	FlushInterval time.Duration
	// AuthTTL is how long an authentication or authorization answer is
	// reused (default 10 s).
	AuthTTL time.Duration
	Clock   clock.WithTicker
	Logger  *slog.Logger
}

// Dashboard serves the page and its event streams.
type Dashboard struct {
	cfg  Config
	auth *authCache
	// limitLog paces the log lines of limited sign-ins.
	limitLog *netlimit.Throttle

	dirtyClusters, dirtyBindings *keySet

	mu    sync.Mutex
	subs  map[*subscriber]struct{}
	zones map[string]string
}

// New builds the dashboard and adds its handlers to the informers: call it
// before they start, then Run.
func New(cfg Config) *Dashboard {
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 250 * time.Millisecond
	}
	if cfg.AuthTTL <= 0 {
		cfg.AuthTTL = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ZoneModes == nil {
		cfg.ZoneModes = func() map[string]string { return nil }
	}
	d := &Dashboard{
		cfg: cfg, auth: newAuthCache(cfg.Kube, cfg.AuthTTL, cfg.Clock), limitLog: netlimit.NewThrottle(10*time.Second, cfg.Clock),
		dirtyClusters: newKeySet(), dirtyBindings: newKeySet(),
		subs: map[*subscriber]struct{}{}, zones: map[string]string{},
	}
	cfg.Clusters.AddHandler(d.ClusterChanged)
	cfg.Bindings.AddHandler(d.BindingChanged)
	cfg.ClusterBindings.AddHandler(d.ClusterBindingChanged)
	return d
}

// ClusterChanged marks a cluster for the next batch (informer handler).
func (d *Dashboard) ClusterChanged(old, cur *v1alpha1.Cluster) {
	name := ""
	if cur != nil {
		name = cur.Name
	} else if old != nil {
		name = old.Name
	}
	d.dirtyClusters.add(name)
}

// BindingChanged marks a ResourceBinding for the next batch.
func (d *Dashboard) BindingChanged(old, cur *v1alpha1.ResourceBinding) {
	if cur == nil {
		cur = old
	}
	d.dirtyBindings.add(controller.KeyOf(cur))
}

// ClusterBindingChanged marks a ClusterResourceBinding for the next batch.
func (d *Dashboard) ClusterBindingChanged(old, cur *v1alpha1.ClusterResourceBinding) {
	if cur == nil {
		cur = old
	}
	d.dirtyBindings.add(controller.KeyOf(cur))
}

// Run sends batches of changes to the open streams every FlushInterval
// until ctx ends.
func (d *Dashboard) Run(ctx context.Context) {
	if d.cfg.Leases != nil {
		d.cfg.Leases.OnLeaseChange(d.dirtyClusters.add)
	}
	ticker := d.cfg.Clock.NewTicker(d.cfg.FlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			d.flush()
		}
	}
}

// flush builds the views of what changed and hands them to every stream.
func (d *Dashboard) flush() {
	clusters, bindings := d.dirtyClusters.take(), d.dirtyBindings.take()
	zones := d.cfg.ZoneModes()
	d.mu.Lock()
	zonesChanged := !maps.Equal(zones, d.zones)
	if zonesChanged {
		d.zones = maps.Clone(zones)
	}
	subs := make([]*subscriber, 0, len(d.subs))
	for s := range d.subs {
		subs = append(subs, s)
	}
	d.mu.Unlock()
	if len(subs) == 0 || len(clusters)+len(bindings) == 0 && !zonesChanged {
		return
	}
	now := d.cfg.Clock.Now()
	for name := range clusters {
		v, ok := d.clusterView(name)
		for _, s := range subs {
			if ok {
				s.clusters.put(name, v)
			} else {
				s.clusters.remove(name)
			}
		}
	}
	for key := range bindings {
		b, ok := controller.LookupBinding(d.cfg.Bindings, d.cfg.ClusterBindings, key)
		var v BindingView
		if ok {
			v = bindingView(b, d.zoneOf, d.cfg.EvictionGrace, now)
		}
		for _, s := range subs {
			if ok {
				s.bindings.put(key, v)
			} else {
				s.bindings.remove(key)
			}
		}
	}
	if zonesChanged {
		for _, s := range subs {
			s.setZones(zones)
		}
	}
}

func (d *Dashboard) clusterView(name string) (ClusterView, bool) {
	c := d.cfg.Clusters.Get(name)
	if c == nil {
		return ClusterView{}, false
	}
	var l Lease
	var ok bool
	if d.cfg.Leases != nil {
		l, ok = d.cfg.Leases.Lease(name)
	}
	return clusterView(c, l, ok), true
}

func (d *Dashboard) zoneOf(cluster string) string {
	if c := d.cfg.Clusters.Get(cluster); c != nil {
		return c.Spec.Zone
	}
	return ""
}

// snapshot is every cluster and binding now (bindings unfiltered).
func (d *Dashboard) snapshot() Snapshot {
	now := d.cfg.Clock.Now()
	snap := Snapshot{Now: millis(now), Settings: d.cfg.Settings, Zones: d.cfg.ZoneModes()}
	for _, c := range d.cfg.Clusters.List() {
		var l Lease
		var ok bool
		if d.cfg.Leases != nil {
			l, ok = d.cfg.Leases.Lease(c.Name)
		}
		snap.Clusters = append(snap.Clusters, clusterView(c, l, ok))
	}
	for _, rb := range d.cfg.Bindings.List() {
		snap.Bindings = append(snap.Bindings, bindingView(controller.Binding{RB: rb}, d.zoneOf, d.cfg.EvictionGrace, now))
	}
	for _, crb := range d.cfg.ClusterBindings.List() {
		snap.Bindings = append(snap.Bindings, bindingView(controller.Binding{CRB: crb}, d.zoneOf, d.cfg.EvictionGrace, now))
	}
	return snap
}

func (d *Dashboard) subscribe(s *subscriber) {
	d.mu.Lock()
	d.subs[s] = struct{}{}
	d.mu.Unlock()
}

func (d *Dashboard) unsubscribe(s *subscriber) {
	d.mu.Lock()
	delete(d.subs, s)
	d.mu.Unlock()
}
