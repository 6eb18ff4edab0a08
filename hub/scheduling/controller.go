// Package scheduling runs the scheduler for bindings: when a binding's spec
// or the clusters change and the binding needs it (see scheduleNeeded), it
// computes the placement with the pure scheduler package and records the
// result: spec.clusters with Update, and the Scheduled condition,
// status.lastScheduledTime, schedulerObservedGeneration and
// schedulerObservedAffinityName through the status subresource.
//
// The two writes are separate, so neither can overwrite the other's fields
// nor another controller's: the status controller's aggregated status, the
// failover controller's eviction tasks and failback clusters. Placement
// first, then status: the status records the generation the placement
// produced (every spec change makes a new generation), so the failover
// controller, which waits for schedulerObservedGeneration to reach the
// binding's generation, never takes the status of the old placement for
// the new one. A placement write that conflicts only with another
// controller's status write (same generation, same scheduling status) is
// written again over the latest version at once; a status write that
// conflicts is applied to the latest version, since its fields are this
// controller's alone.
//
// Every spec change makes a new generation, the end of an eviction task
// included, which the old store did not count as one. A generation whose
// only change since the last one scheduled is in spec.gracefulEvictionTasks
// is recorded as observed without scheduling (as Karmada's scheduler does
// when nothing asks for a schedule), so that a fully placed Divided binding
// keeps its placement when a task ends or is purged. The controller knows
// that from memory; after a hub restart, a binding whose generation was not
// yet observed is scheduled, as before.
//
// The detector creates a binding with its placement, and the failover
// controller writes an eviction together with its replacement, both
// computed with Place. The schedule of that generation divides the
// replicas from the clusters Place was given, as it would have without
// Place (the replicas Place added are not in the agents' reports yet:
// counted as replicas a cluster has, on top of its room, they would be
// counted twice), finds the placement already in spec.clusters and only
// records it in the status, as a placement of its own (lastScheduledTime,
// the Scheduled event). Which placement Place gave is kept in memory;
// after a hub restart, the schedule starts from spec.clusters.
package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/scheduler"
)

// maxStatusAttempts bounds the writes of one change when other
// controllers write the same binding at the same time.
const maxStatusAttempts = 5

// Controller schedules bindings.
type Controller struct {
	api             controller.BindingAPI
	recorder        controller.Recorder
	clock           clock.PassiveClock
	logger          *slog.Logger
	bindings        controller.Source[*v1alpha1.ResourceBinding]
	clusterBindings controller.Source[*v1alpha1.ClusterResourceBinding]
	clusters        controller.Source[*v1alpha1.Cluster]
	fleet           *fleetCache
	queue           *controller.Queue

	mu    sync.Mutex
	memos map[string]memo // by binding key; guarded by mu
	// placings are the placements Place gave, by binding key; guarded by
	// mu.
	placings map[string]placing
	// observeLatency, if set, is told how long each scheduling attempt
	// took (computing and storing the placement) and whether it was
	// stored ("scheduled") or failed ("error").
	observeLatency func(result string, d time.Duration)
}

// SetLatencyObserver sets what is told each scheduling attempt's duration;
// call it before Run.
func (c *Controller) SetLatencyObserver(fn func(result string, d time.Duration)) {
	c.observeLatency = fn
}

// memo is what the controller remembers of a binding it scheduled.
type memo struct {
	uid types.UID // of the binding: a binding made again starts afresh
	// observed is the generation last recorded in
	// status.schedulerObservedGeneration, inputs the digest of that
	// generation's spec without its eviction tasks.
	observed int64
	inputs   uint64
	// placed, when not zero, is the generation of a placement this
	// controller wrote whose status write has not succeeded yet: the retry
	// records it (lastScheduledTime, event) rather than finding the
	// placement already there and nothing to do.
	placed int64
}

