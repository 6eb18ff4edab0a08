// Package failover runs the failover pipeline's decisions on the hub: the
// taint manager (evict a binding from a cluster whose NoExecute taints it
// does not tolerate, or tolerates no longer), partition protection (rate
// limits per zone, nothing evicted when every cluster looks down) and
// graceful eviction (end a task once the replacement is healthy or its
// grace period is over, never before a replacement is scheduled). The
// rules are the pure eviction package's; this package feeds it from the
// store's mirrors, stores the outcome on the binding and wakes exactly
// when an answer changes by time alone.
package failover

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/binding"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/objects"
	hubstatus "github.com/flotilla-io/flotilla/hub/status"
	"github.com/flotilla-io/flotilla/store"
)

// Config holds the failover settings (hub flags).
type Config struct {
	// DefaultNotReadyToleration and DefaultUnreachableToleration are given
	// to placements without their own NoExecute toleration of those taints.
	DefaultNotReadyToleration, DefaultUnreachableToleration time.Duration
	// GracefulEvictionTimeout ends a task without its own grace period once
	// a replacement is scheduled, healthy or not.
	GracefulEvictionTimeout time.Duration
	// Zones are the partition protection settings.
	Zones eviction.ZoneConfig
}

// DefaultConfig is the design's defaults.
func DefaultConfig() Config {
	return Config{
		DefaultNotReadyToleration:    300 * time.Second,
		DefaultUnreachableToleration: 300 * time.Second,
		GracefulEvictionTimeout:      10 * time.Minute,
		Zones:                        eviction.ZoneConfig{Rate: 0.5, SecondaryRate: 0.01, LargeZoneThreshold: 50, UnhealthyThreshold: 0.55},
	}
}

// Controller evicts bindings from failed clusters and ends their eviction
// tasks.
type Controller struct {
	objs            *objects.Objects
	recorder        controller.Recorder
	clock           clock.WithTicker
	logger          *slog.Logger
	cfg             Config
	clusters        controller.Source[*v1alpha1.Cluster]
	bindings        *controller.Informer[v1alpha1.ResourceBinding, *v1alpha1.ResourceBinding]
	clusterBindings *controller.Informer[v1alpha1.ClusterResourceBinding, *v1alpha1.ClusterResourceBinding]
	works           *controller.Informer[v1alpha1.Work, *v1alpha1.Work]
	queue           *controller.Queue

	mu    sync.Mutex
	zones *eviction.Zones // guarded by mu
	// unhealthySince is, per binding key and cluster, since when the
	// workload has been unhealthy there (application failover); guarded
	// by mu.
	unhealthySince map[string]map[string]time.Time

	evictions, tasksEnded atomic.Int64
	synced                atomic.Bool // cluster events count once every mirror is listed
}

// New returns a failover controller over objs; clusters is the hub's
// shared cluster informer.
func New(objs *objects.Objects, clusters controller.Source[*v1alpha1.Cluster], recorder controller.Recorder, clk clock.WithTicker, cfg Config, logger *slog.Logger) *Controller {
	c := &Controller{objs: objs, recorder: recorder, clock: clk, logger: logger.With("controller", "failover"), cfg: cfg, zones: eviction.NewZones(cfg.Zones),
		unhealthySince: map[string]map[string]time.Time{}}
	c.clusters = clusters
	c.bindings = controller.NewInformer(objs.Bindings, nil, logger)
	c.clusterBindings = controller.NewInformer(objs.ClusterBindings, nil, logger)
	c.queue = controller.NewQueueWithClock("failover", c.reconcile, logger, clk) // the queue names the controller
	// Status changes matter too: a task ends when the replacement reports
	// healthy.
	c.bindings.AddHandler(func(_, cur *v1alpha1.ResourceBinding) {
		if cur != nil {
			c.queue.Add(controller.Key(cur.Namespace, cur.Name))
		}
	})
	c.clusterBindings.AddHandler(func(_, cur *v1alpha1.ClusterResourceBinding) {
		if cur != nil {
			c.queue.Add(cur.Name)
		}
	})
	c.works = controller.NewInformer(objs.Works, nil, logger)
	// A Work's status is where a replacement turns healthy.
	c.works.AddHandler(func(old, cur *v1alpha1.Work) {
		if owner := controller.Subject(old, cur).Annotations[v1alpha1.AnnotationWorkBinding]; owner != "" {
			c.queue.Add(owner)
		}
	})
	c.clusters.AddHandler(c.clusterChanged)
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	// Deciding before every cluster is listed would see a zone as smaller
	// (or more broken) than it is.
	if !controller.StartAndSync(ctx, c.clusters, c.bindings, c.clusterBindings, c.works) {
		return
	}
	c.mu.Lock()
	// A restarted hub does not know whether the fleet just came back from
	// an isolation: tolerations count from its start at the earliest.
	c.zones.RestartGrace(c.clock.Now())
	c.mu.Unlock()
	c.observeZones()
	c.synced.Store(true)
	c.requeueAll() // cluster changes seen while listing were not acted on
	c.queue.Run(ctx, workers)
}

// clusterChanged re-evaluates the zones and the bindings on the cluster
// when its health or taints changed.
func (c *Controller) clusterChanged(old, cur *v1alpha1.Cluster) {
	// Run observes every zone once the mirrors are complete; a partial
	// list would see zones smaller or more broken than they are.
	if !c.synced.Load() || old != nil && cur != nil && !healthChanged(old, cur) {
		return
	}
	name := controller.Subject(old, cur).Name
	if c.observeZones() {
		c.requeueAll()
		return
	}
	c.requeueOn(name)
}

