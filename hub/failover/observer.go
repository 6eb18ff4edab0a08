package failover

import (
	"slices"
	"time"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Observer is told what the controller decides, for the hub's metrics.
// Its functions are called from reconciles and must be quick.
type Observer struct {
	// Evicted: a binding was evicted from a cluster of zone for reason.
	Evicted func(reason, zone string)
	// TaskEnded: a graceful eviction task ended with outcome (why it was
	// over: ReplacementHealthy, GracePeriodExpired, ClusterRecovered,
	// NoReplacement, ...).
	TaskEnded func(outcome string)
	// ClusterAdmitted: a failed cluster of zone was admitted to eviction.
	ClusterAdmitted func(zone string)
	// EvictionWaited: an eviction held back (its cluster waited for
	// admission, or the ceiling on bindings) went ahead after waiting d.
	EvictionWaited func(zone string, d time.Duration)
	// EvictionProcessed: the evictions of binding key were written (err
	// nil) or failed to be (err set, they are tried again), taking d.
	EvictionProcessed func(key string, d time.Duration, err error)
	// StateNotPreserved: an eviction whose policy preserves state went on
	// without it, for reason: StateStatusNotCollected or StateRuleFailed.
	StateNotPreserved func(reason string)
}

// Reasons an eviction's state was not preserved, as the observer is told.
const (
	// StateStatusNotCollected: the cluster never reported the workload's
	// status.
	StateStatusNotCollected = "StatusNotCollected"
	// StateRuleFailed: a statePreservation rule found no valid label value.
	StateRuleFailed = "RuleFailed"
)

// SetObserver sets what is told of evictions and tasks; call it before Run.
func (c *Controller) SetObserver(o Observer) { c.observer = o }

// heldEviction is an eviction the zone's rate holds back: since when, and
// the zone (as named in metrics).
type heldEviction struct {
	since time.Time
	zone  string
}

// holdLocked notes that key's eviction from cluster waits for its zone
// (under c.mu).
func (c *Controller) holdLocked(key, cluster, zone string, now time.Time) {
	byCluster := c.held[key]
	if byCluster == nil {
		byCluster = map[string]heldEviction{}
		c.held[key] = byCluster
	}
	if _, ok := byCluster[cluster]; !ok {
		byCluster[cluster] = heldEviction{since: now, zone: zoneName(zone)}
	}
}

// releaseLocked drops a held eviction, telling the observer how long it
// waited if it now goes ahead (under c.mu).
func (c *Controller) releaseLocked(key, cluster string, evicted bool, now time.Time) {
	h, ok := c.held[key][cluster]
	if !ok {
		return
	}
	delete(c.held[key], cluster)
	if len(c.held[key]) == 0 {
		delete(c.held, key)
	}
	if evicted && c.observer.EvictionWaited != nil {
		c.observer.EvictionWaited(h.zone, now.Sub(h.since))
	}
}

// keepHeldLocked drops key's held evictions from clusters no longer in
// its placement (under c.mu).
func (c *Controller) keepHeldLocked(key string, placed []v1alpha1.TargetCluster) {
	for cluster := range c.held[key] {
		if !slices.ContainsFunc(placed, func(tc v1alpha1.TargetCluster) bool { return tc.Name == cluster }) {
			delete(c.held[key], cluster)
		}
	}
	if len(c.held[key]) == 0 {
		delete(c.held, key)
	}
}

// forgetHeldLocked drops the held evictions of a deleted binding (under c.mu).
func (c *Controller) forgetHeldLocked(key string) { delete(c.held, key) }

// EvictionsWaiting returns how many evictions each zone's rate holds back
// now.
func (c *Controller) EvictionsWaiting() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, byCluster := range c.held {
		for _, h := range byCluster {
			out[h.zone]++
		}
	}
	return out
}

// EvictionsDeferred returns how many evictions PreferNoExecute taints ask
// for wait now for a healthy cluster with room.
func (c *Controller) EvictionsDeferred() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, byCluster := range c.deferred {
		n += len(byCluster)
	}
	return n
}

// HeldEviction is an eviction due that its zone's rate holds back.
type HeldEviction struct {
	// Binding is the binding's key: namespace/name, or the name of a
	// ClusterResourceBinding.
	Binding string
	Cluster string
}

// HeldEvictions lists the evictions the zones' rates hold back now.
func (c *Controller) HeldEvictions() []HeldEviction {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []HeldEviction
	for key, byCluster := range c.held {
		for cluster := range byCluster {
			out = append(out, HeldEviction{Binding: key, Cluster: cluster})
		}
	}
	return out
}

// observeDecisions tells the observer what a reconcile stored.
func (c *Controller) observeDecisions(evicted []evictionRecord, ended []endedTask) {
	for _, e := range evicted {
		if c.observer.Evicted != nil {
			c.observer.Evicted(e.reason, e.zone)
		}
	}
	for _, t := range ended {
		if c.observer.TaskEnded != nil {
			c.observer.TaskEnded(t.reason)
		}
	}
}

// evictionRecord is an eviction with its cluster's zone.
type evictionRecord struct{ reason, zone string }
