package failover

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/controller"
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

// fleetCounts are each zone's cluster counts, kept from the informer's
// events so that a change of one cluster costs no list of the fleet.
type fleetCounts struct {
	health map[string]eviction.ClusterHealth // by cluster name
	zones  map[string]eviction.ZoneCount
}

func newFleetCounts() fleetCounts {
	return fleetCounts{health: map[string]eviction.ClusterHealth{}, zones: map[string]eviction.ZoneCount{}}
}

// set counts cluster name as cur says (nil: deleted) instead of as before.
func (f fleetCounts) set(name string, cur *v1alpha1.Cluster) {
	if prev, ok := f.health[name]; ok {
		f.add(prev, -1)
		delete(f.health, name)
	}
	if cur != nil {
		h := eviction.ClusterHealth{Name: name, Zone: cur.Spec.Zone, Ready: ready(cur)}
		f.health[name] = h
		f.add(h, 1)
	}
}

func (f fleetCounts) add(h eviction.ClusterHealth, sign int) {
	n := f.zones[h.Zone]
	n.Total += sign
	if !h.Ready {
		n.NotReady += sign
	}
	if n.Total == 0 {
		delete(f.zones, h.Zone)
		return
	}
	f.zones[h.Zone] = n
}

// countCluster keeps the zone counts current (informer handler).
func (c *Controller) countCluster(old, cur *v1alpha1.Cluster) {
	c.mu.Lock()
	c.fleet.set(controller.Subject(old, cur).Name, cur)
	c.mu.Unlock()
}

// observeZones recomputes the zones' modes, records the changes and
// reports whether there were any.
func (c *Controller) observeZones() bool {
	c.mu.Lock()
	changes := c.zones.ObserveCounts(c.fleet.zones, c.clock.Now())
	admissions := c.zones.TakeChanges() // leaving isolation takes them back
	c.mu.Unlock()
	c.admissionsChanged(admissions)
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
