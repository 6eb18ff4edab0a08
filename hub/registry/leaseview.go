package registry

import (
	"time"

	"github.com/flotilla-io/flotilla/hub/dashboard"
)

// renewalHistory is how many recent renewals each cluster keeps for the
// dashboard's lease history.
const renewalHistory = 32

// renewalRing holds a cluster's most recent renewals.
type renewalRing struct {
	times [renewalHistory]time.Time
	next  int
	n     int
}

func (r *renewalRing) add(t time.Time) {
	r.times[r.next] = t
	r.next = (r.next + 1) % renewalHistory
	r.n = min(r.n+1, renewalHistory)
}

// list returns the renewals, oldest first.
func (r *renewalRing) list() []time.Time {
	out := make([]time.Time, 0, r.n)
	for i := range r.n {
		out = append(out, r.times[(r.next-r.n+i+renewalHistory)%renewalHistory])
	}
	return out
}

// Lease is the dashboard's read-only view of a cluster's lease as the
// registry holds it in memory: the stored Lease is written in batches and
// lags by up to --lease-flush-interval.
func (r *Registry) Lease(cluster string) (dashboard.Lease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[cluster]
	if !ok {
		return dashboard.Lease{}, false
	}
	return dashboard.Lease{
		Cluster: cluster, LastRenewal: e.obs.LastRenewal, Duration: e.obs.LeaseDuration,
		Renewals: e.renewals.list(), LastStatus: e.lastStatus, Connected: e.session != "",
	}, true
}

// OnLeaseChange registers fn, called with a cluster's name (under the
// registry's lock: fn must be quick and must not call back) whenever its
// lease is renewed, its agent connects or disconnects, or it reports its
// status.
func (r *Registry) OnLeaseChange(fn func(cluster string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leaseObservers = append(r.leaseObservers, fn)
}

func (r *Registry) leaseChangedLocked(cluster string) {
	for _, fn := range r.leaseObservers {
		fn(cluster)
	}
}
