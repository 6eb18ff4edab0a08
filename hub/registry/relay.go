package registry

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/relay"
	"github.com/flotilla-io/flotilla/lease"
)

// ApplyRelayed applies what another hub replica says about the agent
// sessions it serves (package relay), as if they were this hub's: ended
// sessions first, then each live one's connect, last renewal (stamped by
// that replica, never later than now) and newest status report. A session
// older than the one the registry already has for its cluster is the
// agent's past (it moved) and is ignored. A full batch also ends the
// sessions the registry attributes to that replica and the batch no
// longer lists. It returns how many sessions named a cluster the
// registry does not know (yet): the replica's next full batch retries
// them.
func (r *Registry) ApplyRelayed(b *relay.Batch) (unknown int) {
	return r.applyBatch(b, b.Replica)
}

// ApplyLocalSessions takes the sessions this replica served while it
// stood by (replicas.Relay.Attach): they are this hub's own from now on.
func (r *Registry) ApplyLocalSessions(b *relay.Batch) (unknown int) {
	return r.applyBatch(b, "")
}

// applyBatch applies b, attributing its sessions to replica ("" for this
// hub's).
func (r *Registry) applyBatch(b *relay.Batch, replica string) (unknown int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	listed := make(map[string]bool, len(b.Sessions))
	for i := range b.Sessions {
		s := &b.Sessions[i]
		if !s.Over() {
			listed[s.Cluster] = true
			continue
		}
		if s.Dropped {
			if e, ok := r.entries[s.Cluster]; ok && e.session == s.Session {
				e.session, e.replica = "", ""
			}
			continue
		}
		r.disconnectLocked(s.Cluster, s.Session, s.Ended+" (on hub replica "+b.HubID+")")
	}
	for i := range b.Sessions {
		s := &b.Sessions[i]
		if s.Over() {
			continue
		}
		e, ok := r.entries[s.Cluster]
		if !ok {
			unknown++
			continue
		}
		r.applyRelayedLocked(b, replica, s, e, now)
	}
	if b.Full && replica != "" {
		for name, e := range r.entries {
			if e.replica == replica && e.session != "" && !listed[name] {
				r.disconnectLocked(name, e.session, "session no longer listed by hub replica "+b.HubID)
			}
		}
	}
	return unknown
}

// applyRelayedLocked applies one live session of a batch.
func (r *Registry) applyRelayedLocked(b *relay.Batch, replica string, s *relay.Session, e *entry, now time.Time) {
	if e.session != s.Session {
		if e.session != "" && e.connected.After(s.ConnectedAt) {
			// The cluster's newer session is elsewhere: this one is the
			// agent's past, or a second agent with its certificate.
			r.supersedeLocked(e.obj, s.Cluster, s.Session, replica, connection{session: e.session, replica: e.replica, hubID: hubIDOf(e)}, now)
			return
		}
		r.connectLocked(s.Cluster, e, connection{session: s.Session, remote: s.Remote, transport: s.Transport, agentVersion: s.AgentVersion,
			leaseSeconds: s.LeaseSeconds, hubID: b.HubID, replica: replica}, now)
		// When the session began, on the replica serving it: a leader
		// taking over shows the session its agent still holds.
		e.connected = earliestOf(s.ConnectedAt, now)
		connectedAt := metav1.NewTime(e.connected)
		e.obj.Status.Agent.ConnectedAt = &connectedAt
	}
	if s.Replaced != "" { // sent once, with the session or after it
		r.sessionReplacedLocked(s.Cluster, s.Replaced, s.Remote, now)
	}
	if !s.LastRenewal.IsZero() && s.LastRenewal.After(e.relayedStamp) {
		e.relayedStamp = s.LastRenewal
		if stamp := earliestOf(s.LastRenewal, now); stamp.After(e.obs.LastRenewal) {
			r.renewLocked(s.Cluster, e, s.Remote, s.AgentTime, stamp, now)
		}
	}
	if s.Status != nil {
		allocatable, allocated, err := reportResources(s.Status)
		if err != nil {
			r.logger.Warn("relayed cluster status rejected", "cluster", s.Cluster, "replica", b.Replica, "err", err)
			return
		}
		r.statusLocked(s.Cluster, e, s.Status, allocatable, allocated, now)
	}
}

