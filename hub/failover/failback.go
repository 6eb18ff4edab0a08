package failover

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
)

// failback keeps status.failbackClusters for a policy with failback: the
// clusters the taint manager evicted the binding from. Once one has been
// Ready for the stabilization period (and is neither placed nor still
// being evicted from), the binding gets a Fresh reschedule through
// spec.rescheduleTriggeredAt. It returns the clusters that triggered one.
func (c *Controller) failback(spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, evicted []eviction.Eviction,
	now time.Time, wake *wakeup) (triggered []string) {
	var fb *v1alpha1.Failback
	if spec.Failover != nil && spec.Failover.Cluster != nil {
		fb = spec.Failover.Cluster.Failback
	}
	if fb == nil {
		status.FailbackClusters = nil
		return nil
	}
	for _, e := range evicted {
		if e.Producer == eviction.ProducerTaintManager && !slices.ContainsFunc(status.FailbackClusters, func(f v1alpha1.FailbackCluster) bool { return f.Name == e.Cluster }) {
			status.FailbackClusters = append(status.FailbackClusters, v1alpha1.FailbackCluster{Name: e.Cluster, EvictedAt: metav1.NewTime(now)})
		}
	}
	stabilization := time.Duration(fb.StabilizationSeconds) * time.Second
	var keep []v1alpha1.FailbackCluster
	for _, f := range status.FailbackClusters {
		switch due, earliest, ok := c.failbackDue(spec, f.Name, stabilization, now); {
		case !ok:
			// gone, or placed again: nothing to come back to
		case due.IsZero():
			keep = append(keep, f) // not Ready, or still being evicted from
		case now.Before(due):
			wake.at(due)
			keep = append(keep, f)
		case triggeredSince(spec, earliest):
			// This failback's reschedule is stored; the list's removal
			// (written after it) is not yet seen. Triggering again would
			// reschedule twice.
		default:
			triggered = append(triggered, f.Name)
		}
	}
	status.FailbackClusters = keep
	if len(triggered) > 0 {
		t := metav1.NewTime(now)
		spec.RescheduleTriggeredAt = &t
	}
	return triggered
}

// failbackDue is when the binding may fail back to cluster: its Ready
// transition, at the instant this hub knows it stands for (instants.go:
// never earlier than it was), plus stabilization; zero while it is not
// Ready or the binding is still being evicted from it; ok false when there
// is nothing to fail back to (the cluster is gone or the binding is placed
// on it). earliest is the same from the transition as stored, to the
// second: no failback of this transition can have been made before it.
func (c *Controller) failbackDue(spec *v1alpha1.ResourceBindingSpec, cluster string, stabilization time.Duration, now time.Time) (due, earliest time.Time, ok bool) {
	cl := c.clusters.Get(cluster)
	if cl == nil || slices.ContainsFunc(spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == cluster }) {
		return time.Time{}, time.Time{}, false
	}
	cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ClusterConditionReady)
	if cond == nil || cond.Status != metav1.ConditionTrue || slices.Contains(spec.EvictingClusters(), cluster) {
		return time.Time{}, time.Time{}, true
	}
	due = c.clusterTimes.at(cluster, readyOf, &cond.LastTransitionTime, now).Add(stabilization)
	return due, cond.LastTransitionTime.Add(stabilization), true
}

// triggeredSince: a Fresh reschedule was requested at or after the
// earliest due (by a failback or a rebalancer), which is all a failback
// would ask for. rescheduleTriggeredAt is stored in whole seconds, so due
// is too.
func triggeredSince(spec *v1alpha1.ResourceBindingSpec, earliest time.Time) bool {
	return spec.RescheduleTriggeredAt != nil && !spec.RescheduleTriggeredAt.Time.Before(earliest.Truncate(time.Second))
}
