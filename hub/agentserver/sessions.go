package agentserver

import (
	"fmt"
	"sync"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
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

// claim makes sess its cluster's live session and returns the one it
// replaces, if any: that one is no longer live, even while it reads its
// GoAway. One session per cluster, so the sessions are kept by cluster
// name: a fleet connecting costs one map operation per agent, not a scan
// of every session.
func (s *agentServer) claim(sess *agentSession) *agentSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	older := s.sessions[sess.cluster]
	s.sessions[sess.cluster] = sess
	return older
}

// session is cluster's live session, or nil.
func (s *agentServer) session(cluster string) *agentSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[cluster]
}

// unclaim undoes claim for a session that did not start: the session it
// would have replaced goes on.
func (s *agentServer) unclaim(sess, older *agentSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[sess.cluster] != sess {
		return
	}
	if older != nil {
		s.sessions[sess.cluster] = older
	} else {
		delete(s.sessions, sess.cluster)
	}
}

// release removes sess from the live sessions, unless a newer one of its
// cluster replaced it.
func (s *agentServer) release(sess *agentSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[sess.cluster] == sess {
		delete(s.sessions, sess.cluster)
	}
}

// replace ends old, which newer replaced: the agent hears why, the Cluster
// gets an event and the metric counts it.
func (s *agentServer) replace(old, newer *agentSession) {
	s.replaced.Add(1)
	reason := fmt.Sprintf("replaced by a newer session of cluster %s from %s (one session per cluster)", old.cluster, newer.remote)
	s.logger.Warn("agent session replaced", "cluster", old.cluster, "session", old.id, "remote", old.remote, "by", newer.id, "byRemote", newer.remote)
	s.backend.SessionReplaced(old.cluster, old.remote, newer.remote)
	// The old agent may not read: its GoAway must not hold the new session.
	go old.goAwayAndWait(reason, replacedGrace)
}

// endSession ends cluster's session id, if it is still the live one here,
// as a newer one on this replica would: a newer session of the cluster
// serves it on another replica.
func (s *agentServer) endSession(cluster, id, reason string) {
	sess := s.session(cluster)
	if sess == nil || sess.id != id {
		return
	}
	s.replaced.Add(1)
	s.logger.Warn("agent session replaced on another hub replica", "cluster", cluster, "session", id, "remote", sess.remote, "reason", reason)
	go sess.goAwayAndWait(reason, replacedGrace)
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

// sessionCounts are the live sessions, and those of them over the
// WebSocket fallback.
func (s *agentServer) sessionCounts() (total, websocket int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		if sess.conn.Kind() == transport.WebSocket {
			websocket++
		}
	}
	return len(s.sessions), websocket
}