func earliestOf(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ReplicaLost: the hub replica named replica (its election identity)
// was last heard of at lastHeard and has died, left the group or fallen
// silent. The clusters its sessions served have lost them; each gets a
// grace period and a lease duration from lastHeard to reconnect to
// another replica before its lease can expire. A replica that comes back
// relays its sessions again, which connects them anew.
func (r *Registry) ReplicaLost(replica string, lastHeard time.Time) (clusters int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	lastHeard = earliestOf(lastHeard, now)
	for name, e := range r.entries {
		if e.replica != replica || e.session == "" {
			continue
		}
		clusters++
		// Only an agent that was renewing lost its hub with the replica:
		// one that had stopped (its session outlives it by QUIC's idle
		// timeout) expires on time.
		if renewingAt(e, lastHeard, r.cfg.Health.DefaultLeaseDuration) {
			e.obs.ReplicaLostAt = lastHeard
		}
		e.session, e.replica = "", ""
		if e.obj.Status.Agent != nil {
			e.obj.Status.Agent.ConnectedTo = ""
		}
		r.recordLocked(e.obj, corev1.EventTypeWarning, "AgentDisconnected", "agent disconnected: its hub replica "+replica+" died, left or fell silent; it may reconnect to another one", now)
		r.dirty[name] = true
		r.leaseChangedLocked(name)
		r.evaluateLocked(name, e, now)
	}
	return clusters
}

// RelayedSessions counts the clusters served by another replica's session.
func (r *Registry) RelayedSessions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.entries {
		if e.replica != "" && e.session != "" {
			n++
		}
	}
	return n
}

// SetSupersede sets what ends a session that a newer one of its cluster on
// another replica replaced (one session per cluster across the replicas):
// called under the registry's lock (fn must only hand the work on, never
// wait), with the replica's election identity ("" for this hub's own
// session) and why.
func (r *Registry) SetSupersede(fn func(cluster, session, replica, reason string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.supersede = fn
}

// supersedeLocked ends session (on replica) of cluster, which newer
// replaced, and records it on the Cluster.
func (r *Registry) supersedeLocked(c *v1alpha1.Cluster, cluster, session, replica string, newer connection, now time.Time) {
	where := func(replica, hubID string) string {
		if replica == "" {
			return "hub replica " + r.cfg.HubID
		}
		if hubID == "" {
			return "hub replica " + replica
		}
		return "hub replica " + hubID
	}
	reason := fmt.Sprintf("replaced by a newer session of cluster %s on %s (one session per cluster)", cluster, where(newer.replica, newer.hubID))
	r.recordLocked(c, corev1.EventTypeWarning, reasonSessionReplaced, "agent session "+session+" on "+where(replica, "")+" "+reason, now)
	if fn := r.supersede; fn != nil {
		fn(cluster, session, replica, reason)
	}
}

// hubIDOf is the hub ID the cluster's status shows it connected to.
func hubIDOf(e *entry) string {
	if e.obj.Status.Agent == nil {
		return ""
	}
	return e.obj.Status.Agent.ConnectedTo
}

// renewingAt reports whether e's agent was renewing at t: a renewal, or
// the start of the session it holds, within half a lease before it (two
// renewal intervals). Sessions (the handover) and ReplicaLost judge by it.
func renewingAt(e *entry, t time.Time, defaultLease time.Duration) bool {
	var sessionStart time.Time
	if e.session != "" {
		sessionStart = e.connected
	}
	return lease.RenewedWithin(e.obs.LastRenewal, sessionStart, e.obs.LeaseDuration, defaultLease, t)
}
