package failover

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/scheduler"
)

// Application failover backs off per (binding, cluster), so that a
// workload unhealthy everywhere is not moved back and forth between
// clusters for ever. Each application-failure eviction of a binding from a
// cluster starts a back-off for that pair: appBackOffBase the first time,
// doubling with every further one, at most appBackOffCap. While it runs,
//   - the binding is not evicted from that cluster again for an
//     application failure (the workload came back there and fails again:
//     it stays, an unhealthy copy beating another move), and
//   - no application-failure eviction of the binding is made that would
//     place it on that cluster (predicted with the scheduler the hub runs,
//     on the same clusters): the eviction waits until the back-off ends.
//
// Likewise an eviction that could only place the workload on clusters the
// binding is still being evicted from for an application failure waits
// for those tasks to end, rather than being made and called off at once
// for want of a replacement (tasks.go).
//
// A hold is an event (EvictionBackOff) and a log line, once per hold; the
// controller wakes when the back-off ends (a task's end changes the
// binding). The count of a pair starts again once the workload reports
// Healthy in that cluster, or a cap after its back-off ended. The
// back-offs live in memory: a restarted hub has none, so its first
// eviction of each pair is made without waiting, as before back-offs
// existed, and counts as the first. Base and cap are constants, not hub
// flags (they would be fields of Config).
//
// Karmada has no such back-off (pkg/controllers/applicationfailover): it
// evicts once the toleration is over, and its scheduler skips only the
// clusters of the binding's graceful eviction tasks; once a task ends
// with its grace period, a workload failing everywhere moves back and
// forth for ever.
const (
	appBackOffBase = 10 * time.Minute
	appBackOffCap  = time.Hour
)

// reasonBackOff is the event of an application-failure eviction held by a
// back-off.
const reasonBackOff = "EvictionBackOff"

// appBackOff is the back-off of one (binding, cluster).
type appBackOff struct {
	evictions int       // application-failure evictions from the cluster in a row
	last      time.Time // the latest
	// generation is the binding's generation once the latest was stored:
	// a read of an older one does not know the cluster was left.
	generation int64
}

// backOffLength is how long the back-off after the n-th eviction in a row
// runs.
func backOffLength(n int) time.Duration {
	d := appBackOffBase
	for i := 1; i < n && d < appBackOffCap; i++ {
		d *= 2
	}
	return min(d, appBackOffCap)
}

func (b appBackOff) end() time.Time { return b.last.Add(backOffLength(b.evictions)) }

// idle reports whether the back-off ended a cap ago or longer: the next
// eviction counts as the first again.
func (b appBackOff) idle(now time.Time) bool { return !now.Before(b.end().Add(appBackOffCap)) }

// backOffs are the back-offs of every binding, and the holds announced.
// Guarded by its own mutex: bindings are reconciled in parallel, and the
// predictions run outside the controller's.
type backOffs struct {
	mu sync.Mutex
	// byBinding is, per binding key and cluster, the back-off.
	byBinding map[string]map[string]appBackOff
	// announced is, per binding key and held cluster, the end of the hold
	// last announced (event, log line), so that each is announced once.
	announced map[string]map[string]time.Time
}

// evicted starts or extends the back-offs of the application-failure
// evictions among evictions, stored at now as the binding's generation.
func (b *backOffs) evicted(key string, evictions []eviction.Eviction, now time.Time, generation int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range evictions {
		if e.Producer != eviction.ProducerApplicationFailover {
			continue
		}
		if b.byBinding == nil {
			b.byBinding = map[string]map[string]appBackOff{}
		}
		if b.byBinding[key] == nil {
			b.byBinding[key] = map[string]appBackOff{}
		}
		prev, ok := b.byBinding[key][e.Cluster]
		if !ok || prev.idle(now) {
			prev = appBackOff{}
		}
		b.byBinding[key][e.Cluster] = appBackOff{evictions: prev.evictions + 1, last: now, generation: generation}
	}
}

// predates reports whether a read of the binding at generation comes from
// before the eviction from cluster that started its back-off: the informer
// has not delivered that write yet, so the cluster only looks placed.
func (b *backOffs) predates(key, cluster string, generation int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bo, ok := b.byBinding[key][cluster]
	return ok && generation < bo.generation
}

// running returns the back-off of (key, cluster) if it runs at now.
func (b *backOffs) running(key, cluster string, now time.Time) (appBackOff, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bo, ok := b.byBinding[key][cluster]
	return bo, ok && now.Before(bo.end())
}

