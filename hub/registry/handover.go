package registry

import (
	"time"

	"github.com/flotilla-io/flotilla/hub/handover"
)

// Sessions is the registry's session table for the standbys: per
// cluster, its last renewal and whether its agent is renewing: it renewed
// within the last two renewal intervals (a quarter of the lease each, as
// the hub asks agents), or a session began that recently (an agent that
// just came back has not renewed yet). A session alone is not enough: a
// SIGKILLed agent's QUIC session stays open until the idle timeout. An
// agent between two sessions (a GoAway, a replaced connection, the
// leader's own goodbyes while it stops) still counts by its renewals.
func (r *Registry) Sessions(leader string) *handover.Table {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	t := &handover.Table{Leader: leader, TakenAt: now, Sessions: make([]handover.Session, 0, len(r.entries))}
	for name, e := range r.entries {
		renewing := renewingAt(e, now, r.cfg.Health.DefaultLeaseDuration)
		t.Sessions = append(t.Sessions, handover.Session{Cluster: name, Renewing: renewing, LastRenewal: e.obs.LastRenewal})
	}
	return t
}

// takeOver applies the last leader's view of a cluster to its restored
// entry: the last renewal (newer than the stored lease, which is written
// in batches; never later than the table itself) and, unless its agent
// was renewing, no restart grace: an agent already gone is detected on
// time. A stored renewal later than the table says the agent renewed
// after it was taken (it connected between two tables), so the table's
// "not renewing" is out of date and the grace stays.
func takeOver(e *entry, s handover.Session, takenAt time.Time) {
	renewedSince := e.obs.LastRenewal.After(takenAt)
	if s.LastRenewal.After(e.obs.LastRenewal) && !s.LastRenewal.After(takenAt) {
		e.obs.LastRenewal = s.LastRenewal
	}
	e.obs.NoRestartGrace = !s.Renewing && !renewedSince
}
