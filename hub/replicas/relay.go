package replicas

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/agentcert"
	"github.com/flotilla-io/flotilla/hub/registry"
	"github.com/flotilla-io/flotilla/hub/relay"
	"github.com/flotilla-io/flotilla/lease"
	"github.com/flotilla-io/flotilla/protocol"
)

// relayInterval is how often a replica sends the leader what changed in
// its sessions. Renewals carry the serving replica's stamp, so the wait
// does not move any deadline; it only delays decisions by this much when
// a lease is about to expire anyway.
const relayInterval = 100 * time.Millisecond

// relayHeartbeat is the longest a replica stays silent: with nothing to
// say, it sends an empty batch, so the leader tells a replica that died
// (relaySilence) long before the gossip group notices.
const relayHeartbeat = 250 * time.Millisecond

// relaySilence is how long the leader hears nothing from a replica before
// its sessions count as lost (Registry.ReplicaLost): longer than one
// send may block (the gossip group's 2 s timeout), far shorter than the
// group takes to notice a death.
const relaySilence = 2500 * time.Millisecond

// maxEnded bounds the ended sessions kept for the next batch (an agent
// reconnecting in a loop while no leader is reachable); beyond it they
// go, and the next batch lists every session instead, which ends the
// unlisted ones on the leader.
const maxEnded = 10000

// relayFullInterval is how often a replica sends all its sessions, so a
// batch the leader lost (or a cluster it did not know yet) is made good.
const relayFullInterval = 30 * time.Second

// Relay sits between a replica's agent server and the registry
// that decides health. While the replica leads, that is its own registry
// (attach), and every call goes straight to it. While it stands by, the
// relay stamps renewals itself, keeps each session's newest state and
// sends what changed to the leader every relayInterval over the gossip
// group (package relay); the leader applies it (Registry.ApplyRelayed).
type Relay struct {
	hubID, identity string
	// clusters answers certificate checks while the replica stands by;
	// known is the Clusters informer's copy, tried first.
	clusters flotillav1alpha1.ClusterInterface
	known    func(name string) *v1alpha1.Cluster
	clock    clock.WithTicker
	logger   *slog.Logger
	// send delivers an encoded batch to the replica named to.
	send func(to string, msg []byte) error

	mu sync.Mutex
	// local is this replica's registry while it leads.
	local *registry.Registry
	// leader is the election identity of the leader, "" while unknown;
	// leaderOf, if set, says who leads now (the elector, whose OnNewLeader
	// calls may arrive out of order: FollowElector); target is where the
	// last batch went.
	leader   string
	leaderOf atomic.Pointer[func() string]
	target   string
	seq      uint64
	live     map[string]*relay.Session // this replica's sessions, by cluster
	dirty    map[string]bool           // clusters whose session changed since the last batch
	ended    []relay.Session           // sessions ended since the last batch
	// full: the next batch lists every session (a new leader, a lost batch).
	full     bool
	lastFull time.Time
	lastSent time.Time
	// lastTooLarge rate-limits the warning about batches too large.
	lastTooLarge time.Time

	sent, failed atomic.Int64 // batches
}

func NewRelay(hubID, identity string, clusters flotillav1alpha1.ClusterInterface, known func(string) *v1alpha1.Cluster,
	send func(string, []byte) error, clk clock.WithTicker, logger *slog.Logger) *Relay {
	return &Relay{hubID: hubID, identity: identity, clusters: clusters, known: known, send: send, clock: clk,
		logger: logger.With("component", "relay"), live: map[string]*relay.Session{}, dirty: map[string]bool{}, full: true}
}

// localRegistry is this replica's registry, nil while it stands by.
func (s *Relay) localRegistry() *registry.Registry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.local
}

func (s *Relay) CheckCertificate(ctx context.Context, cluster string, serial *big.Int) error {
	if reg := s.localRegistry(); reg != nil {
		return reg.CheckCertificate(ctx, cluster, serial)
	}
	if c := s.known(cluster); c != nil && agentcert.Allowed(c, serial) == nil {
		return nil
	}
	return agentcert.Confirm(ctx, s.clusters, cluster, serial)
}

func (s *Relay) ConfirmCertificate(ctx context.Context, cluster string, serial *big.Int) error {
	return agentcert.Confirm(ctx, s.clusters, cluster, serial)
}

func (s *Relay) CertificateInUse(ctx context.Context, cluster string, serial *big.Int) error {
	if reg := s.localRegistry(); reg != nil {
		return reg.CertificateInUse(ctx, cluster, serial)
	}
	if c := s.known(cluster); c != nil && agentcert.Current(c, serial) {
		return nil
	}
	return agentcert.RetirePrevious(ctx, s.clusters, cluster, serial, s.logger)
}

