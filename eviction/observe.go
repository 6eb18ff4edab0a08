package eviction

import (
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// ZoneCount is how many clusters a zone has and how many are not Ready.
type ZoneCount struct {
	Total, NotReady int
}

// Observe sets each zone's mode from the clusters (the full list every
// time; zones that disappear are dropped) and returns the changes, sorted
// by zone. Per zone with n clusters, d not Ready: d == n -> FullDisruption;
// else d > 2 and d/n >= UnhealthyThreshold -> PartialDisruption; else
// Normal. If every zone is in FullDisruption (and there is at least one
// cluster), every zone is Isolated instead. Leaving Isolated (any zone had a
// Ready cluster again) records now as GraceStart and takes back every
// admission to eviction. Cluster rates: Normal and FullDisruption ->
// ClusterRate; PartialDisruption -> SecondaryClusterRate if n >
// LargeZoneThreshold else 0; Isolated -> 0.
//
// These are the rules of the Kubernetes node lifecycle controller, with
// zones of clusters for zones of nodes: a zone that is wholly down is most
// likely really down (evict at the normal rate), a zone that is mostly down
// may be a partial network failure (slow down), and everything down at
// once is more likely the hub's own network.
func (z *Zones) Observe(clusters []ClusterHealth, now time.Time) []ModeChange {
	counts := map[string]ZoneCount{}
	for _, c := range clusters {
		n := counts[c.Zone]
		n.Total++
		if !c.Ready {
			n.NotReady++
		}
		counts[c.Zone] = n
	}
	return z.ObserveCounts(counts, now)
}

// ObserveCounts is Observe for a caller that keeps each zone's counts
// itself (a fleet of 10,000 clusters need not be listed on every change).
// Zones with no cluster (Total 0) count as gone.
func (z *Zones) ObserveCounts(counts map[string]ZoneCount, now time.Time) []ModeChange {
	present := make(map[string]ZoneCount, len(counts))
	for name, n := range counts {
		if n.Total > 0 {
			present[name] = n
		}
	}
	counts = present
	modes := z.modes(counts)
	isolated := len(counts) > 0 && allFull(modes)
	if isolated {
		for name := range modes {
			modes[name] = ModeIsolated
		}
	}
	if z.isolated && !isolated {
		z.graceStart = now
		z.revokeAll(now)
	}
	z.isolated = isolated

	changes := z.dropMissing(counts)
	for name, n := range counts {
		if c, ok := z.update(name, modes[name], n, now); ok {
			changes = append(changes, c)
		}
	}
	slices.SortFunc(changes, func(a, b ModeChange) int { return strings.Compare(a.Zone, b.Zone) })
	return changes
}

// dropMissing forgets the zones that have no cluster any more and reports
// those that had been observed.
func (z *Zones) dropMissing(counts map[string]ZoneCount) []ModeChange {
	var changes []ModeChange
	for name, zn := range z.zones {
		if _, ok := counts[name]; ok {
			continue
		}
		if zn.mode != "" {
			changes = append(changes, ModeChange{Zone: name, From: zn.mode})
		}
		delete(z.zones, name)
	}
	return changes
}

// modes computes each zone's mode from its counts, before isolation.
func (z *Zones) modes(counts map[string]ZoneCount) map[string]Mode {
	modes := make(map[string]Mode, len(counts))
	for name, n := range counts {
		switch {
		case n.NotReady == n.Total:
			modes[name] = ModeFullDisruption
		case n.NotReady > 2 && float64(n.NotReady)/float64(n.Total) >= z.cfg.UnhealthyThreshold:
			modes[name] = ModePartialDisruption
		default:
			modes[name] = ModeNormal
		}
	}
	return modes
}

func allFull(modes map[string]Mode) bool {
	for _, m := range modes {
		if m != ModeFullDisruption {
			return false
		}
	}
	return true
}

// update sets one zone's mode and limit, and reports a change of mode.
// The limit is set on every call, not only on a mode change: a zone in
// PartialDisruption can grow past LargeZoneThreshold without changing mode.
func (z *Zones) update(name string, mode Mode, n ZoneCount, now time.Time) (ModeChange, bool) {
	limit := z.limit(mode, n.Total)
	zn := z.zones[name]
	if zn == nil {
		zn = z.newZone(limit)
		z.zones[name] = zn
	}
	if zn.limit != limit {
		// At now, so that tokens earned at the old rate are kept and the
		// new rate applies from now on.
		zn.limiter.SetLimitAt(now, rate.Limit(max(limit, 0)))
		zn.limit = limit
	}
	from := zn.mode
	zn.mode = mode
	if from == mode {
		return ModeChange{}, false
	}
	return ModeChange{Zone: name, From: from, To: mode, NotReady: n.NotReady, Total: n.Total}, true
}

// limit is a zone's admission rate (clusters per second) in a mode.
func (z *Zones) limit(mode Mode, total int) float64 {
	switch mode {
	case ModeNormal, ModeFullDisruption:
		return z.cfg.ClusterRate
	case ModePartialDisruption:
		if total > z.cfg.LargeZoneThreshold {
			return z.cfg.SecondaryClusterRate
		}
	}
	return 0
}
