// Package failover runs the failover pipeline's decisions on the hub: the
// taint manager (evict a binding from a cluster whose NoExecute taints it
// does not tolerate, or tolerates no longer), partition protection (each
// zone admits failed clusters to eviction at a rate, and every binding of
// an admitted cluster goes at once; nothing evicted when every cluster
// looks down; admission.go) and
// graceful eviction (end a task once the replacement is healthy or its
// grace period is over, never before a replacement is scheduled). The
// rules are the pure eviction package's; this package feeds it from the
// hub's shared informers, writes the outcome on the binding and wakes
// exactly when an answer changes by time alone. An eviction whose policy
// has statePreservation rules records the workload's state in the
// cluster it leaves, read from the status the agent last reported
// (state.go).
//
// Decisions are spec changes (spec.clusters, spec.gracefulEvictionTasks,
// spec.rescheduleTriggeredAt), written with Update; the failback clusters
// are status, written through the status subresource, so neither write
// can overwrite the scheduler's or the status controller's fields. An
// eviction write that conflicts only with another controller's status
// write (the status controller's aggregated status, every few seconds
// during a rollout) is written again over the latest version at once:
// the generation and the status fields failover decides on are checked
// unchanged first. Any other conflict goes back to the queue. The one
// write on Clusters is the admission record, a merge patch of one
// annotation.
package failover

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/aggregate"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/internal/kube"
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
		Zones:                        eviction.DefaultZoneConfig(),
	}
}

// Controller evicts bindings from failed clusters and ends their eviction
// tasks.
type Controller struct {
	api             controller.BindingAPI
	recorder        controller.Recorder
	clock           clock.WithTicker
	logger          *slog.Logger
	cfg             Config
	clusters        controller.Source[*v1alpha1.Cluster]
	bindings        controller.Source[*v1alpha1.ResourceBinding]
	clusterBindings controller.Source[*v1alpha1.ClusterResourceBinding]
	works           controller.Source[*v1alpha1.Work]
	queue           *controller.Queue
	// admissions syncs each cluster's admission record (admission.go),
	// by cluster name.
	admissions    *controller.Queue
	clusterClient flotillav1alpha1.ClusterInterface

	mu    sync.Mutex
	zones *eviction.Zones // guarded by mu
	fleet fleetCounts     // guarded by mu
	// unhealthySince is, per binding key and cluster, since when the
	// workload has been unhealthy there (application failover); guarded
	// by mu.
	unhealthySince map[string]map[string]time.Time
	// clusterTimes and bindingTimes are when this hub first saw the
	// stored times that decide, so that none is taken as earlier than it
	// was (instants.go).
	clusterTimes, bindingTimes *instants
	// decided, when set (tests), is told each reconcile's stored
	// decisions and the time they were made at.
	decided func(key string, at time.Time, evicted []eviction.Eviction, ended []endedTask)
	// backOffs are application failover's, per binding and cluster.
	backOffs backOffs
	// waiting, when set (tests), is told each wake-up asked for: the
	// binding key and when.
	waiting func(key string, at time.Time)

	evictions, tasksEnded atomic.Int64
	observer              Observer
	// place, when set, is the scheduler's placement (placement.go).
	place controller.Placer
	// kube reads a cluster's Lease: when the hub last heard from an
	// unreachable cluster whose state an eviction preserves.
	kube kubernetes.Interface
	// held are the evictions zone rates hold back (guarded by mu).
	held map[string]map[string]heldEviction // by binding key, then cluster
	// deferred are the evictions PreferNoExecute taints ask for that wait
	// for a healthy cluster with room, with why (guarded by mu).
	deferred map[string]map[string]string // by binding key, then cluster
	synced   atomic.Bool                  // cluster events count once every informer has listed
}

// New returns a failover controller that reads clusters, bindings and
// Works from the shared informers and writes bindings through clients. It
// adds its handlers to the informers; Run starts it.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, clk clock.WithTicker, logger *slog.Logger, cfg Config) *Controller {
	c := &Controller{api: controller.BindingAPI{Client: clients.Flotilla.FlotillaV1alpha1()}, recorder: recorder, clock: clk, logger: logger.With("controller", "failover"),
		cfg: cfg, zones: eviction.NewZones(cfg.Zones), fleet: newFleetCounts(), unhealthySince: map[string]map[string]time.Time{}, held: map[string]map[string]heldEviction{}, deferred: map[string]map[string]string{}, clusterTimes: newInstants(), bindingTimes: newInstants(),
		clusters: informers.Clusters, bindings: informers.Bindings, clusterBindings: informers.ClusterBindings, works: informers.Works}
	c.kube = clients.Kube
	c.clusterClient = clients.Flotilla.FlotillaV1alpha1().Clusters()
	c.admissions = controller.NewQueueWithClock("failover-admission", c.syncAdmission, logger, clk)
	c.queue = controller.NewQueueWithClock("failover", c.reconcile, logger, clk) // the queue names the controller
	// Status changes matter too: a task ends when the replacement reports
	// healthy.
	c.bindings.AddHandler(func(old, cur *v1alpha1.ResourceBinding) {
		b := controller.Subject(old, cur)
		key := controller.Key(b.Namespace, b.Name)
		if cur == nil {
			c.bindingSeen(key, nil, nil)
			return
		}
		c.bindingSeen(key, &cur.Spec, &cur.Status)
		c.queue.Add(key)
	})
	c.clusterBindings.AddHandler(func(old, cur *v1alpha1.ClusterResourceBinding) {
		if cur == nil {
			c.bindingSeen(old.Name, nil, nil)
			return
		}
		c.bindingSeen(cur.Name, &cur.Spec, &cur.Status)
		c.queue.Add(cur.Name)
	})
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
	c.restoreAdmissions()
	c.synced.Store(true)
	c.requeueAll() // cluster changes seen while listing were not acted on
	go c.admissions.Run(ctx, 1)
	c.queue.Run(ctx, workers)
}

