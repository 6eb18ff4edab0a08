package failover

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
)

// tolerations are the placement's, with the default NoExecute ones.
func (c *Controller) tolerations(spec *v1alpha1.ResourceBindingSpec) []corev1.Toleration {
	var own []corev1.Toleration
	if spec.Placement != nil {
		own = spec.Placement.ClusterTolerations
	}
	return eviction.WithDefaultTolerations(own, c.cfg.DefaultNotReadyToleration, c.cfg.DefaultUnreachableToleration)
}

// dueEvictions returns the clusters of spec the binding must leave now, as
// far as each zone's admission of failed clusters allows.
func (c *Controller) dueEvictions(key string, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, tolerations []corev1.Toleration,
	now time.Time, wake *wakeup) ([]eviction.Eviction, []deferral) {
	c.mu.Lock()
	since := c.zones.GraceStart()
	c.mu.Unlock()
	// Outside c.mu: a PreferNoExecute taint asks the scheduler where the
	// replicas would go, which takes a while on a large fleet.
	verdicts := c.verdicts(spec, status, tolerations, since, now)
	purgeMode := ""
	if spec.Failover != nil && spec.Failover.Cluster != nil {
		purgeMode = spec.Failover.Cluster.PurgeMode
	}
	c.mu.Lock()
	c.keepHeldLocked(key, spec.Clusters)
	c.keepDeferredLocked(key, spec.Clusters)
	var out []eviction.Eviction
	var deferred []deferral
	for _, v := range verdicts {
		d := v.decision
		if v.stay == "" {
			c.undeferLocked(key, v.cluster)
		} else {
			if c.deferLocked(key, v.cluster, v.stay) {
				deferred = append(deferred, deferral{cluster: v.cluster, taint: d.Taint.Key + ":" + string(d.Taint.Effect), why: v.stay})
			}
			d.Evict = false // until a cluster changes (requeueDeferred) or another taint's time comes
		}
		if !d.Evict {
			c.releaseLocked(key, v.cluster, false, now)
			wake.at(d.At)
			continue
		}
		ok, retryAt := c.zones.Admit(v.zone, v.cluster, v.failedAt, now)
		if !ok {
			c.holdLocked(key, v.cluster, v.zone, now)
			wake.at(retryAt) // zero: until the zone's mode changes
			continue
		}
		c.releaseLocked(key, v.cluster, true, now)
		out = append(out, eviction.Eviction{
			Cluster: v.cluster, Reason: eviction.ReasonTaintUntolerated, Producer: eviction.ProducerTaintManager, PurgeMode: purgeMode,
			GracePeriod: ptr.To(c.defaultGraceSeconds()),
			Message:     fmt.Sprintf("cluster %s has taint %s:%s that the placement does not tolerate (any longer)", v.cluster, d.Taint.Key, d.Taint.Effect),
		})
	}
	admissions := c.zones.TakeChanges()
	c.mu.Unlock()
	c.admissionsChanged(admissions)
	return out, deferred
}

// verdict is what the taints of one cluster of a binding decide, and why
// the binding stays if a PreferNoExecute taint alone asks it to go.
type verdict struct {
	cluster, zone string
	failedAt      time.Time // the cluster's place in its zone's queue
	decision      eviction.Decision
	stay          string
}

// verdicts decides, for each cluster of spec the hub knows, whether its
// taints evict the binding.
func (c *Controller) verdicts(spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, tolerations []corev1.Toleration,
	since, now time.Time) []verdict {
	out := make([]verdict, 0, len(spec.Clusters))
	for _, tc := range spec.Clusters {
		cl := c.clusters.Get(tc.Name)
		if cl == nil {
			continue
		}
		v := verdict{cluster: tc.Name, zone: cl.Spec.Zone, failedAt: c.failedAt(cl, now),
			decision: eviction.Decide(c.preciseTaints(cl, now), tolerations, since, now)}
		if v.decision.Evict && v.decision.Conditional {
			v.stay = c.stayReason(spec, status, tc.Name)
		}
		out = append(out, v)
	}
	return out
}

// evictionRecords names each eviction's reason and its cluster's zone.
func (c *Controller) evictionRecords(evicted []eviction.Eviction) []evictionRecord {
	out := make([]evictionRecord, len(evicted))
	for i, e := range evicted {
		zone := ""
		if cl := c.clusters.Get(e.Cluster); cl != nil {
			zone = cl.Spec.Zone
		}
		out[i] = evictionRecord{reason: e.Reason, zone: zoneName(zone)}
	}
	return out
}
