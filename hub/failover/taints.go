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
// far as each zone's rate allows.
func (c *Controller) dueEvictions(key string, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, tolerations []corev1.Toleration,
	now time.Time, wake *wakeup) ([]eviction.Eviction, []deferral) {
	purgeMode := ""
	if spec.Failover != nil && spec.Failover.Cluster != nil {
		purgeMode = spec.Failover.Cluster.PurgeMode
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	since := c.zones.GraceStart()
	c.keepHeldLocked(key, spec.Clusters)
	c.keepDeferredLocked(key, spec.Clusters)
	var out []eviction.Eviction
	var deferred []deferral
	for _, tc := range spec.Clusters {
		cl := c.clusters.Get(tc.Name)
		if cl == nil {
			continue
		}
		d := eviction.Decide(c.preciseTaints(cl, now), tolerations, since, now)
		why := ""
		if d.Evict && d.Conditional {
			why = c.stayReason(spec, status, tc.Name)
		}
		if why == "" {
			c.undeferLocked(key, tc.Name)
		} else {
			if c.deferLocked(key, tc.Name, why) {
				deferred = append(deferred, deferral{cluster: tc.Name, taint: d.Taint.Key + ":" + string(d.Taint.Effect), why: why})
			}
			d.Evict = false // until a cluster changes (requeueDeferred) or another taint's time comes
		}
		if !d.Evict {
			c.releaseLocked(key, tc.Name, false, now)
			wake.at(d.At)
			continue
		}
		ok, retryAt := c.zones.Allow(cl.Spec.Zone, now)
		if !ok {
			c.holdLocked(key, tc.Name, cl.Spec.Zone, now)
			wake.at(retryAt) // zero: until the zone's mode changes
			continue
		}
		c.releaseLocked(key, tc.Name, true, now)
		out = append(out, eviction.Eviction{
			Cluster: tc.Name, Reason: eviction.ReasonTaintUntolerated, Producer: eviction.ProducerTaintManager, PurgeMode: purgeMode,
			GracePeriod: ptr.To(c.defaultGraceSeconds()),
			Message:     fmt.Sprintf("cluster %s has taint %s:%s that the placement does not tolerate (any longer)", tc.Name, d.Taint.Key, d.Taint.Effect),
		})
	}
	return out, deferred
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