// settle forgets the back-offs of a binding that are idle at now or whose
// cluster reports the workload Healthy: it works there.
func (b *backOffs) settle(key string, items []v1alpha1.AggregatedStatusItem, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.byBinding[key]
	for cluster, bo := range m {
		if bo.idle(now) {
			delete(m, cluster)
		}
	}
	for _, item := range items {
		if item.Applied && item.Health == v1alpha1.HealthHealthy {
			delete(m, item.ClusterName)
		}
	}
	if len(m) == 0 {
		delete(b.byBinding, key)
	}
}

// forget drops everything kept about a binding.
func (b *backOffs) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byBinding, key)
	delete(b.announced, key)
}

// announce keeps the holds of a binding's reconcile and returns those not
// announced yet (or ending at another time since).
func (b *backOffs) announce(key string, holds []backOffHold) []backOffHold {
	b.mu.Lock()
	defer b.mu.Unlock()
	before, held := b.announced[key], map[string]time.Time{}
	var fresh []backOffHold
	for _, h := range holds {
		held[h.cluster] = h.until
		if at, ok := before[h.cluster]; !ok || !at.Equal(h.until) {
			fresh = append(fresh, h)
		}
	}
	switch {
	case len(held) > 0 && b.announced == nil:
		b.announced = map[string]map[string]time.Time{key: held}
	case len(held) > 0:
		b.announced[key] = held
	default:
		delete(b.announced, key)
	}
	return fresh
}

// backOffHold is an application-failure eviction held by back-offs.
type backOffHold struct {
	cluster string // the eviction from it is held
	// by are the clusters in back-off: the cluster itself (evicted from
	// it again too soon), or those the eviction would place the workload
	// on.
	by []heldBy
	// until is the earliest end among their back-offs, when the eviction
	// is decided again; zero when it waits for eviction tasks to end
	// (which changes the binding).
	until time.Time
}

// heldBy is a cluster in back-off, or (evicting) one still in an
// application-failure eviction task of the binding.
type heldBy struct {
	cluster  string
	evicting bool
	appBackOff
}

// holdFor says whether the application-failure eviction of the binding
// from cluster must wait for a back-off, leaving already being left
// (evictions decided before in this reconcile). When the scheduler would
// find no place for the workload but one of the clusters the binding is
// still being evicted from for an application failure, it waits for that
// eviction to end too: made now, it would be called off at once for want
// of a replacement.
func (c *Controller) holdFor(key string, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, leaving []string, cluster string, now time.Time) (backOffHold, bool) {
	if bo, ok := c.backOffs.running(key, cluster, now); ok {
		return backOffHold{cluster: cluster, by: []heldBy{{cluster: cluster, appBackOff: bo}}, until: bo.end()}, true
	}
	h := backOffHold{cluster: cluster}
	leaving = append(slices.Clone(leaving), cluster)
	gains, err := c.placedAfter(spec, status, leaving, nil)
	if err != nil {
		evicting := appFailureTasks(spec, leaving)
		if len(evicting) == 0 {
			return h, false
		}
		gains, _ = c.placedAfter(spec, status, leaving, evicting)
		for _, target := range clusterNames(gains) {
			if slices.Contains(evicting, target) {
				h.by = append(h.by, heldBy{cluster: target, evicting: true})
			}
		}
		return h, len(h.by) > 0
	}
	for _, target := range clusterNames(gains) {
		if bo, ok := c.backOffs.running(key, target, now); ok {
			h.by = append(h.by, heldBy{cluster: target, appBackOff: bo})
			if h.until.IsZero() || bo.end().Before(h.until) {
				h.until = bo.end()
			}
		}
	}
	return h, len(h.by) > 0
}

// appFailureTasks are the clusters of the binding's application-failure
// eviction tasks, but those in leaving.
func appFailureTasks(spec *v1alpha1.ResourceBindingSpec, leaving []string) []string {
	var out []string
	for _, task := range spec.GracefulEvictionTasks {
		if task.Producer == eviction.ProducerApplicationFailover && !slices.Contains(leaving, task.FromCluster) {
			out = append(out, task.FromCluster)
		}
	}
	return out
}

