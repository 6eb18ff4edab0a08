package registry

import (
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
)

// Events about a cluster are bounded per reason, as Kubernetes' own event
// spam filter bounds them per object: a burst, then one per interval. An
// agent that flaps (its clock, its sessions, its health reports) must not
// turn each flap into a stored event; the condition on the Cluster keeps
// the current state whatever events were left out.
const (
	eventBurst    = 5
	eventInterval = time.Minute
)

// agentDrivenReasons are events an agent causes by what it sends or how
// it connects: they are left out while the store is too full (Ready and
// taint events, health changes, never are).
var agentDrivenReasons = map[string]bool{
	"AgentConnected": true, "AgentDisconnected": true, reasonSessionReplaced: true,
	"ClockSkewed": true, reasonImplausibleReport: true,
}

// SetStoreGate makes the registry leave out agent-driven events while
// allow says the store is too full. Call it before agents connect.
func (r *Registry) SetStoreGate(allow func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.allowAgentWrite = allow
}

// eventKey is one cluster's events of one reason.
type eventKey struct{ cluster, reason string }

// allowEventLocked reports whether an event about cluster with reason may
// be recorded now, and counts the ones that may not.
func (r *Registry) allowEventLocked(cluster, reason string, now time.Time) bool {
	if agentDrivenReasons[reason] && r.allowAgentWrite != nil && !r.allowAgentWrite() {
		r.stats.eventsSuppressed.Add(1)
		return false
	}
	if r.eventLimits == nil {
		r.eventLimits = map[eventKey]*rate.Limiter{}
	}
	key := eventKey{cluster, reason}
	l, ok := r.eventLimits[key]
	if !ok {
		l = rate.NewLimiter(rate.Every(eventInterval), eventBurst)
		r.eventLimits[key] = l
	}
	if l.AllowN(now, 1) {
		return true
	}
	r.stats.eventsSuppressed.Add(1)
	return false
}

// forgetEventsLocked drops the event limits of a cluster that is gone.
func (r *Registry) forgetEventsLocked(cluster string) {
	for key := range r.eventLimits {
		if key.cluster == cluster {
			delete(r.eventLimits, key)
		}
	}
}

// SessionReplaced records on the Cluster that a new session from newRemote
// replaced the one from oldRemote.
func (r *Registry) SessionReplaced(cluster, oldRemote, newRemote string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessionReplacedLocked(cluster, oldRemote, newRemote, r.clock.Now())
}

func (r *Registry) sessionReplacedLocked(cluster, oldRemote, newRemote string, now time.Time) {
	e, ok := r.entries[cluster]
	if !ok {
		return
	}
	r.recordLocked(e.obj, corev1.EventTypeWarning, reasonSessionReplaced,
		"agent session from "+oldRemote+" replaced by a newer one from "+newRemote+": one session per cluster (two agents with one certificate, or an agent that reconnected)", now)
}

// reasonSessionReplaced is the reason of SessionReplaced events.
const reasonSessionReplaced = "SessionReplaced"