// New returns a scheduling controller that reads bindings and clusters
// from the shared informers and writes bindings through clients. It adds
// its handlers to the informers; Run starts it.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, clk clock.PassiveClock, logger *slog.Logger) *Controller {
	c := &Controller{api: controller.BindingAPI{Client: clients.Flotilla.FlotillaV1alpha1()}, recorder: recorder, clock: clk,
		logger: logger.With("controller", "scheduling"), bindings: informers.Bindings, clusterBindings: informers.ClusterBindings,
		clusters: informers.Clusters, fleet: &fleetCache{clusters: informers.Clusters}, memos: map[string]memo{}, placings: map[string]placing{}}
	c.queue = controller.NewQueue("scheduling", c.reconcile, logger)
	// Only spec changes matter: status writes come every few seconds
	// during a rollout and would each cost a schedule.
	c.bindings.AddHandler(func(old, cur *v1alpha1.ResourceBinding) {
		switch {
		case cur == nil:
			c.forget(controller.Key(old.Namespace, old.Name))
		case old == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec):
			c.queue.Add(controller.Key(cur.Namespace, cur.Name))
		}
	})
	c.clusterBindings.AddHandler(func(old, cur *v1alpha1.ClusterResourceBinding) {
		switch {
		case cur == nil:
			c.forget(old.Name)
		case old == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec):
			c.queue.Add(cur.Name)
		}
	})
	c.clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		c.fleet.clusterChanged(old, cur) // before the requeue: its schedules must see the change
		if old == nil || cur == nil || schedulingInputChanged(old, cur) {
			c.requeueAll()
		}
	})
	return c
}

// schedulingInputChanged ignores the status changes agents cause every
// few seconds; labels, spec (taints, region...) and the served APIs (a CRD
// installed) matter.
func schedulingInputChanged(old, cur *v1alpha1.Cluster) bool {
	return !equality.Semantic.DeepEqual(old.Labels, cur.Labels) || !equality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
		!equality.Semantic.DeepEqual(old.Status.APIEnablements, cur.Status.APIEnablements)
}

func (c *Controller) requeueAll() {
	for _, b := range c.bindings.List() {
		c.queue.Add(controller.Key(b.Namespace, b.Name))
	}
	for _, b := range c.clusterBindings.List() {
		c.queue.Add(b.Name)
	}
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	// Scheduling before every cluster is listed would move workloads off
	// clusters that merely were not seen yet.
	if !controller.StartAndSync(ctx, c.clusters, c.bindings, c.clusterBindings) {
		return
	}
	c.queue.Run(ctx, workers)
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	b, ok := controller.LookupBinding(c.bindings, c.clusterBindings, key)
	if !ok {
		c.forget(key)
		return nil
	}
	c.mu.Lock()
	m, known := c.memos[key]
	c.mu.Unlock()
	known = known && m.uid == b.Object().GetUID()
	if known && m.observed == b.Object().GetGeneration() && b.Status().SchedulerObservedGeneration < m.observed {
		// The informer has yet to bring this controller's own status
		// write: decide on the latest version.
		latest, err := c.api.Get(ctx, key)
		if err != nil {
			return ignoreNotFound(err)
		}
		b = latest
		known = m.uid == b.Object().GetUID()
	}
	generation := b.Object().GetGeneration()
	spec, status := b.Spec(), b.Status()
	inputs := inputsDigest(spec)
	switch {
	case !scheduleNeeded(generation, spec, status):
		c.remember(key, memo{uid: b.Object().GetUID(), observed: generation, inputs: inputs})
		return nil
	case known && m.placed == 0 && m.observed == status.SchedulerObservedGeneration && m.inputs == inputs &&
		!scheduleNeeded(status.SchedulerObservedGeneration, spec, status):
		// The spec differs from the generation last observed only in its
		// eviction tasks, and that generation needed no schedule: a task
		// that ended or was purged gives the scheduler nothing to do.
		return c.observe(ctx, key, b, inputs)
	}
	start := c.clock.Now()
	err := c.schedule(ctx, key, b)
	if c.observeLatency != nil {
		result := "scheduled"
		if err != nil {
			result = "error"
		}
		c.observeLatency(result, c.clock.Since(start))
	}
	return err
}