func healthChanged(old, cur *v1alpha1.Cluster) bool {
	return !equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) || old.Spec.Zone != cur.Spec.Zone || ready(old) != ready(cur)
}

func ready(c *v1alpha1.Cluster) bool {
	return meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ClusterConditionReady)
}

func (c *Controller) requeueAll() {
	for _, b := range c.bindings.List() {
		c.queue.Add(controller.Key(b.Namespace, b.Name))
	}
	for _, b := range c.clusterBindings.List() {
		c.queue.Add(b.Name)
	}
}

// requeueOn queues the bindings placed on, or being evicted from, cluster.
func (c *Controller) requeueOn(cluster string) {
	for _, b := range c.bindings.List() {
		if involves(&b.Spec, &b.Status, cluster) {
			c.queue.Add(controller.Key(b.Namespace, b.Name))
		}
	}
	for _, b := range c.clusterBindings.List() {
		if involves(&b.Spec, &b.Status, cluster) {
			c.queue.Add(b.Name)
		}
	}
}

func involves(spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, cluster string) bool {
	// A cluster the binding may fail back to: its return matters.
	for _, f := range status.FailbackClusters {
		if f.Name == cluster {
			return true
		}
	}
	for _, tc := range spec.Clusters {
		if tc.Name == cluster {
			return true
		}
	}
	for _, task := range spec.GracefulEvictionTasks {
		if task.FromCluster == cluster {
			return true
		}
	}
	return false
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	if strings.Contains(key, "/") {
		b := c.bindings.Get(key)
		if b == nil {
			c.forget(key)
			return nil
		}
		b = b.DeepCopy()
		return reconcileBinding(ctx, c, c.objs.Bindings, b, key, &b.Spec, &b.Status, c.workOf(key, b.Name))
	}
	b := c.clusterBindings.Get(key)
	if b == nil {
		c.forget(key)
		return nil
	}
	b = b.DeepCopy()
	return reconcileBinding(ctx, c, c.objs.ClusterBindings, b, key, &b.Spec, &b.Status, c.workOf(key, b.Name))
}

// forget drops what is kept in memory about a deleted binding.
func (c *Controller) forget(key string) {
	c.mu.Lock()
	delete(c.unhealthySince, key)
	c.mu.Unlock()
}

// workOf returns a binding's Work in a cluster, from the mirror.
func (c *Controller) workOf(key, name string) func(cluster string) *v1alpha1.Work {
	workName := binding.WorkName(key, name)
	return func(cluster string) *v1alpha1.Work {
		return c.works.Get(controller.Key(v1alpha1.ExecutionNamespace(cluster), workName))
	}
}

// reconcileBinding evicts obj (a copy from the mirror, whose spec and
// status are given) from the clusters it must leave and ends the tasks
// that are over, in one store update, then asks to be woken when the next
// decision is due.
func reconcileBinding[T any, PT store.Object[T]](ctx context.Context, c *Controller, r *store.Resource[T, PT], obj PT,
	key string, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, workOf func(string) *v1alpha1.Work) error {
	now := c.clock.Now()
	var wake wakeup
	// Judge the replacement on the Works as they are now: the binding's
	// stored aggregated status may still describe the placement before.
	current := *status
	current.AggregatedStatus = hubstatus.Aggregate(spec, workOf, func(cluster string) bool {
		cl := c.clusters.Get(cluster)
		return cl != nil && hubstatus.Reachable(cl)
	})
	tolerations := c.tolerations(spec)
	ended := c.endTasks(key, obj.GetGeneration(), spec, &current, tolerations, now, &wake)
	evicted := c.dueEvictions(spec, tolerations, now, &wake)
	evicted = append(evicted, c.applicationFailures(key, spec, current.AggregatedStatus, evicted, now, &wake)...)
	for _, e := range evicted {
		eviction.Evict(spec, e, now)
	}
	failedBack, failbackChanged := c.failback(spec, status, evicted, now, &wake)
	if len(ended) > 0 || len(evicted) > 0 || failbackChanged {
		if len(evicted) > 0 || slices.ContainsFunc(ended, func(t endedTask) bool { return t.cancelled }) {
			// A new generation tells the scheduler to place the replicas
			// again, and tasks wait until it has.
			obj.SetGeneration(obj.GetGeneration() + 1)
		}
		if _, err := r.Update(ctx, obj); err != nil {
			return fmt.Errorf("store failover decisions for %s: %w", key, err)
		}
		c.record(obj, spec, evicted, ended, failedBack)
	}
	if d, ok := wake.after(now); ok {
		c.queue.AddAfter(key, d)
	}
	return nil
}

// wakeup is the earliest instant a decision is due.
type wakeup struct{ t time.Time }

func (w *wakeup) at(t time.Time) {
	if !t.IsZero() && (w.t.IsZero() || t.Before(w.t)) {
		w.t = t
	}
}

// after is how long from now until the wakeup, if there is one. A
// deadline already passed (clock steps) wakes at once.
func (w *wakeup) after(now time.Time) (time.Duration, bool) {
	if w.t.IsZero() {
		return 0, false
	}
	return max(w.t.Sub(now), 0), true
}
