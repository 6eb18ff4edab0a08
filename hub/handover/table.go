// Package handover is what a leading hub replica tells the standbys about
// its agent sessions, so that the replica taking over after it dies judges
// each cluster as the old leader would have: a cluster whose agent held a
// session gets a grace to reconnect, and one whose agent was already gone
// is detected on time instead of a full restart grace later.
//
// A Table is encoded to a compact binary form (Encode) and decoded from
// bytes a peer sent (Decode), which bounds everything it reads.
package handover

import (
	"time"
)

// Session is one cluster as the leader saw it.
type Session struct {
	Cluster string
	// Renewing: an agent session served the cluster and renewed its lease
	// within the last two renewal intervals when the table was taken.
	// Only those lose their renewals to the leader's death; the others
	// had stopped before it.
	Renewing bool
	// LastRenewal is the leader's time of the cluster's last lease
	// renewal; zero if never.
	LastRenewal time.Time
}

// Table is a leader's sessions at one instant.
type Table struct {
	// Leader is the election identity of the replica that took it.
	Leader string
	// TakenAt is the leader's clock when it was taken.
	TakenAt  time.Time
	Sessions []Session
}

// Index returns the sessions by cluster name.
func (t *Table) Index() map[string]Session {
	out := make(map[string]Session, len(t.Sessions))
	for _, s := range t.Sessions {
		out[s.Cluster] = s
	}
	return out
}

// FreshAt reports whether the table can still describe the sessions at
// now: taken at most maxAge before it. A table from the future (clocks
// apart by more than maxAge) is not trusted either.
func (t *Table) FreshAt(now time.Time, maxAge time.Duration) bool {
	age := now.Sub(t.TakenAt)
	return age <= maxAge && age >= -maxAge
}
