package failover

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
)

// Stats are the controller's counters and each zone's mode, for /debug/stats.
type Stats struct {
	Evictions  int64             `json:"evictions"`
	TasksEnded int64             `json:"evictionTasksEnded"`
	ZoneModes  map[string]string `json:"zoneModes"`
}

// Stats returns the counters and zone modes ("default" is the zone of
// clusters without spec.zone).
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	modes := c.zones.Modes()
	c.mu.Unlock()
	out := Stats{Evictions: c.evictions.Load(), TasksEnded: c.tasksEnded.Load(), ZoneModes: map[string]string{}}
	for zone, mode := range modes {
		out.ZoneModes[zoneName(zone)] = string(mode)
	}
	return out
}

// observeZones recomputes the zones' modes, records the changes and
// reports whether there were any.
func (c *Controller) observeZones() bool {
	list := c.clusters.List()
	health := make([]eviction.ClusterHealth, len(list))
	for i, cl := range list {
		health[i] = eviction.ClusterHealth{Name: cl.Name, Zone: cl.Spec.Zone, Ready: ready(cl)}
	}
	c.mu.Lock()
	changes := c.zones.Observe(health, c.clock.Now())
	c.mu.Unlock()
	for _, ch := range changes {
		c.logger.Info("zone mode changed", "zone", zoneName(ch.Zone), "from", ch.From, "to", ch.To, "notReady", ch.NotReady, "clusters", ch.Total)
		if ch.To == "" || ch.From == "" && ch.To == eviction.ModeNormal {
			continue // a zone gone, or a new one that is fine: nothing to tell
		}
		eventType, message := corev1.EventTypeNormal, fmt.Sprintf("zone %s: %s (%d of %d clusters not Ready)", zoneName(ch.Zone), ch.To, ch.NotReady, ch.Total)
		switch ch.To {
		case eviction.ModePartialDisruption:
			eventType, message = corev1.EventTypeWarning, message+"; evictions slowed"
		case eviction.ModeIsolated:
			eventType, message = corev1.EventTypeWarning, message+"; every cluster looks down, so the hub assumes it is the one cut off and evicts nothing"
		}
		c.recorder.Event(corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: "Zone", Name: zoneName(ch.Zone)}, eventType, "ZoneMode"+string(ch.To), message)
	}
	return len(changes) > 0
}

func zoneName(zone string) string {
	if zone == "" {
		return "default"
	}
	return zone
}
