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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

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
	clusters        *controller.Informer[v1alpha1.Cluster, *v1alpha1.Cluster]
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
}

// New returns a failover controller over objs.
func New(objs *objects.Objects, recorder controller.Recorder, clk clock.WithTicker, cfg Config, logger *slog.Logger) *Controller {
	logger = logger.With("controller", "failover")
	c := &Controller{objs: objs, recorder: recorder, clock: clk, logger: logger, cfg: cfg, zones: eviction.NewZones(cfg.Zones),
		unhealthySince: map[string]map[string]time.Time{}}
	c.clusters = controller.NewInformer(objs.Clusters, nil, logger)
	c.bindings = controller.NewInformer(objs.Bindings, nil, logger)
	c.clusterBindings = controller.NewInformer(objs.ClusterBindings, nil, logger)
	c.queue = controller.NewQueueWithClock("failover", c.reconcile, logger, clk)
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
		if owner := pick(old, cur).Annotations[v1alpha1.AnnotationWorkBinding]; owner != "" {
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
	c.observeZones()
	c.queue.Run(ctx, workers)
}

// Stats are the controller's counters and each zone's mode, for /debug/stats.
type Stats struct {
	Evictions  int64             `json:"evictions"`
	TasksEnded int64             `json:"evictionTasksEnded"`
	ZoneModes  map[string]string `json:"zoneModes"`
}

// Stats returns the counters and zone modes ("default" is the zone of
// clusters without spec.zone).
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	modes := c.zones.Modes()
	c.mu.Unlock()
	out := Stats{Evictions: c.evictions.Load(), TasksEnded: c.tasksEnded.Load(), ZoneModes: map[string]string{}}
	for zone, mode := range modes {
		out.ZoneModes[zoneName(zone)] = string(mode)
	}
	return out
}

// clusterChanged re-evaluates the zones and the bindings on the cluster
// when its health or taints changed.
func (c *Controller) clusterChanged(old, cur *v1alpha1.Cluster) {
	if old != nil && cur != nil && !healthChanged(old, cur) {
		return
	}
	name := pick(old, cur).Name
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

// observeZones recomputes the zones' modes, records the changes and
// reports whether there were any.
func (c *Controller) observeZones() bool {
	list := c.clusters.List()
	health := make([]eviction.ClusterHealth, len(list))
	for i, cl := range list {
		health[i] = eviction.ClusterHealth{Name: cl.Name, Zone: cl.Spec.Zone, Ready: ready(cl)}
	}
	c.mu.Lock()
	changes := c.zones.Observe(health, c.clock.Now())
	c.mu.Unlock()
	for _, ch := range changes {
		c.logger.Info("zone mode changed", "zone", zoneName(ch.Zone), "from", ch.From, "to", ch.To, "notReady", ch.NotReady, "clusters", ch.Total)
		if ch.To == "" || ch.From == "" && ch.To == eviction.ModeNormal {
			continue // a zone gone, or a new one that is fine: nothing to tell
		}
		eventType, message := corev1.EventTypeNormal, fmt.Sprintf("zone %s: %s (%d of %d clusters not Ready)", zoneName(ch.Zone), ch.To, ch.NotReady, ch.Total)
		switch ch.To {
		case eviction.ModePartialDisruption:
			eventType, message = corev1.EventTypeWarning, message+"; evictions slowed"
		case eviction.ModeIsolated:
			eventType, message = corev1.EventTypeWarning, message+"; every cluster looks down, so the hub assumes it is the one cut off and evicts nothing"
		}
		c.recorder.Event(corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: "Zone", Name: zoneName(ch.Zone)}, eventType, "ZoneMode"+string(ch.To), message)
	}
	return len(changes) > 0
}

func zoneName(zone string) string {
	if zone == "" {
		return "default"
	}
	return zone
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
		if involves(&b.Spec, cluster) {
			c.queue.Add(controller.Key(b.Namespace, b.Name))
		}
	}
	for _, b := range c.clusterBindings.List() {
		if involves(&b.Spec, cluster) {
			c.queue.Add(b.Name)
		}
	}
}

