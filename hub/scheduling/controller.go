// Package scheduling runs the scheduler for bindings: when a binding's spec
// or the clusters change and the binding needs it (see scheduleNeeded), it
// computes the placement with the pure scheduler package and records the
// result in spec.clusters and the Scheduled condition.
package scheduling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/scheduler"
	"github.com/flotilla-io/flotilla/store"
)

// Controller schedules bindings.
type Controller struct {
	objs            *objects.Objects
	recorder        controller.Recorder
	clock           clock.PassiveClock
	logger          *slog.Logger
	bindings        *controller.Informer[v1alpha1.ResourceBinding, *v1alpha1.ResourceBinding]
	clusterBindings *controller.Informer[v1alpha1.ClusterResourceBinding, *v1alpha1.ClusterResourceBinding]
	clusters        controller.Source[*v1alpha1.Cluster]
	queue           *controller.Queue
}

// New returns a scheduling controller over objs; clusters is the hub's
// shared cluster informer.
func New(objs *objects.Objects, clusters controller.Source[*v1alpha1.Cluster], recorder controller.Recorder, clk clock.PassiveClock, logger *slog.Logger) *Controller {
	c := &Controller{objs: objs, recorder: recorder, clock: clk, logger: logger.With("controller", "scheduling")}
	c.bindings = controller.NewInformer(objs.Bindings, nil, logger)
	c.clusterBindings = controller.NewInformer(objs.ClusterBindings, nil, logger)
	c.clusters = clusters
	c.queue = controller.NewQueue("scheduling", c.reconcile, logger)
	// Only spec changes matter: status writes come every few seconds
	// during a rollout and would each cost a schedule.
	c.bindings.AddHandler(func(old, cur *v1alpha1.ResourceBinding) {
		if cur != nil && (old == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec)) {
			c.queue.Add(controller.Key(cur.Namespace, cur.Name))
		}
	})
	c.clusterBindings.AddHandler(func(old, cur *v1alpha1.ClusterResourceBinding) {
		if cur != nil && (old == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec)) {
			c.queue.Add(cur.Name)
		}
	})
	c.clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
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
	if namespace, name, namespaced := strings.Cut(key, "/"); namespaced {
		return schedule(ctx, c, c.objs.Bindings, namespace, name, func(b *v1alpha1.ResourceBinding) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus) {
			return &b.Spec, &b.Status
		})
	}
	return schedule(ctx, c, c.objs.ClusterBindings, "", key, func(b *v1alpha1.ClusterResourceBinding) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus) {
		return &b.Spec, &b.Status
	})
}

// schedule computes one binding's placement and stores what changed.
func schedule[T any, PT store.Object[T]](ctx context.Context, c *Controller, r *store.Resource[T, PT], namespace, name string,
	parts func(PT) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus)) error {
	stored, err := r.Get(ctx, namespace, name)
	if err != nil {
		return ignoreNotFound(err)
	}
	spec, status := parts(stored)
	if !scheduleNeeded(stored.GetGeneration(), spec, status) {
		return nil
	}
	fresh := freshRequested(spec, status)
	result, schedErr := scheduler.Schedule(scheduler.Input{
		Placement: spec.Placement, Replicas: spec.Replicas, Previous: spec.Clusters, Clusters: c.clusters.List(),
		Requirements: spec.ReplicaRequirements, Fresh: fresh, Evicted: spec.EvictingClusters(),
		ObservedAffinity: status.SchedulerObservedAffinityName,
		APIVersion:       spec.Resource.APIVersion, Kind: spec.Resource.Kind,
	})
	now := metav1.NewTime(c.clock.Now())
	cond := metav1.Condition{Type: v1alpha1.BindingConditionScheduled, ObservedGeneration: stored.GetGeneration()}
	changed, placed := false, false
	var unschedulable *scheduler.UnschedulableError
	switch {
	case schedErr == nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, v1alpha1.ReasonScheduled, "placed on "+summary(result.Clusters)
		if !equality.Semantic.DeepEqual(spec.Clusters, result.Clusters) {
			spec.Clusters = result.Clusters
			changed, placed = true, true
		}
		if placed || fresh {
			// A fresh schedule is done once, even when it changed nothing.
			status.LastScheduledTime, changed = &now, true
		}
		if status.SchedulerObservedAffinityName != result.AffinityName {
			status.SchedulerObservedAffinityName, changed = result.AffinityName, true
		}
	case errors.As(schedErr, &unschedulable):
		// The previous result stays: a workload keeps running where it is.
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, unschedulable.Reason, unschedulable.Error()
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, schedErr.Error()
	}
	if status.SchedulerObservedGeneration != stored.GetGeneration() {
		status.SchedulerObservedGeneration, changed = stored.GetGeneration(), true
	}
	condChanged := meta.SetStatusCondition(&status.Conditions, cond)
	if !changed && !condChanged {
		return nil
	}
	updated, err := r.Update(ctx, stored)
	if err != nil {
		return fmt.Errorf("store schedule of %s: %w", controller.Key(namespace, name), err)
	}
	ref := controller.BindingRef(updated)
	switch {
	case placed:
		c.recorder.Event(ref, corev1.EventTypeNormal, "Scheduled", "placed on "+summary(spec.Clusters))
	case condChanged && cond.Status == metav1.ConditionFalse:
		c.recorder.Event(ref, corev1.EventTypeWarning, "ScheduleFailed", cond.Message)
	}
	c.logger.Info("binding scheduled", "binding", controller.Key(namespace, name), "scheduled", cond.Status, "result", summary(spec.Clusters), "reason", cond.Reason)
	return nil
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
