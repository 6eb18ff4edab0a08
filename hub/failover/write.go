package failover

import (
	"context"
	"errors"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// maxStatusAttempts bounds the writes of one change when other
// controllers write the same binding at the same time.
const maxStatusAttempts = 5

// errSpecChanged: the binding's spec changed between the read the
// decisions were made on and their write; they are made again on the new
// version.
var errSpecChanged = errors.New("the binding's spec changed meanwhile")

// store writes want's decisions over read, the version they were made on,
// and returns the binding as written. The failback clusters added go
// first (status): an eviction stored without them would leave a binding
// that never fails back, while failback clusters stored without their
// eviction are dropped by the next reconcile. Then the spec (evictions,
// tasks ended, failback triggers). Then the failback clusters removed: a
// failback trigger stored without its removal only triggers once more.
func (c *Controller) store(ctx context.Context, key string, read, want controller.Binding) (controller.Binding, error) {
	cur, wantList := read, want.Status().FailbackClusters
	var err error
	if added := additions(read.Status().FailbackClusters, wantList); len(added) > 0 {
		cur, err = c.writeFailback(ctx, key, cur, 0, func(list []v1alpha1.FailbackCluster) []v1alpha1.FailbackCluster {
			for _, f := range added {
				if !slices.ContainsFunc(list, func(g v1alpha1.FailbackCluster) bool { return g.Name == f.Name }) {
					list = append(slices.Clone(list), f)
				}
			}
			return list
		})
		if err != nil {
			return controller.Binding{}, err
		}
	}
	if !equality.Semantic.DeepEqual(read.Spec(), want.Spec()) {
		if cur.Object().GetGeneration() != read.Object().GetGeneration() {
			return controller.Binding{}, errSpecChanged
		}
		if cur, err = c.updateSpec(ctx, key, cur, want.Spec()); err != nil {
			return controller.Binding{}, err
		}
	}
	generation := cur.Object().GetGeneration()
	out, err := c.writeFailback(ctx, key, cur, generation, func([]v1alpha1.FailbackCluster) []v1alpha1.FailbackCluster { return wantList })
	if err != nil && cur.Object().GetGeneration() != read.Object().GetGeneration() {
		// The spec is stored: its decisions happened and are recorded; the
		// failback list is put right by the next reconcile.
		c.logger.Warn("failback clusters not stored; retrying", "binding", key, "err", err)
		c.queue.AddAfter(key, time.Second)
		return cur, nil
	}
	return out, err
}

// additions are the failback clusters of want that have is without.
func additions(have, want []v1alpha1.FailbackCluster) []v1alpha1.FailbackCluster {
	var out []v1alpha1.FailbackCluster
	for _, f := range want {
		if !slices.ContainsFunc(have, func(g v1alpha1.FailbackCluster) bool { return g.Name == f.Name }) {
			out = append(out, f)
		}
	}
	return out
}

// updateSpec writes spec over base with Update. A conflict with another
// controller's status write is no reason to decide again: while the latest
// version has base's generation and the status failover decides on
// (schedulerObservedGeneration, lastScheduledTime, the Scheduled
// condition, the failback clusters), the spec is written over it at once.
// Otherwise the conflict goes back to the queue, which retries once the
// informer has the new version.
func (c *Controller) updateSpec(ctx context.Context, key string, base controller.Binding, spec *v1alpha1.ResourceBindingSpec) (controller.Binding, error) {
	w := base.DeepCopy()
	*w.Spec() = *spec.DeepCopy()
	for attempt := 1; ; attempt++ {
		updated, err := c.api.Update(ctx, w)
		if !apierrors.IsConflict(err) || attempt == maxStatusAttempts {
			return updated, err
		}
		latest, getErr := c.api.Get(ctx, key)
		if getErr != nil || latest.Object().GetGeneration() != base.Object().GetGeneration() || !sameFailoverStatus(base.Status(), latest.Status()) {
			return controller.Binding{}, err
		}
		w = latest
		*w.Spec() = *spec.DeepCopy()
	}
}

// sameFailoverStatus compares the status fields failover decides on.
func sameFailoverStatus(a, b *v1alpha1.ResourceBindingStatus) bool {
	return a.SchedulerObservedGeneration == b.SchedulerObservedGeneration && equality.Semantic.DeepEqual(a.LastScheduledTime, b.LastScheduledTime) &&
		equality.Semantic.DeepEqual(meta.FindStatusCondition(a.Conditions, v1alpha1.BindingConditionScheduled), meta.FindStatusCondition(b.Conditions, v1alpha1.BindingConditionScheduled)) &&
		equality.Semantic.DeepEqual(a.FailbackClusters, b.FailbackClusters)
}

// writeFailback sets status.failbackClusters to list(current list) through
// the status subresource, unless that changes nothing, and returns the
// binding as written. The failback clusters are failover's alone: on a
// conflict the change is applied to the latest version, if it still has
// generation (0: any), and written again.
func (c *Controller) writeFailback(ctx context.Context, key string, b controller.Binding, generation int64,
	list func([]v1alpha1.FailbackCluster) []v1alpha1.FailbackCluster) (controller.Binding, error) {
	cur := b.DeepCopy()
	for attempt := 1; ; attempt++ {
		next := list(cur.Status().FailbackClusters)
		if equality.Semantic.DeepEqual(next, cur.Status().FailbackClusters) {
			return cur, nil
		}
		cur.Status().FailbackClusters = next
		updated, err := c.api.UpdateStatus(ctx, cur)
		if err == nil {
			return updated, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxStatusAttempts {
			return controller.Binding{}, err
		}
		latest, getErr := c.api.Get(ctx, key)
		if getErr != nil {
			return controller.Binding{}, getErr
		}
		if generation != 0 && latest.Object().GetGeneration() != generation {
			return controller.Binding{}, err
		}
		cur = latest
	}
}
