package eviction

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Admission is a cluster admitted to eviction: its zone and when.
type Admission struct {
	Zone string
	At   time.Time
}

// AdmissionChange is an admission given (Admitted) or taken back: the
// cluster recovered, was deleted, or the hub left isolation.
type AdmissionChange struct {
	Cluster, Zone string
	Admitted      bool
	At            time.Time // when it was given or taken back
	// Waiting is how many clusters of the zone still wait (given only).
	Waiting int
}

// waiter is a cluster that asked for admission: its zone and when its
// NoExecute taints began (the order of the queue).
type waiter struct {
	zone     string
	failedAt time.Time
}

// Admit says whether a binding may be evicted now from cluster, of zone,
// whose NoExecute taints began at failedAt (the earliest timeAdded it
// carries; it orders the clusters waiting in a zone, earliest first, then
// by name).
//
// The zone's bucket admits failed clusters, not bindings, as Kubernetes'
// node lifecycle controller admits nodes to tainting: a cluster asks the
// first time one of its bindings is due, waits its turn, and once admitted
// stays admitted until Forget (it recovered) or the hub leaves isolation;
// every binding on it may then go at once, unless the optional ceiling
// (ZoneConfig.BindingRate) holds it back. ok=false with retryAt = when it
// is worth asking again (its turn, or the ceiling's next token), or zero
// when the zone evicts nothing now: Isolated (no zone evicts, admitted
// clusters included) or a zone whose rate is 0 in its mode (a halt, as a
// rate of 0 is in Kubernetes: admitted clusters wait too, until the mode
// changes). A zone not observed yet admits at ClusterRate. Admissions are
// reported by TakeChanges.
func (z *Zones) Admit(zone, cluster string, failedAt, now time.Time) (ok bool, retryAt time.Time) {
	zn := z.zoneFor(zone)
	if _, admitted := z.admitted[cluster]; !admitted {
		z.waiting[cluster] = waiter{zone: zone, failedAt: failedAt}
	}
	if z.isolated || zn.limit <= 0 {
		return false, time.Time{}
	}
	if _, admitted := z.admitted[cluster]; !admitted {
		z.admitNext(zone, zn, now)
		if _, admitted = z.admitted[cluster]; !admitted {
			return false, now.Add(untilToken(zn.limiter.TokensAt(now)-float64(z.ahead(zone, cluster)), zn.limit))
		}
	}
	if zn.ceiling == nil || zn.ceiling.AllowN(now, 1) {
		return true, time.Time{}
	}
	return false, now.Add(untilToken(zn.ceiling.TokensAt(now), z.cfg.BindingRate))
}

// admitNext admits the first cluster waiting in zone if the bucket holds
// a token (burst 1: at most one at a time).
func (z *Zones) admitNext(zone string, zn *zone, now time.Time) {
	queue := z.queue(zone)
	if len(queue) == 0 || !zn.limiter.AllowN(now, 1) {
		return
	}
	first := queue[0]
	delete(z.waiting, first)
	z.admitted[first] = Admission{Zone: zone, At: now}
	z.changes = append(z.changes, AdmissionChange{Cluster: first, Zone: zone, Admitted: true, At: now, Waiting: len(queue) - 1})
}

// queue is the clusters waiting in zone, in the order they are admitted.
func (z *Zones) queue(zone string) []string {
	var out []string
	for name, w := range z.waiting {
		if w.zone == zone {
			out = append(out, name)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(z.waiting[a].failedAt.Compare(z.waiting[b].failedAt), strings.Compare(a, b))
	})
	return out
}

// ahead is how many clusters of zone wait before cluster.
func (z *Zones) ahead(zone, cluster string) int {
	return slices.Index(z.queue(zone), cluster)
}

// Forget drops a cluster's admission, or its place in the queue: it no
// longer carries a NoExecute taint, or it is gone. Failing again, it asks
// again.
func (z *Zones) Forget(cluster string, now time.Time) {
	delete(z.waiting, cluster)
	if a, ok := z.admitted[cluster]; ok {
		delete(z.admitted, cluster)
		z.changes = append(z.changes, AdmissionChange{Cluster: cluster, Zone: a.Zone, At: now})
	}
}

// revokeAll takes back every admission: the hub left isolation, and the
// clusters still down queue again, as Kubernetes taints its nodes again
// after a full disruption.
func (z *Zones) revokeAll(now time.Time) {
	for _, cluster := range slices.Sorted(maps.Keys(z.admitted)) {
		z.Forget(cluster, now)
	}
}

// Restore admits a cluster admitted before this Zones existed (by the
// hub before a restart, or the leader before a failover), at, as recorded;
// the zone's bucket counts from the latest restored admission, so that a
// restart hands out no extra token. Call it before Admit, after the first
// Observe. It reports no change.
func (z *Zones) Restore(cluster, zone string, at time.Time) {
	delete(z.waiting, cluster)
	z.admitted[cluster] = Admission{Zone: zone, At: at}
	zn := z.zoneFor(zone)
	if at.After(zn.restored) {
		zn.restored = at
		zn.limiter = rate.NewLimiter(rate.Limit(max(zn.limit, 0)), 1)
		zn.limiter.AllowN(at, 1)
	}
}

// Admitted returns a cluster's admission, if it has one.
func (z *Zones) Admitted(cluster string) (Admission, bool) {
	a, ok := z.admitted[cluster]
	return a, ok
}

// TakeChanges returns the admissions given and taken back since the last
// call, in order.
func (z *Zones) TakeChanges() []AdmissionChange {
	out := z.changes
	z.changes = nil
	return out
}

// Waiting returns how many clusters wait for admission, per zone.
func (z *Zones) Waiting() map[string]int {
	out := map[string]int{}
	for _, w := range z.waiting {
		out[w.zone]++
	}
	return out
}
