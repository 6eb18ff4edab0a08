package failover

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/scheduler"
)

// reasonDeferred is the event of an eviction a PreferNoExecute taint asks
// for that waits for a place to go.
const reasonDeferred = "EvictionDeferred"

// stayReason says why a binding asked to leave cluster by a
// PreferNoExecute taint must stay: empty when a healthy cluster with room
// can take what it runs there. "Healthy" is Ready (the scheduler already
// leaves out clusters with untolerated not-ready or unreachable taints);
// "room" is the replicas a cluster would gain against what its resource
// summary has left (only for workloads: bindings with replicas).
func (c *Controller) stayReason(spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, cluster string) string {
	gains, err := c.placedAfter(spec, status, []string{cluster}, nil)
	if err != nil {
		return "no other cluster fits: " + err.Error()
	}
	var why []string
	for _, g := range gains {
		cl := c.clusters.Get(g.Name)
		switch {
		case cl == nil || !ready(cl):
			why = append(why, fmt.Sprintf("%s is not Ready", g.Name))
		case spec.Replicas > 0:
			if room := scheduler.AvailableReplicas(cl, spec.ReplicaRequirements); room < int64(g.Replicas) {
				why = append(why, fmt.Sprintf("%s has room for %d of the %d replicas it would get", g.Name, room, g.Replicas))
			}
		}
	}
	return strings.Join(why, "; ")
}

// deferLocked notes that key's eviction from cluster waits for a place to
// go, and reports whether that is news (or a new reason) to announce
// (under c.mu).
func (c *Controller) deferLocked(key, cluster, why string) bool {
	byCluster := c.deferred[key]
	if byCluster == nil {
		byCluster = map[string]string{}
		c.deferred[key] = byCluster
	}
	if byCluster[cluster] == why {
		return false
	}
	byCluster[cluster] = why
	return true
}

// undeferLocked drops key's deferred eviction from cluster (under c.mu).
func (c *Controller) undeferLocked(key, cluster string) {
	delete(c.deferred[key], cluster)
	if len(c.deferred[key]) == 0 {
		delete(c.deferred, key)
	}
}

// keepDeferredLocked drops key's deferred evictions from clusters no
// longer in its placement (under c.mu).
func (c *Controller) keepDeferredLocked(key string, placed []v1alpha1.TargetCluster) {
	for cluster := range c.deferred[key] {
		if !slices.ContainsFunc(placed, func(tc v1alpha1.TargetCluster) bool { return tc.Name == cluster }) {
			c.undeferLocked(key, cluster)
		}
	}
}

// announceDeferred records an event and logs a line for an eviction that
// waits for a place to go.
func (c *Controller) announceDeferred(obj metav1.Object, spec *v1alpha1.ResourceBindingSpec, d deferral) {
	key := controller.Key(obj.GetNamespace(), obj.GetName())
	c.logger.Info("eviction deferred: no healthy cluster with room", "binding", key, "cluster", d.cluster, "taint", d.taint, "why", d.why)
	message := fmt.Sprintf("eviction from %s deferred: its taint %s asks the workload to leave only for a healthy cluster with room, and %s; it stays there until one can take it",
		d.cluster, d.taint, d.why)
	c.recorder.Event(controller.BindingRef(obj), corev1.EventTypeWarning, reasonDeferred, message)
	c.recorder.Event(controller.TemplateRef(spec.Resource), corev1.EventTypeWarning, reasonDeferred, message)
}

// deferral is an eviction deferred by this reconcile, to announce.
type deferral struct{ cluster, taint, why string }

// requeueDeferred queues the bindings whose evictions wait for a place to
// go, when a cluster changed in a way that may give them one: readiness,
// taints or room.
func (c *Controller) requeueDeferred(old, cur *v1alpha1.Cluster) {
	if old != nil && cur != nil && !healthChanged(old, cur) && equality.Semantic.DeepEqual(old.Status.ResourceSummary, cur.Status.ResourceSummary) {
		return
	}
	c.mu.Lock()
	keys := make([]string, 0, len(c.deferred))
	for key := range c.deferred {
		keys = append(keys, key)
	}
	c.mu.Unlock()
	for _, key := range keys {
		c.queue.Add(key)
	}
}