func (s *Relay) Connect(ctx context.Context, hello *protocol.Hello, session, remote, transport string) error {
	s.mu.Lock()
	s.live[hello.ClusterName] = &relay.Session{Cluster: hello.ClusterName, Session: session, Remote: remote, Transport: transport,
		AgentVersion: hello.AgentVersion, LeaseSeconds: hello.LeaseDurationSeconds, ConnectedAt: s.clock.Now()}
	s.dirty[hello.ClusterName] = true
	local := s.local
	s.mu.Unlock()
	if local == nil {
		return nil
	}
	err := local.Connect(ctx, hello, session, remote, transport)
	if err != nil {
		s.mu.Lock()
		if cur := s.live[hello.ClusterName]; cur != nil && cur.Session == session {
			delete(s.live, hello.ClusterName)
		}
		s.mu.Unlock()
	}
	return err
}

func (s *Relay) Disconnect(cluster, session, reason string) {
	if s.end(relay.Session{Cluster: cluster, Session: session, Ended: reason}) {
		s.localRegistry().Disconnect(cluster, session, reason)
	}
}

func (s *Relay) DropSession(cluster, session string) {
	if s.end(relay.Session{Cluster: cluster, Session: session, Dropped: true}) {
		s.localRegistry().DropSession(cluster, session)
	}
}

// end removes an ended session and reports whether the local registry
// takes it; otherwise it goes to the leader with the next batch.
func (s *Relay) end(ended relay.Session) (local bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.live[ended.Cluster]; cur != nil && cur.Session == ended.Session {
		delete(s.live, ended.Cluster)
		delete(s.dirty, ended.Cluster)
	}
	if s.local != nil {
		return true
	}
	if len(s.ended) >= maxEnded {
		s.ended, s.full = s.ended[:0], true
	}
	s.ended = append(s.ended, ended)
	return false
}

func (s *Relay) Renew(cluster, holder string, agentTime time.Time) (time.Time, error) {
	s.mu.Lock()
	local := s.local
	sess := s.live[cluster]
	if local == nil {
		now := s.clock.Now()
		if sess != nil {
			sess.LastRenewal, sess.AgentTime = now, agentTime
			s.dirty[cluster] = true
		}
		s.mu.Unlock()
		return now, nil
	}
	s.mu.Unlock()
	stamp, err := local.Renew(cluster, holder, agentTime)
	if err == nil && sess != nil {
		s.mu.Lock()
		sess.LastRenewal, sess.AgentTime = stamp, agentTime
		s.mu.Unlock()
	}
	return stamp, err
}

func (s *Relay) Status(cluster string, report *protocol.ClusterStatus) error {
	s.mu.Lock()
	local := s.local
	if local == nil {
		if sess := s.live[cluster]; sess != nil {
			// Only the newest waits; the kinds served come only when they
			// change, so a newer report without them keeps them.
			if report.ServedAPIs == nil && sess.Status != nil && sess.Status.ServedAPIs != nil {
				withAPIs := *report
				withAPIs.ServedAPIs = sess.Status.ServedAPIs
				report = &withAPIs
			}
			sess.Status = report
			s.dirty[cluster] = true
		}
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return local.Status(cluster, report)
}

func (s *Relay) SessionReplaced(cluster, oldRemote, newRemote string) {
	s.mu.Lock()
	local := s.local
	if local == nil {
		if sess := s.live[cluster]; sess != nil {
			sess.Replaced = oldRemote
			s.dirty[cluster] = true
		}
	}
	s.mu.Unlock()
	if local != nil {
		local.SessionReplaced(cluster, oldRemote, newRemote)
	}
}

// setLeader is told who leads now: the next batch goes to it and lists
// every session.
func (s *Relay) SetLeader(identity string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leader != identity {
		s.leader, s.full = identity, true
	}
}

// RenewingClusters names the clusters whose session on this replica
// renewed, or began, within half its lease before now (lease.RenewedWithin).
func (s *Relay) RenewingClusters(now time.Time, defaultLease time.Duration) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name, sess := range s.live {
		if lease.RenewedWithin(sess.LastRenewal, sess.ConnectedAt, time.Duration(sess.LeaseSeconds)*time.Second, defaultLease, now) {
			names = append(names, name)
		}
	}
	return names
}

// FollowElector makes the relay ask leaderOf who leads (the elector's
// view) rather than trust the order of SetLeader calls.
func (s *Relay) FollowElector(leaderOf func() string) { s.leaderOf.Store(&leaderOf) }

