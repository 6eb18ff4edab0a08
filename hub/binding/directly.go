package binding

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// ReasonWaitingForOldCopy is the event of a binding whose new copies wait
// until the copy of a cluster it left with purgeMode Directly is gone.
const ReasonWaitingForOldCopy = "WaitingForOldCopy"

// oldCopy is a copy, in a cluster the binding left with purgeMode
// Directly, that is not known to be gone.
type oldCopy struct {
	cluster string
	since   time.Time // when its Work was deleted; zero: not yet
	// fencedBy is when fencing will have stopped it; zero without fencing.
	fencedBy time.Time
}

// oldCopies are the copies new Works of src wait for: with purgeMode
// Directly the old copy goes first (as Karmada's checkDirectPurgeOrphanWorks)
// and, since Flotilla's agents may be cut off, a copy counts as gone only
// once its agent confirmed the deletion (the Work itself is gone, not a
// tombstone), or once fencing stopped it (the Work carries fencing and the
// hub has not heard from the agent for stopAfterSeconds plus
// eviction.FencingMargin), or once its Cluster is deleted or being deleted
// (the operator gave it up).
func (c *Controller) oldCopies(ctx context.Context, src *workSource, now time.Time) []oldCopy {
	var out []oldCopy
	for _, cluster := range eviction.DirectlyPurged(src.spec) {
		w := c.latest(controller.Key(v1alpha1.ExecutionNamespace(cluster), src.workName))
		if w == nil {
			continue
		}
		if cl := c.clusters.Get(cluster); cl == nil || cl.DeletionTimestamp != nil {
			continue
		}
		old := oldCopy{cluster: cluster}
		if w.DeletionTimestamp != nil {
			old.since = w.DeletionTimestamp.Time
		}
		if f := w.Spec.Fencing; f != nil && fencing(src.spec) != nil && w.Status.ObservedGeneration > 0 {
			// The agent acknowledged a version with fencing: it fences
			// when cut off, whatever the hub says meanwhile.
			old.fencedBy = c.fencedBy(ctx, cluster, time.Duration(f.StopAfterSeconds)*time.Second)
			if !old.fencedBy.IsZero() && !now.Before(old.fencedBy) {
				c.logger.Info("old copy counted as stopped: its agent has been cut off longer than its fencing allows",
					"binding", src.key, "cluster", cluster, "fencedBy", old.fencedBy)
				continue
			}
		}
		out = append(out, old)
	}
	return out
}

// fencedBy is when fencing will have stopped the copies in cluster, by the
// cluster's Lease; zero if it cannot tell.
func (c *Controller) fencedBy(ctx context.Context, cluster string, stopAfter time.Duration) time.Time {
	renewed, lease, err := controller.LastRenewal(ctx, c.clients.Kube, cluster)
	if err != nil {
		c.logger.Warn("cannot tell whether fencing stopped a cluster's copy", "cluster", cluster, "err", err)
	}
	if renewed.IsZero() {
		return time.Time{}
	}
	return eviction.FencedBy(renewed, stopAfter, lease)
}

// waitForOldCopies says on the binding what its new copies wait for, and
// asks to be woken when fencing will have stopped the old ones (a Work's
// deletion wakes it anyway).
func (c *Controller) waitForOldCopies(src *workSource, olds []oldCopy, now time.Time) {
	var wake time.Time
	parts := make([]string, 0, len(olds))
	for _, o := range olds {
		part := fmt.Sprintf("%s (its Work not yet deleted)", o.cluster)
		if !o.since.IsZero() {
			// An absolute time, not an age, so that the event of each
			// reconcile while waiting is the same and counted as one.
			part = fmt.Sprintf("%s (Work deleted at %s; waiting for the agent to confirm)", o.cluster, o.since.UTC().Format(time.RFC3339))
		}
		if !o.fencedBy.IsZero() {
			part += fmt.Sprintf(", stopped by fencing by %s at the latest if its agent stays cut off", o.fencedBy.UTC().Format(time.RFC3339))
			if wake.IsZero() || o.fencedBy.Before(wake) {
				wake = o.fencedBy
			}
		}
		parts = append(parts, part)
	}
	message := fmt.Sprintf("purgeMode Directly: no new copy until the old one is gone from %s. To go on without the agent's confirmation, "+
		"use failover.cluster.fencing, or delete the Cluster (its copy is then abandoned as it is)", strings.Join(parts, "; "))
	c.logger.Info("waiting for old copies", "binding", src.key, "message", message)
	c.recorder.Event(controller.BindingRef(src.binding), corev1.EventTypeNormal, ReasonWaitingForOldCopy, message)
	if !wake.IsZero() {
		c.queue.AddAfter(src.key, max(wake.Sub(now), 0)+time.Second)
	}
}

// WaitObserver is told about the bindings whose new copies wait for an
// old copy (purgeMode Directly), for the hub's metrics. Its functions are
// called from reconciles and must be quick.
type WaitObserver struct {
	// Waiting: n bindings wait now.
	Waiting func(n int)
	// Waited: a binding's new copies went ahead after waiting d.
	Waited func(d time.Duration)
}

// SetWaitObserver sets what is told of waits; call it before Run.
func (c *Controller) SetWaitObserver(o WaitObserver) { c.waitObserver = o }

// noteWaiting records that key's new copies wait, from now if they did
// not already.
func (c *Controller) noteWaiting(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.waitingSince[key]; ok {
		return
	}
	c.waitingSince[key] = now
	if c.waitObserver.Waiting != nil {
		c.waitObserver.Waiting(len(c.waitingSince))
	}
}

// noteWaitOver records that key's new copies no longer wait: they went
// ahead (wentAhead) or the binding or its template is gone.
func (c *Controller) noteWaitOver(key string, now time.Time, wentAhead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	since, ok := c.waitingSince[key]
	if !ok {
		return
	}
	delete(c.waitingSince, key)
	if wentAhead && c.waitObserver.Waited != nil {
		c.waitObserver.Waited(now.Sub(since))
	}
	if c.waitObserver.Waiting != nil {
		c.waitObserver.Waiting(len(c.waitingSince))
	}
}