// observe records the binding's generation as observed, without
// scheduling.
func (c *Controller) observe(ctx context.Context, key string, b controller.Binding, inputs uint64) error {
	generation := b.Object().GetGeneration()
	err := c.writeStatus(ctx, key, b, func(st *v1alpha1.ResourceBindingStatus) bool {
		if st.SchedulerObservedGeneration >= generation {
			return false
		}
		st.SchedulerObservedGeneration = generation
		if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.BindingConditionScheduled); cond != nil {
			cond.ObservedGeneration = generation
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("store the observed generation of %s: %w", key, err)
	}
	c.remember(key, memo{uid: b.Object().GetUID(), observed: generation, inputs: inputs})
	c.logger.Debug("generation observed without a schedule: only eviction tasks changed", "binding", key, "generation", generation)
	return nil
}

// schedule computes one binding's placement and stores what changed.
func (c *Controller) schedule(ctx context.Context, key string, b controller.Binding) error {
	spec, status := b.Spec(), b.Status()
	fresh := freshRequested(spec, status)
	fleet, err := c.fleet.get()
	if err != nil {
		return fmt.Errorf("schedule %s: %w", key, err)
	}
	in := input(spec, status, fleet)
	// A placement Place gave is scheduled again from the clusters Place
	// was given: the replicas it added are not in the room the agents
	// report yet, and counting them as replicas the clusters have would
	// count them twice (a tier with room for 3 would hold 6).
	previous, byPlace := c.placedBy(key, b)
	if byPlace {
		in.Previous = previous
	}
	result, schedErr := scheduler.Schedule(in)
	now := metav1.NewTime(c.clock.Now())
	cond := metav1.Condition{Type: v1alpha1.BindingConditionScheduled, LastTransitionTime: now}
	var unschedulable *scheduler.UnschedulableError
	switch {
	case schedErr == nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, v1alpha1.ReasonScheduled, "placed on "+summary(result.Clusters)+overflowNote(result.Tiers)
	case errors.As(schedErr, &unschedulable):
		// The previous result stays: a workload keeps running where it is.
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, unschedulable.Reason, unschedulable.Error()
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, schedErr.Error()
	}

	// The placement, with Update: a new generation.
	observed, placed := b, false
	switch {
	case schedErr == nil && !equality.Semantic.DeepEqual(spec.Clusters, result.Clusters):
		want := b.DeepCopy()
		want.Spec().Clusters = result.Clusters
		updated, err := c.updateSpec(ctx, key, b, want)
		if err != nil {
			return fmt.Errorf("store the placement of %s: %w", key, err)
		}
		observed, placed = updated, true
		c.markPlaced(key, updated.Object())
	case schedErr == nil:
		placed = c.placedBefore(key, b.Object()) || byPlace && !equality.Semantic.DeepEqual(previous, result.Clusters) ||
			unrecorded(b.Object().GetGeneration(), status, cond)
	}

	// The status, of the generation the placement made.
	observedGeneration := observed.Object().GetGeneration()
	cond.ObservedGeneration = observedGeneration
	conditions := slices.Clone(status.Conditions)
	condChanged := meta.SetStatusCondition(&conditions, cond)
	err = c.writeStatus(ctx, key, observed, func(st *v1alpha1.ResourceBindingStatus) bool {
		if st.SchedulerObservedGeneration > observedGeneration {
			return false // a later schedule was recorded meanwhile
		}
		changed := meta.SetStatusCondition(&st.Conditions, cond)
		if schedErr == nil {
			if placed || fresh {
				// A fresh schedule is done once, even when it changed nothing.
				st.LastScheduledTime, changed = &now, true
			}
			if st.SchedulerObservedAffinityName != result.AffinityName {
				st.SchedulerObservedAffinityName, changed = result.AffinityName, true
			}
		}
		if st.SchedulerObservedGeneration != observedGeneration {
			st.SchedulerObservedGeneration, changed = observedGeneration, true
		}
		return changed
	})
	if err != nil {
		return fmt.Errorf("store the schedule status of %s: %w", key, err)
	}
	c.remember(key, memo{uid: observed.Object().GetUID(), observed: observedGeneration, inputs: inputsDigest(observed.Spec())})
	if byPlace {
		c.dropPlacing(key, observedGeneration)
	}

	ref := controller.BindingRef(observed.Object())
	switch {
	case placed:
		c.recorder.Event(ref, corev1.EventTypeNormal, "Scheduled", cond.Message)
	case condChanged && cond.Status == metav1.ConditionFalse:
		c.recorder.Event(ref, corev1.EventTypeWarning, "ScheduleFailed", cond.Message)
	}
	if placed || condChanged {
		c.logger.Info("binding scheduled", "binding", key, "scheduled", cond.Status, "result", summary(observed.Spec().Clusters), "reason", cond.Reason)
	}
	return nil
}

// Place returns the placement the scheduler would give the binding key
// with this spec and status, without storing anything, and false when it
// has none (unschedulable, the clusters not listed yet, or the fleet
// cannot be read). The detector creates a binding with it, and the
// failover controller writes an eviction together with its replacement,
// so that the placement costs no write of its own; generation is the one
// that write makes.
//
// The scheduler then schedules that generation as it would have without
// Place: from the clusters Place was given (spec.clusters before the
// placement), not from the placement, over the fleet as it is then. With
// the fleet unchanged it finds the placement already there and only
// records it in the status; if the fleet changed meanwhile, it writes its
// own, as it would have.
func (c *Controller) Place(key string, generation int64, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) ([]v1alpha1.TargetCluster, bool) {
	select {
	case <-c.clusters.Synced():
	default:
		return nil, false // a placement over the clusters listed so far could stick
	}
	fleet, err := c.fleet.get()
	if err != nil {
		return nil, false
	}
	result, err := scheduler.Schedule(input(spec, status, fleet))
	if err != nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.placings[key] = placing{generation: generation, replicas: spec.Replicas,
		previous: slices.Clone(spec.Clusters), placement: slices.Clone(result.Clusters)}
	return result.Clusters, true
}

// dropPlacing forgets the placing of the binding's generation once its
// schedule is recorded.
func (c *Controller) dropPlacing(key string, generation int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.placings[key]; ok && p.generation <= generation {
		delete(c.placings, key)
	}
}

// placing is a placement Place gave for a binding's generation.
type placing struct {
	generation int64
	replicas   int32
	// previous are the clusters Place was given, placement its result.
	previous, placement []v1alpha1.TargetCluster
}

// placedBy returns the clusters Place was given for the binding's
// generation, if the binding has the placement Place gave it and that
// generation's schedule is not recorded yet. A placing of an earlier
// generation is dropped (it was written over, or never written), and so
// is one whose schedule is recorded: the schedules after it start from
// spec.clusters, as any other (a cluster tainted NoSchedule since keeps
// the replicas it has).
func (c *Controller) placedBy(key string, b controller.Binding) ([]v1alpha1.TargetCluster, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.placings[key]
	generation := b.Object().GetGeneration()
	switch {
	case !ok || p.generation > generation:
		return nil, false
	case p.generation < generation || b.Status().SchedulerObservedGeneration >= generation:
		delete(c.placings, key)
		return nil, false
	}
	if spec := b.Spec(); p.replicas != spec.Replicas || !equality.Semantic.DeepEqual(p.placement, spec.Clusters) {
		return nil, false
	}
	return p.previous, true
}

// input is what the scheduler is given for a binding.
func input(spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, fleet *scheduler.Fleet) scheduler.Input {
	return scheduler.Input{
		Placement: spec.Placement, Replicas: spec.Replicas, Previous: spec.Clusters, Fleet: fleet,
		Requirements: spec.ReplicaRequirements, Fresh: freshRequested(spec, status), Evicted: spec.EvictingClusters(),
		ObservedAffinity: status.SchedulerObservedAffinityName,
		APIVersion:       spec.Resource.APIVersion, Kind: spec.Resource.Kind, TemplateUID: spec.Resource.UID,
	}
}

// unrecorded reports whether a successful schedule of a new generation
// that kept spec.clusters as they are still has to be recorded as a
// placement (lastScheduledTime, the Scheduled event): the placement its
// Scheduled condition names differs from the one the last schedule
// recorded, or none was. That is the case when another controller wrote
// the placement (the detector creates a binding already placed, the
// failover controller writes an eviction with its replacement or gives a
// cluster back), or when this controller wrote it before a restart and
// its status write was lost.
func unrecorded(generation int64, status *v1alpha1.ResourceBindingStatus, cond metav1.Condition) bool {
	prev := meta.FindStatusCondition(status.Conditions, v1alpha1.BindingConditionScheduled)
	if status.SchedulerObservedGeneration == generation {
		return false
	}
	return prev == nil || prev.Status == metav1.ConditionTrue && prev.Message != cond.Message
}

// updateSpec writes want (b with a new placement) with Update. A conflict
// with another controller's status write (the status controller's
// aggregated status, the failover controller's failback clusters) is no
// reason to schedule again: while the latest version has b's generation
// and b's scheduling status, the placement is written over it at once.
// Otherwise the conflict goes back to the queue, which retries once the
// informer has the new version.
func (c *Controller) updateSpec(ctx context.Context, key string, b, want controller.Binding) (controller.Binding, error) {
	for attempt := 1; ; attempt++ {
		updated, err := c.api.Update(ctx, want)
		if !apierrors.IsConflict(err) || attempt == maxStatusAttempts {
			return updated, err
		}
		latest, getErr := c.api.Get(ctx, key)
		if getErr != nil || latest.Object().GetGeneration() != b.Object().GetGeneration() || !sameSchedulingStatus(b.Status(), latest.Status()) {
			return controller.Binding{}, err
		}
		*latest.Spec() = *want.Spec()
		want = latest
	}
}

// sameSchedulingStatus compares the status fields the scheduler reads and
// writes.
func sameSchedulingStatus(a, b *v1alpha1.ResourceBindingStatus) bool {
	return a.SchedulerObservedGeneration == b.SchedulerObservedGeneration && a.SchedulerObservedAffinityName == b.SchedulerObservedAffinityName &&
		equality.Semantic.DeepEqual(a.LastScheduledTime, b.LastScheduledTime) &&
		equality.Semantic.DeepEqual(meta.FindStatusCondition(a.Conditions, v1alpha1.BindingConditionScheduled), meta.FindStatusCondition(b.Conditions, v1alpha1.BindingConditionScheduled))
}

// writeStatus applies mutate to a copy of b's status and writes it through
// the status subresource if mutate changed anything. The fields mutate
// sets are this controller's alone: on a conflict (another controller
// wrote the binding since b was read) mutate is applied to the latest
// version and written again.
func (c *Controller) writeStatus(ctx context.Context, key string, b controller.Binding, mutate func(*v1alpha1.ResourceBindingStatus) bool) error {
	cur := b.DeepCopy()
	for attempt := 1; ; attempt++ {
		if !mutate(cur.Status()) {
			return nil
		}
		_, err := c.api.UpdateStatus(ctx, cur)
		if !apierrors.IsConflict(err) || attempt == maxStatusAttempts {
			return err
		}
		if cur, err = c.api.Get(ctx, key); err != nil {
			return ignoreNotFound(err)
		}
	}
}

func (c *Controller) remember(key string, m memo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.memos[key] = m
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.memos, key)
	delete(c.placings, key)
}

