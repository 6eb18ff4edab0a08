package failover

import (
	"time"
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
	// EvictionWaited: an eviction held back by its zone's rate went ahead
	// after waiting d.
	EvictionWaited func(zone string, d time.Duration)
}

// SetObserver sets what is told of evictions and tasks; call it before Run.
func (c *Controller) SetObserver(o Observer) { c.observer = o }

// heldEviction is an eviction the zone's rate holds back: since when, and
// the zone (as named in metrics).
type heldEviction struct {
	since time.Time
	zone  string
}

// holdKey names one binding's eviction from one cluster.
type holdKey struct{ binding, cluster string }

// hold notes that key's eviction from cluster waits for its zone (under
// c.mu).
func (c *Controller) holdLocked(key, cluster, zone string, now time.Time) {
	k := holdKey{key, cluster}
	if _, ok := c.held[k]; !ok {
		c.held[k] = heldEviction{since: now, zone: zoneName(zone)}
	}
}

// releaseLocked drops a held eviction, telling the observer how long it
// waited if it now goes ahead (under c.mu).
func (c *Controller) releaseLocked(key, cluster string, evicted bool, now time.Time) {
	k := holdKey{key, cluster}
	h, ok := c.held[k]
	if !ok {
		return
	}
	delete(c.held, k)
	if evicted && c.observer.EvictionWaited != nil {
		c.observer.EvictionWaited(h.zone, now.Sub(h.since))
	}
}

// forgetHeldLocked drops the held evictions of a deleted binding (under c.mu).
func (c *Controller) forgetHeldLocked(key string) {
	for k := range c.held {
		if k.binding == key {
			delete(c.held, k)
		}
	}
}

// EvictionsWaiting returns how many evictions each zone's rate holds back
// now.
func (c *Controller) EvictionsWaiting() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, h := range c.held {
		out[h.zone]++
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
