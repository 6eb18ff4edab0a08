package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// Admission of failed clusters to eviction. Each zone admits its failed
// clusters one at a time (eviction.Zones.Admit); every binding on an
// admitted cluster may then be evicted at once. The admission is recorded
// on the Cluster (v1alpha1.AnnotationEvictionAdmitted, the time it was
// given), so that a restarted hub or a new leader gives it back instead
// of queueing the cluster again, and the zone's bucket counts from it. A
// record counts while the cluster still carries a NoExecute taint added
// no later than the admission (the same failure); the record of a cluster
// that recovered, or failed again while no hub watched, is removed.

// reasonAdmitted is the event of a cluster admitted to eviction.
const reasonAdmitted = "EvictionAdmitted"

// failedAt is when a cluster's failure began, for its place in its zone's
// queue: the earliest timeAdded of its NoExecute taints as stored (to the
// second, so that a restarted hub orders the clusters the same); a taint
// without one counts from when this hub first saw it. Zero without
// NoExecute taints.
func (c *Controller) failedAt(cl *v1alpha1.Cluster, now time.Time) time.Time {
	return earliestNoExecute(cl, func(t *corev1.Taint) time.Time { return c.clusterTimes.at(cl.Name, taintOf(t), nil, now) })
}

// earliestNoExecute is the earliest timeAdded of cl's NoExecute taints,
// unstamped(taint) for those without one.
func earliestNoExecute(cl *v1alpha1.Cluster, unstamped func(*corev1.Taint) time.Time) time.Time {
	var out time.Time
	for i := range cl.Spec.Taints {
		t := &cl.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		var added time.Time
		if t.TimeAdded != nil && !t.TimeAdded.IsZero() {
			added = t.TimeAdded.Time
		} else {
			added = unstamped(t)
		}
		if out.IsZero() || added.Before(out) {
			out = added
		}
	}
	return out
}

// failing reports whether a cluster carries a NoExecute taint: while it
// does, its admission stands.
func failing(cl *v1alpha1.Cluster) bool {
	if cl == nil {
		return false
	}
	for _, t := range cl.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// forgetRecovered drops the admission of a cluster that no longer carries
// a NoExecute taint, or is gone (informer handler).
func (c *Controller) forgetRecovered(old, cur *v1alpha1.Cluster) {
	if failing(cur) {
		return
	}
	now := c.clock.Now()
	c.mu.Lock()
	c.zones.Forget(controller.Subject(old, cur).Name, now)
	changes := c.zones.TakeChanges()
	c.mu.Unlock()
	c.admissionsChanged(changes)
}

// admissionsChanged tells of admissions given and taken back, and has
// their records written. An admitted cluster's bindings are queued: those
// waiting for it go now rather than at the turn they were told to wait
// for.
func (c *Controller) admissionsChanged(changes []eviction.AdmissionChange) {
	for _, ch := range changes {
		c.admissions.Add(ch.Cluster)
		if !ch.Admitted {
			c.logger.Info("cluster's admission to eviction taken back", "cluster", ch.Cluster, "zone", zoneName(ch.Zone))
			continue
		}
		c.logger.Info("cluster admitted to eviction", "cluster", ch.Cluster, "zone", zoneName(ch.Zone), "clustersWaiting", ch.Waiting)
		if c.observer.ClusterAdmitted != nil {
			c.observer.ClusterAdmitted(zoneName(ch.Zone))
		}
		ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindCluster, Name: ch.Cluster}
		if cl := c.clusters.Get(ch.Cluster); cl != nil {
			ref.UID = cl.UID
		}
		c.recorder.Event(ref, corev1.EventTypeNormal, reasonAdmitted, fmt.Sprintf(
			"admitted to eviction in zone %s (%d more clusters of the zone waiting): every workload that does not tolerate its NoExecute taints leaves it now",
			zoneName(ch.Zone), ch.Waiting))
		c.requeueOn(ch.Cluster)
	}
}

// restoreAdmissions gives back the admissions recorded on the clusters
// (Run, once the informers have listed and the zones are observed), and
// queues the removal of the records that no longer count.
func (c *Controller) restoreAdmissions() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clusters.List() {
		value, ok := cl.Annotations[v1alpha1.AnnotationEvictionAdmitted]
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, value)
		// A taint added after the admission is a later failure.
		if err != nil || !failing(cl) || earliestNoExecute(cl, func(*corev1.Taint) time.Time { return at }).After(at) {
			c.logger.Info("eviction admission record no longer counts: removing it", "cluster", cl.Name, "record", value)
			c.admissions.Add(cl.Name)
			continue
		}
		c.zones.Restore(cl.Name, cl.Spec.Zone, at)
		c.logger.Info("cluster's admission to eviction restored", "cluster", cl.Name, "zone", zoneName(cl.Spec.Zone), "admittedAt", at)
	}
}

// syncAdmission makes a cluster's admission record say what the zones
// hold (the admissions queue's reconcile): the time of its admission, or
// no record.
func (c *Controller) syncAdmission(ctx context.Context, name string) error {
	cl := c.clusters.Get(name)
	if cl == nil {
		return nil
	}
	c.mu.Lock()
	a, admitted := c.zones.Admitted(name)
	c.mu.Unlock()
	var want *string
	if admitted {
		want = ptr.To(a.At.UTC().Format(time.RFC3339Nano)) // exact: the zone's next token counts from it
	}
	have, recorded := cl.Annotations[v1alpha1.AnnotationEvictionAdmitted]
	if recorded == admitted && (!admitted || have == *want) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{v1alpha1.AnnotationEvictionAdmitted: want}}})
	if err != nil {
		return fmt.Errorf("encode the eviction admission record of cluster %s: %w", name, err)
	}
	_, err = c.clusterClient.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: controller.FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record the eviction admission of cluster %s: %w", name, err)
	}
	return nil
}

// ClustersWaiting returns how many failed clusters wait for admission to
// eviction, per zone ("default" for clusters without spec.zone).
func (c *Controller) ClustersWaiting() map[string]int {
	c.mu.Lock()
	waiting := c.zones.Waiting()
	c.mu.Unlock()
	out := make(map[string]int, len(waiting))
	for zone, n := range waiting {
		out[zoneName(zone)] += n
	}
	return out
}