// markPlaced remembers that the placement of the binding's generation
// was written.
func (c *Controller) markPlaced(key string, b metav1.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.memos[key]
	if m.uid != b.GetUID() {
		m = memo{uid: b.GetUID()}
	}
	m.placed = b.GetGeneration()
	c.memos[key] = m
}

// placedBefore reports whether this controller wrote the placement of the
// binding's generation in an earlier try whose status write failed.
func (c *Controller) placedBefore(key string, b metav1.Object) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.memos[key]
	return m.uid == b.GetUID() && m.placed == b.GetGeneration()
}

// inputsDigest hashes what the scheduler acts on in a binding's spec:
// all of it but the eviction tasks.
func inputsDigest(spec *v1alpha1.ResourceBindingSpec) uint64 {
	s := *spec
	s.GracefulEvictionTasks = nil
	raw, err := json.Marshal(&s)
	if err != nil { // cannot happen for API types; never equal then
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return h.Sum64()
}

// scheduleNeeded says whether a binding must be scheduled. As in Karmada,
// a Divided binding whose replicas are all placed keeps its placement when
// clusters change: a recovered cluster does not pull replicas back by
// itself (failback and rebalancing ask for that with a Fresh schedule).
// Eviction removes a cluster and bumps the generation, so the missing
// replicas are placed again. Duplicated bindings follow the clusters.
func scheduleNeeded(generation int64, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) bool {
	cond := meta.FindStatusCondition(status.Conditions, v1alpha1.BindingConditionScheduled)
	switch {
	case status.SchedulerObservedGeneration != generation, freshRequested(spec, status),
		len(spec.Clusters) == 0, cond == nil || cond.Status != metav1.ConditionTrue:
		return true
	case spec.Replicas == 0 || spec.Placement == nil || spec.Placement.ReplicaScheduling == nil ||
		spec.Placement.ReplicaScheduling.ReplicaSchedulingType != v1alpha1.ReplicaSchedulingTypeDivided:
		return true
	}
	var placed int64
	for _, tc := range spec.Clusters {
		placed += int64(tc.Replicas)
	}
	return placed != int64(spec.Replicas)
}

// freshRequested reports whether a rebalance or failback asked for a Fresh
// schedule (rescheduleTriggeredAt later than the last schedule).
func freshRequested(spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) bool {
	return spec.RescheduleTriggeredAt != nil &&
		(status.LastScheduledTime == nil || spec.RescheduleTriggeredAt.After(status.LastScheduledTime.Time))
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// overflowNote says, when replicas overflowed from a group's primary
// tier, why and to which tiers, how many: "; idc full, overflow to
// cloud: 4, spare: 2". Empty when they did not.
func overflowNote(tiers []scheduler.Tier) string {
	var parts []string
	for _, t := range tiers[min(1, len(tiers)):] {
		if t.Replicas > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", t.Name, t.Replicas))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	why := tiers[0].Name + " full"
	if len(tiers[0].Clusters) == 0 {
		why = "no cluster of " + tiers[0].Name + " fits"
	}
	return fmt.Sprintf("; %s, overflow to %s", why, strings.Join(parts, ", "))
}

// summary prints a result as {member2:2, member1:1}, most replicas first.
func summary(clusters []v1alpha1.TargetCluster) string {
	sorted := slices.Clone(clusters)
	slices.SortStableFunc(sorted, func(a, b v1alpha1.TargetCluster) int {
		if a.Replicas != b.Replicas {
			return int(b.Replicas - a.Replicas)
		}
		return strings.Compare(a.Name, b.Name)
	})
	parts := make([]string, len(sorted))
	for i, tc := range sorted {
		parts[i] = fmt.Sprintf("%s:%d", tc.Name, tc.Replicas)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