// placedAfter predicts what the scheduler would give the binding once it
// leaves the clusters in leaving: the clusters that gain replicas (new
// ones, or more than they have), each with the replicas it gains. It is
// the scheduling controller's input for the evicted binding
// (hub/scheduling: keep the two alike), but that the clusters of its
// eviction tasks in candidates stay candidates. The error is the
// scheduler's when it would find no place.
func (c *Controller) placedAfter(spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, leaving, candidates []string) ([]v1alpha1.TargetCluster, error) {
	had := map[string]int32{}
	var previous []v1alpha1.TargetCluster
	for _, tc := range spec.Clusters {
		if !slices.Contains(leaving, tc.Name) {
			previous = append(previous, tc)
			had[tc.Name] = tc.Replicas
		}
	}
	excluded := slices.Clone(leaving)
	for _, name := range spec.EvictingClusters() {
		if !slices.Contains(candidates, name) {
			excluded = append(excluded, name)
		}
	}
	fresh := spec.RescheduleTriggeredAt != nil && (status.LastScheduledTime == nil || spec.RescheduleTriggeredAt.After(status.LastScheduledTime.Time))
	result, err := scheduler.Schedule(scheduler.Input{
		Placement: spec.Placement, Replicas: spec.Replicas, Previous: previous, Clusters: c.clusters.List(),
		Requirements: spec.ReplicaRequirements, Fresh: fresh, Evicted: excluded,
		ObservedAffinity: status.SchedulerObservedAffinityName, APIVersion: spec.Resource.APIVersion, Kind: spec.Resource.Kind,
		TemplateUID: spec.Resource.UID,
	})
	if err != nil {
		return nil, err
	}
	var gains []v1alpha1.TargetCluster
	for _, tc := range result.Clusters {
		if r, ok := had[tc.Name]; !ok || tc.Replicas > r {
			gains = append(gains, v1alpha1.TargetCluster{Name: tc.Name, Replicas: tc.Replicas - r})
		}
	}
	return gains, nil
}

// clusterNames are the clusters' names.
func clusterNames(clusters []v1alpha1.TargetCluster) []string {
	out := make([]string, len(clusters))
	for i, tc := range clusters {
		out[i] = tc.Name
	}
	return out
}

// announceHolds records an event and logs a line for each hold not
// announced yet.
func (c *Controller) announceHolds(obj metav1.Object, key string, spec *v1alpha1.ResourceBindingSpec, holds []backOffHold, now time.Time) {
	for _, h := range c.backOffs.announce(key, holds) {
		message := h.message(now)
		for _, by := range h.by {
			if by.evicting {
				c.logger.Info("application-failure eviction held by another", "binding", key, "cluster", h.cluster, "evictingCluster", by.cluster)
				continue
			}
			c.logger.Info("application-failure eviction held by a back-off", "binding", key, "cluster", h.cluster, "backOffCluster", by.cluster,
				"evictions", by.evictions, "backOff", backOffLength(by.evictions), "until", by.end())
		}
		c.recorder.Event(controller.BindingRef(obj), corev1.EventTypeWarning, reasonBackOff, message)
		c.recorder.Event(controller.TemplateRef(spec.Resource), corev1.EventTypeWarning, reasonBackOff, message)
	}
}

// message says what a hold keeps from happening, why and until when.
func (h backOffHold) message(now time.Time) string {
	// why says what happened to the binding in by.cluster; name, unless
	// empty, names the cluster after "from".
	why := func(by heldBy, name string) string {
		if by.evicting {
			return fmt.Sprintf("is still being evicted from%s for an application failure", name)
		}
		return fmt.Sprintf("was evicted from%s for an application failure %s ago (%s, back-off %s)",
			name, now.Sub(by.last).Round(time.Second), times(by.evictions), backOffLength(by.evictions))
	}
	if len(h.by) == 1 && h.by[0].cluster == h.cluster {
		return fmt.Sprintf("eviction from %s held: the workload %s; it stays there until the back-off ends in %s",
			h.cluster, why(h.by[0], " "+h.cluster), h.until.Sub(now).Round(time.Second))
	}
	var on []string
	for _, by := range h.by {
		on = append(on, fmt.Sprintf("%s, which it %s", by.cluster, why(by, "")))
	}
	until := "that eviction ends"
	if len(h.by) > 1 {
		until = "those evictions end"
	}
	if !h.until.IsZero() {
		until = fmt.Sprintf("the back-off ends in %s", h.until.Sub(now).Round(time.Second))
	}
	return fmt.Sprintf("eviction from %s held: it would place the workload on %s; it stays on %s until %s",
		h.cluster, strings.Join(on, ", and on "), h.cluster, until)
}

// times is "1st time", "2nd time", ...
func times(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s time", n, suffix)
}
