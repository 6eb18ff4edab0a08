package hub

import (
	"github.com/flotilla-io/flotilla/hub/handover"
)

// Sessions is the registry's session table for the standbys: per
// cluster, its last renewal and whether its agent is renewing: a session
// serves it and its last renewal is at most two renewal intervals old (a
// quarter of the lease each, as the hub asks agents). A session alone is
// not enough: a SIGKILLed agent's QUIC connection stays open until the
// idle timeout.
func (r *Registry) Sessions(leader string) *handover.Table {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	t := &handover.Table{Leader: leader, TakenAt: now, Sessions: make([]handover.Session, 0, len(r.entries))}
	for name, e := range r.entries {
		leaseDuration := e.obs.LeaseDuration
		if leaseDuration == 0 {
			leaseDuration = r.cfg.Health.DefaultLeaseDuration
		}
		renewing := e.session != "" && !e.obs.LastRenewal.IsZero() && now.Sub(e.obs.LastRenewal) <= leaseDuration/2
		t.Sessions = append(t.Sessions, handover.Session{Cluster: name, Renewing: renewing, LastRenewal: e.obs.LastRenewal})
	}
	return t
}

// takeOver applies the last leader's view of a cluster to its restored
// entry: the last renewal (newer than the stored lease, which is written
// in batches) and, unless its agent was renewing, no restart grace: an
// agent already gone is detected on time.
func takeOver(e *entry, s handover.Session) {
	if s.LastRenewal.After(e.obs.LastRenewal) {
		e.obs.LastRenewal = s.LastRenewal
	}
	e.obs.NoRestartGrace = !s.Renewing
}