func involves(spec *v1alpha1.ResourceBindingSpec, cluster string) bool {
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

func pick[PT comparable](old, cur PT) PT {
	var zero PT
	if cur != zero {
		return cur
	}
	return old
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
	current.AggregatedStatus = hubstatus.Aggregate(spec, workOf)
	tolerations := c.tolerations(spec)
	ended := c.endTasks(obj.GetGeneration(), spec, &current, tolerations, now, &wake)
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

// endedTask is a task that is over, and why. A cancelled one gave its
// cluster back: it recovered before any replacement could be scheduled.
type endedTask struct {
	task      v1alpha1.GracefulEvictionTask
	reason    string
	cancelled bool
}

// reasonRecovered ends a task whose cluster recovered before the binding
// found a replacement: the workload stays where it runs.
const reasonRecovered = "ClusterRecovered"

// endTasks removes the tasks that are over from spec and returns them.
func (c *Controller) endTasks(generation int64, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus,
	tolerations []corev1.Toleration, now time.Time, wake *wakeup) []endedTask {
	var ended []endedTask
	kept := spec.GracefulEvictionTasks[:0:0]
	for i := range spec.GracefulEvictionTasks {
		task := spec.GracefulEvictionTasks[i]
		v := eviction.Assess(&task, generation, spec, status, c.cfg.GracefulEvictionTimeout, now)
		switch {
		case v.Done:
			ended = append(ended, endedTask{task: task, reason: v.Reason})
			continue
		case v.NoReplacement && task.Producer == eviction.ProducerTaintManager && c.recovered(task.FromCluster, tolerations, now):
			ended = append(ended, endedTask{task: task, reason: reasonRecovered, cancelled: true})
			giveBack(spec, &task)
			continue
		}
		wake.at(v.Recheck)
		kept = append(kept, task)
	}
	if len(ended) > 0 {
		spec.GracefulEvictionTasks = kept
	}
	return ended
}

// recovered reports whether a cluster is Ready and its taints no longer
// call for an eviction.
func (c *Controller) recovered(cluster string, tolerations []corev1.Toleration, now time.Time) bool {
	cl := c.clusters.Get(cluster)
	if cl == nil || !ready(cl) {
		return false
	}
	c.mu.Lock()
	since := c.zones.GraceStart()
	c.mu.Unlock()
	return !eviction.Decide(cl.Spec.Taints, tolerations, since, now).Evict
}

// giveBack puts the task's cluster back into spec.clusters with the
// replicas it had.
func giveBack(spec *v1alpha1.ResourceBindingSpec, task *v1alpha1.GracefulEvictionTask) {
	if slices.ContainsFunc(spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == task.FromCluster }) {
		return
	}
	replicas := spec.Replicas
	if task.Replicas != nil {
		replicas = *task.Replicas
	}
	spec.Clusters = append(slices.Clone(spec.Clusters), v1alpha1.TargetCluster{Name: task.FromCluster, Replicas: replicas})
	slices.SortFunc(spec.Clusters, func(a, b v1alpha1.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
}

// tolerations are the placement's, with the default NoExecute ones.
func (c *Controller) tolerations(spec *v1alpha1.ResourceBindingSpec) []corev1.Toleration {
	var own []corev1.Toleration
	if spec.Placement != nil {
		own = spec.Placement.ClusterTolerations
	}
	return eviction.WithDefaultTolerations(own, c.cfg.DefaultNotReadyToleration, c.cfg.DefaultUnreachableToleration)
}

// dueEvictions returns the clusters of spec the binding must leave now, as
// far as each zone's rate allows.
func (c *Controller) dueEvictions(spec *v1alpha1.ResourceBindingSpec, tolerations []corev1.Toleration, now time.Time, wake *wakeup) []eviction.Eviction {
	purgeMode := ""
	if spec.Failover != nil && spec.Failover.Cluster != nil {
		purgeMode = spec.Failover.Cluster.PurgeMode
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	since := c.zones.GraceStart()
	var out []eviction.Eviction
	for _, tc := range spec.Clusters {
		cl := c.clusters.Get(tc.Name)
		if cl == nil {
			continue
		}
		d := eviction.Decide(cl.Spec.Taints, tolerations, since, now)
		if !d.Evict {
			wake.at(d.At)
			continue
		}
		ok, retryAt := c.zones.Allow(cl.Spec.Zone, now)
		if !ok {
			wake.at(retryAt) // zero: until the zone's mode changes
			continue
		}
		out = append(out, eviction.Eviction{
			Cluster: tc.Name, Reason: eviction.ReasonTaintUntolerated, Producer: eviction.ProducerTaintManager, PurgeMode: purgeMode,
			GracePeriod: ptr.To(c.defaultGraceSeconds()),
			Message:     fmt.Sprintf("cluster %s has taint %s:%s that the placement does not tolerate (any longer)", tc.Name, d.Taint.Key, d.Taint.Effect),
		})
	}
	return out
}

// record logs and records events for what reconcile stored, on the
// binding and on its template.
func (c *Controller) record(obj metav1.Object, spec *v1alpha1.ResourceBindingSpec, evicted []eviction.Eviction, ended []endedTask, failedBack []string) {
	bindingRef := controller.BindingRef(obj)
	templateRef := corev1.ObjectReference{APIVersion: spec.Resource.APIVersion, Kind: spec.Resource.Kind, Namespace: spec.Resource.Namespace, Name: spec.Resource.Name}
	event := func(eventType, reason, message string) {
		c.recorder.Event(bindingRef, eventType, reason, message)
		c.recorder.Event(templateRef, eventType, reason, message)
	}
	key := controller.Key(obj.GetNamespace(), obj.GetName())
	for _, e := range evicted {
		c.evictions.Add(1)
		mode := v1alpha1.NormalPurgeMode(e.PurgeMode)
		c.logger.Info("evicted", "binding", key, "cluster", e.Cluster, "reason", e.Reason, "purgeMode", mode)
		event(corev1.EventTypeWarning, "Evicted", fmt.Sprintf("evicted from %s (%s, purge mode %s): %s", e.Cluster, e.Reason, mode, e.Message))
	}
	for _, t := range ended {
		c.tasksEnded.Add(1)
		c.logger.Info("eviction task ended", "binding", key, "cluster", t.task.FromCluster, "reason", t.reason)
		message := fmt.Sprintf("eviction from %s ended (%s); its copy there is removed", t.task.FromCluster, t.reason)
		switch {
		case t.cancelled:
			message = fmt.Sprintf("eviction from %s called off: the cluster recovered before any other cluster could take the workload, which stays there", t.task.FromCluster)
		case v1alpha1.NormalPurgeMode(t.task.PurgeMode) == v1alpha1.PurgeModeDirectly:
			message = fmt.Sprintf("eviction from %s ended (%s); its copy was removed when it was evicted", t.task.FromCluster, t.reason)
		}
		event(corev1.EventTypeNormal, "EvictionTaskEnded", message)
	}
	if len(failedBack) > 0 {
		c.logger.Info("failback", "binding", key, "clusters", failedBack)
		event(corev1.EventTypeNormal, "Failback", fmt.Sprintf("%s Ready again for the stabilization period: rescheduling afresh", strings.Join(failedBack, ", ")))
	}
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
