package hub

import (
	"fmt"
	"sync"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
)

// One session per cluster: a new session of a cluster replaces the one
// before it, visibly (GoAway with the reason, an event on the Cluster, the
// metric flotilla_sessions_replaced_total). An agent that reconnects after
// a network change is the usual cause; many sessions with one certificate
// are a copied certificate or a hostile agent, and must not each hold hub
// memory or race for the cluster's Work stream.

// keyedMutex is one mutex per key, created on first use. Keys are the
// names of clusters whose certificate checked out, so the map stays as
// small as the fleet.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// lock locks key's mutex and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*sync.Mutex{}
	}
	m, ok := k.locks[key]
	if !ok {
		m = &sync.Mutex{}
		k.locks[key] = m
	}
	k.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// claim adds sess to the live sessions and returns (and removes) the
// other sessions of its cluster, which it replaces: they are no longer
// live, even while they read their GoAway.
func (s *agentServer) claim(sess *agentSession) []*agentSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	var older []*agentSession
	for other := range s.sessions {
		if other.cluster == sess.cluster {
			older = append(older, other)
			delete(s.sessions, other)
		}
	}
	s.sessions[sess] = struct{}{}
	return older
}

// unclaim undoes claim for a session that did not start: the sessions it
// would have replaced go on.
func (s *agentServer) unclaim(sess *agentSession, older []*agentSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sess)
	for _, old := range older {
		s.sessions[old] = struct{}{}
	}
}

// release removes sess from the live sessions.
func (s *agentServer) release(sess *agentSession) {
	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
}

// replace ends old, which newer replaced: the agent hears why, the Cluster
// gets an event and the metric counts it.
func (s *agentServer) replace(old, newer *agentSession) {
	s.replaced.Add(1)
	reason := fmt.Sprintf("replaced by a newer session of cluster %s from %s (one session per cluster)", old.cluster, newer.remote)
	s.logger.Warn("agent session replaced", "cluster", old.cluster, "session", old.id, "remote", old.remote, "by", newer.id, "byRemote", newer.remote)
	s.registry.SessionReplaced(old.cluster, old.remote, newer.remote)
	// The old agent may not read: its GoAway must not hold the new session.
	go old.goAwayAndWait(reason, replacedGrace)
}

// replacedGrace is how long a replaced session has to read its GoAway
// before its connection closes (the close carries the reason too).
const replacedGrace = time.Second

// goAwayAndWait sends GoAway and closes the connection once the agent
// has (it reconnects on GoAway), or after grace: a close at once could
// overtake the GoAway.
func (sess *agentSession) goAwayAndWait(reason string, grace time.Duration) {
	_ = sess.write(&protocol.GoAway{Reason: reason})
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-sess.conn.Context().Done():
	case <-timer.C:
	}
	_ = sess.conn.CloseWithError(protocol.CloseGoingAway, reason)
}

// sessionCount is the number of live sessions.
func (s *agentServer) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}