// clusterChanged re-evaluates the zones and the bindings on the cluster
// when its health or taints changed.
func (c *Controller) clusterChanged(old, cur *v1alpha1.Cluster) {
	c.clusterSeen(old, cur) // from the first list on: a restarted hub sees every time late
	c.countCluster(old, cur)
	c.forgetRecovered(old, cur)
	if c.synced.Load() {
		c.requeueDeferred(old, cur)
	}
	// Run observes every zone once the informers have listed; a partial
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
	b, ok := controller.LookupBinding(c.bindings, c.clusterBindings, key)
	if !ok {
		c.forget(key)
		return nil
	}
	return c.reconcileBinding(ctx, key, b, c.workOf(key, b.Object().GetName()))
}

// forget drops what is kept in memory about a deleted binding.
func (c *Controller) forget(key string) {
	c.mu.Lock()
	delete(c.unhealthySince, key)
	c.forgetHeldLocked(key)
	delete(c.deferred, key)
	c.mu.Unlock()
	c.backOffs.forget(key)
	c.bindingSeen(key, nil, nil)
}

// workOf returns a binding's Work in a cluster, from the informer.
func (c *Controller) workOf(key, name string) func(cluster string) *v1alpha1.Work {
	workName := names.WorkName(key, name)
	return func(cluster string) *v1alpha1.Work {
		return c.works.Get(controller.Key(v1alpha1.ExecutionNamespace(cluster), workName))
	}
}

// reconcileBinding evicts the binding (read from the informer) from the
// clusters it must leave and ends the tasks that are over, writes that and
// the failback clusters, then asks to be woken when the next decision is
// due.
func (c *Controller) reconcileBinding(ctx context.Context, key string, read controller.Binding, workOf func(string) *v1alpha1.Work) error {
	now := c.clock.Now()
	var wake wakeup
	want := read.DeepCopy()
	spec, status := want.Spec(), want.Status()
	// Judge the replacement on the Works as they are now: the binding's
	// stored aggregated status may still describe the placement before.
	current := *status
	current.AggregatedStatus = aggregate.Items(spec, workOf, func(cluster string) bool {
		cl := c.clusters.Get(cluster)
		return cl != nil && aggregate.Reachable(cl)
	})
	tolerations := c.tolerations(spec)
	stamped := c.stampTasks(key, spec, now)
	j := &judgement{key: key, read: read.Object(), spec: spec, status: &current, now: now, wake: &wake, workOf: workOf}
	ended := c.endTasks(j, tolerations)
	evicted, deferred := c.dueEvictions(key, spec, status, tolerations, now, &wake)
	for _, d := range deferred {
		c.announceDeferred(read.Object(), spec, d)
	}
	evicted = append(evicted, c.applicationFailures(j, evicted)...)
	stateWarnings := c.preserveState(ctx, spec, current.AggregatedStatus, evicted, now)
	for _, e := range evicted {
		eviction.Evict(spec, e, now)
	}
	failedBack := c.failback(spec, status, evicted, now, &wake)
	if len(evicted) > 0 {
		c.placeReplacement(key, read.Object(), spec, status)
	}
	if stamped || len(ended) > 0 || len(evicted) > 0 || len(failedBack) > 0 ||
		!equality.Semantic.DeepEqual(read.Status().FailbackClusters, status.FailbackClusters) {
		// Every spec change makes a new generation, which the scheduler
		// observes before tasks judge its replacement.
		start := c.clock.Now()
		stored, err := c.store(ctx, key, read, want)
		if len(evicted) > 0 && c.observer.EvictionProcessed != nil {
			c.observer.EvictionProcessed(key, c.clock.Since(start), err)
		}
		if err != nil {
			return fmt.Errorf("store failover decisions for %s: %w", key, err)
		}
		c.record(stored.Object(), spec, evicted, ended, failedBack)
		c.warnStateNotPreserved(stored.Object(), spec, stateWarnings)
		c.observeDecisions(c.evictionRecords(evicted), ended)
		if c.decided != nil {
			c.decided(key, now, evicted, ended)
		}
		c.backOffs.evicted(key, evicted, now, stored.Object().GetGeneration())
	}
	// The wake is an instant: time it from now, not from the start of
	// this reconcile (a fake clock may have moved since, and the queue
	// adds the delay to its clock's time when it is called).
	if d, ok := wake.after(c.clock.Now()); ok {
		c.queue.AddAfter(key, d)
		if c.waiting != nil {
			c.waiting(key, wake.t)
		}
	}
	return nil
}

// judgement is one reconcile of a binding, as the decisions about its
// tasks and its application failures see it.
type judgement struct {
	key  string
	read metav1.Object // the binding as read from the informer
	// spec is the copy of the binding's spec the decisions change.
	spec *v1alpha1.ResourceBindingSpec
	// status is what they are judged on: the binding's status with the
	// aggregated status of its Works as they are now.
	status *v1alpha1.ResourceBindingStatus
	now    time.Time
	wake   *wakeup // the earliest instant a decision is due
	// workOf is the binding's Work in a cluster, from the informer.
	workOf func(cluster string) *v1alpha1.Work
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