// RequestFull: the leader asks for every session with the next batch.
func (s *Relay) RequestFull() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.full = true
}

// attach makes reg, this replica's registry now that it leads, take every
// session: those already live are connected to it with their last renewal
// and newest report, and every call from now on goes straight to it.
func (s *Relay) Attach(reg *registry.Registry) {
	// Under the relay's lock, so no session connects, ends or renews
	// between the snapshot and the registry taking it (the registry never
	// calls back in the same goroutine).
	s.mu.Lock()
	defer s.mu.Unlock()
	s.local = reg
	b := s.batchLocked(true)
	b.Full = false
	s.ended = nil
	unknown := reg.ApplyLocalSessions(b)
	if unknown > 0 {
		s.logger.Warn("sessions of clusters the registry does not know were not taken over; their agents renew into a fresh session", "clusters", unknown)
	}
	s.logger.Info("this replica leads: its agent sessions go to its own registry", "sessions", len(b.Sessions))
}

// batchLocked takes what changed (or everything) into a batch from this
// replica, clearing the pending state.
func (s *Relay) batchLocked(full bool) *relay.Batch {
	s.seq++
	b := &relay.Batch{Replica: s.identity, HubID: s.hubID, Full: full, Seq: s.seq}
	b.Sessions = append(b.Sessions, s.ended...)
	for name, sess := range s.live {
		if !full && !s.dirty[name] {
			continue
		}
		b.Sessions = append(b.Sessions, *sess)
		sess.Status, sess.Replaced = nil, ""
	}
	clear(s.dirty)
	s.ended = s.ended[:0]
	return b
}

// requeueLocked puts back what a batch that was not delivered took: the
// ended sessions, and the reports and replacements of sessions still
// live (unless newer ones came meanwhile). The next batch lists every
// session.
func (s *Relay) requeueLocked(b *relay.Batch) {
	s.full = true
	var ended []relay.Session
	for _, sess := range b.Sessions {
		if sess.Over() {
			ended = append(ended, sess)
			continue
		}
		cur := s.live[sess.Cluster]
		if cur == nil || cur.Session != sess.Session {
			continue
		}
		if cur.Status == nil {
			cur.Status = sess.Status
		}
		if cur.Replaced == "" {
			cur.Replaced = sess.Replaced
		}
	}
	s.ended = append(ended, s.ended...)
}

// run sends the leader what changed every relayInterval until ctx ends,
// then what is left (the sessions its shutdown dropped), once.
func (s *Relay) Run(ctx context.Context) {
	tick := s.clock.NewTicker(relayInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush()
			return
		case <-tick.C():
			s.flush()
		}
	}
}

// flush sends one batch to the leader, if there is one to send to and
// something to say or a heartbeat is due. A batch that could not be sent is made good by the
// next one, which lists every session.
func (s *Relay) flush() {
	s.mu.Lock()
	leader := s.leader
	if leaderOf := s.leaderOf.Load(); leaderOf != nil {
		leader = (*leaderOf)()
	}
	if s.local != nil || leader == "" || leader == s.identity {
		// Leading (or about to): attach takes the sessions.
		s.mu.Unlock()
		return
	}
	if leader != s.target {
		s.target, s.full = leader, true // a new leader gets everything
	}
	now := s.clock.Now()
	full := s.full || now.Sub(s.lastFull) >= relayFullInterval
	if !full && len(s.dirty) == 0 && len(s.ended) == 0 && now.Sub(s.lastSent) < relayHeartbeat {
		s.mu.Unlock()
		return
	}
	s.lastSent = now
	b := s.batchLocked(full)
	if full {
		s.full, s.lastFull = false, now
	}
	s.mu.Unlock()
	msg, err := relay.Encode(b)
	if err == nil && len(msg) > relay.MaxBatchBytes {
		err = fmt.Errorf("batch of %d sessions is %d bytes, more than the %d the gossip group carries", len(b.Sessions), len(msg), relay.MaxBatchBytes)
		if now.Sub(s.lastTooLarge) >= 30*time.Second {
			s.lastTooLarge = now
			s.logger.Warn("relay batch too large: this replica serves too many agents for one batch (warned at most every 30 s)", "err", err)
		}
	}
	if err == nil {
		err = s.send(leader, msg)
	}
	if err != nil {
		s.failed.Add(1)
		s.mu.Lock()
		s.requeueLocked(b)
		s.mu.Unlock()
		s.logger.Debug("relay batch not delivered to the leader; the next one lists every session", "leader", leader, "sessions", len(b.Sessions), "err", err)
		return
	}
	s.sent.Add(1)
}

// sessionCount is how many sessions the replica serves.
func (s *Relay) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}
