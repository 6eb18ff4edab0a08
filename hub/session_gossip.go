package hub

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/gossip"
	"github.com/flotilla-io/flotilla/hub/handover"
	"github.com/flotilla-io/flotilla/hub/relay"
)

// Gossip configures the replicas' memberlist group (with leader election
// only).
type Gossip struct {
	// Addr is the host:port to listen on (TCP and UDP); empty: no gossip.
	Addr string
	// AdvertiseAddr is the host:port the other replicas reach this one at;
	// empty: Addr, or with a wildcard host this machine's private address.
	AdvertiseAddr string
	// Join are the other replicas' host:port (a name may resolve to
	// several).
	Join []string
	// Interval between the leader's session tables.
	Interval time.Duration
}

// gossipLabel is on every packet of the replicas' group.
const gossipLabel = "flotilla-hub"

// maxTableBytes is the largest session table sent: memberlist refuses
// messages over 20 MB (about 600,000 clusters).
const maxTableBytes = 20 << 20

// sessionGossip is a replica's part in the gossip: while it stands by it
// keeps the newest session table a leader sent; while it leads it sends
// its own to the others every interval.
type sessionGossip struct {
	group    *gossip.Group
	interval time.Duration
	logger   *slog.Logger

	leading atomic.Bool
	latest  atomic.Pointer[handover.Table]
	// sent and failed count the tables sent to a replica, and those that
	// could not be.
	sent, failed atomic.Int64
	// decodeFailures counts tables received that did not decode;
	// lastDecodeWarning (Unix nanoseconds) rate-limits their warning.
	decodeFailures, lastDecodeWarning atomic.Int64

	// relayed carries, to the leader's registry, the batches the other
	// replicas relay about their agent sessions (relay.Batch) and the
	// names of replicas that died or left (lost); received counts the
	// batches, overflow those dropped because the registry fell behind
	// (the sender's next full batch makes good).
	relayed            chan *relay.Batch
	lost               chan string
	received, overflow atomic.Int64
	// lostReplicas counts the replicas the leader counted lost while
	// they served agents.
	lostReplicas atomic.Int64
	// endSession, if set, ends a session of this replica the leader says
	// a newer one replaced elsewhere (relay.End).
	endSession atomic.Pointer[func(relay.End)]
}

// relayQueue bounds the batches waiting for the leader's registry: at a
// batch per replica every relayInterval, seconds of them.
const relayQueue = 256

// startSessionGossip joins the replicas' group as identity. The group's
// key is derived from the stateless reset key every replica shares
// (hub/sharedfiles), so only replicas of this hub can join.
func startSessionGossip(cfg Config, identity string) (*sessionGossip, error) {
	resetKey, err := ca.LoadStatelessResetKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	key, err := hkdf.Key(sha256.New, resetKey[:], nil, "flotilla-hub gossip v1", 32)
	if err != nil {
		return nil, fmt.Errorf("gossip key: %w", err)
	}
	s := &sessionGossip{interval: cfg.Gossip.Interval, logger: cfg.Logger, relayed: make(chan *relay.Batch, relayQueue), lost: make(chan string, relayQueue)}
	s.group, err = gossip.Start(gossip.Config{Name: identity, BindAddr: cfg.Gossip.Addr, AdvertiseAddr: cfg.Gossip.AdvertiseAddr, Join: cfg.Gossip.Join,
		JoinRetry: 2 * time.Second, Key: key, Label: gossipLabel, SendTimeout: max(cfg.Gossip.Interval, 2*time.Second), Receive: s.receive, Left: s.left, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("--gossip-addr: %w", err)
	}
	cfg.Logger.Info("gossiping with the other hub replicas", "addr", s.group.Addr(), "join", cfg.Gossip.Join, "interval", cfg.Gossip.Interval)
	return s, nil
}

// receive hands a relayed batch to the leader's registry, and keeps a
// leader's table if it is newer than the one kept.
func (s *sessionGossip) receive(msg []byte) {
	if relay.IsBatch(msg) {
		s.receiveBatch(msg)
		return
	}
	if relay.IsEnd(msg) {
		e, err := relay.DecodeEnd(msg)
		if err != nil {
			s.decodeFailed("session end", err)
			return
		}
		if end := s.endSession.Load(); end != nil {
			(*end)(e)
		}
		return
	}
	t, err := handover.Decode(msg)
	if err != nil {
		s.decodeFailed("session table", err)
		return
	}
	if s.leading.Load() {
		return // only a standby takes over
	}
	for {
		// A table of another leader replaces the one kept whatever its
		// time (their clocks may differ); one leader's only when newer.
		cur := s.latest.Load()
		if cur != nil && cur.Leader == t.Leader && !t.TakenAt.After(cur.TakenAt) {
			return
		}
		if s.latest.CompareAndSwap(cur, t) {
			return
		}
	}
}

// decodeFailed counts a message that did not decode and warns, at most
// every 30 s.
func (s *sessionGossip) decodeFailed(what string, err error) {
	s.decodeFailures.Add(1)
	if last := s.lastDecodeWarning.Load(); time.Since(time.Unix(0, last)) >= 30*time.Second && s.lastDecodeWarning.CompareAndSwap(last, time.Now().UnixNano()) {
		s.logger.Warn("gossip: a hub replica sent a "+what+" that does not decode; ignored (warned at most every 30 s)", "err", err, "failures", s.decodeFailures.Load())
	}
}

// receiveBatch queues a relayed batch for the registry, while this
// replica leads; memberlist's goroutine never waits for it.
func (s *sessionGossip) receiveBatch(msg []byte) {
	if !s.leading.Load() {
		return // sent to a leader that just stepped down: the sender finds the next
	}
	b, err := relay.Decode(msg)
	if err != nil {
		s.decodeFailed("relay batch", err)
		return
	}
	s.received.Add(1)
	select {
	case s.relayed <- b:
	default:
		s.overflow.Add(1)
	}
}

// left queues the name of a replica that died or left, while this one
// leads.
func (s *sessionGossip) left(name string) {
	if !s.leading.Load() {
		return
	}
	select {
	case s.lost <- name:
	default:
		s.logger.Warn("gossip: a lost replica's sessions get no reconnect grace: the registry fell behind", "replica", name)
	}
}

// applyRelayed gives registry the batches the other replicas relay, and
// tells it of a replica lost: one the group says died or left, or one
// silent for relaySilence (replicas send at least every relayHeartbeat;
// the group takes seconds to notice a death), until ctx ends.
func (s *sessionGossip) applyRelayed(ctx context.Context, registry *Registry, clk clock.WithTicker) {
	heard := map[string]time.Time{} // replica → when its last batch came
	lose := func(name string, lastHeard time.Time, why string) {
		delete(heard, name)
		if n := registry.ReplicaLost(name, lastHeard); n > 0 {
			s.lostReplicas.Add(1)
			s.logger.Warn("a hub replica serving agents is lost: its clusters get a grace to reconnect", "replica", name, "why", why, "lastHeard", lastHeard, "clusters", n)
		}
	}
	tick := clk.NewTicker(relayHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-s.relayed:
			heard[b.Replica] = clk.Now()
			if unknown := registry.ApplyRelayed(b); unknown > 0 {
				s.logger.Debug("relayed sessions of clusters not known yet", "replica", b.Replica, "clusters", unknown)
			}
		case name := <-s.lost:
			at, ok := heard[name]
			if !ok {
				at = clk.Now()
			}
			lose(name, at, "the gossip group lost it")
		case <-tick.C():
			now := clk.Now()
			for name, at := range heard {
				if now.Sub(at) > relaySilence {
					lose(name, at, "silent for "+now.Sub(at).Round(time.Millisecond).String())
				}
			}
		}
	}
}

// sendEnd tells replica to end one of its sessions; a replica that
// cannot be reached has lost its sessions anyway.
func (s *sessionGossip) sendEnd(replica string, e relay.End) {
	msg, err := relay.EncodeEnd(e)
	if err == nil {
		err = s.group.SendTo(replica, msg)
	}
	if err != nil {
		s.logger.Debug("gossip: a replaced session's end not delivered", "replica", replica, "cluster", e.Cluster, "err", err)
	}
}

// sendTo sends msg to the replica named name.
func (s *sessionGossip) sendTo(name string, msg []byte) error { return s.group.SendTo(name, msg) }

// takeOver returns the last leader's table for a replica starting to lead
// at now, if it is at most maxAge old; this replica sends its own from now
// on.
func (s *sessionGossip) takeOver(now time.Time, maxAge time.Duration) *handover.Table {
	s.leading.Store(true)
	t := s.latest.Swap(nil)
	switch {
	case t == nil:
		s.logger.Info("no session table from a leader before this one: every cluster gets the restart grace")
		return nil
	case !t.FreshAt(now, maxAge):
		s.logger.Warn("the last leader's session table is too old to judge by: every cluster gets the restart grace",
			"leader", t.Leader, "takenAt", t.TakenAt, "maxAge", maxAge)
		return nil
	}
	return t
}

// stepDown: this replica no longer leads.
func (s *sessionGossip) stepDown() { s.leading.Store(false) }

// publish sends the registry's session table to the other replicas every
// interval until ctx ends. It returns only between two tables, so that
// sessions the leader ends on its way out are never sent as gone.
func (s *sessionGossip) publish(ctx context.Context, registry *Registry, identity string, clk clock.WithTicker) {
	tick := clk.NewTicker(s.interval)
	defer tick.Stop()
	var lastWarned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		if ctx.Err() != nil {
			return
		}
		table := registry.Sessions(identity)
		// Sessions the leader ends on its way out must not reach the
		// standbys as gone: a table taken after the goodbyes began is
		// not sent.
		if ctx.Err() != nil {
			return
		}
		msg := handover.Encode(table)
		if len(msg) > maxTableBytes {
			s.failed.Add(1)
			if now := clk.Now(); now.Sub(lastWarned) >= 30*time.Second {
				lastWarned = now
				s.logger.Warn("gossip: session table too large to send; the next leader will give every cluster the restart grace", "bytes", len(msg), "max", maxTableBytes)
			}
			continue
		}
		n, err := s.group.SendToOthers(msg)
		s.sent.Add(int64(n))
		if err != nil {
			s.failed.Add(int64(failures(err)))
			if now := clk.Now(); now.Sub(lastWarned) >= 30*time.Second {
				lastWarned = now
				s.logger.Warn("gossip: session table not sent to every hub replica", "err", err, "sent", n, "bytes", len(msg))
			}
		}
	}
}

// run takes part in the group until ctx ends.
func (s *sessionGossip) run(ctx context.Context) { s.group.Run(ctx) }

// members is how many replicas are alive in the group, this one included.
func (s *sessionGossip) members() int { return s.group.Members() }

// failures counts the errors SendToOthers joined.
func failures(err error) int {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return len(joined.Unwrap())
	}
	return 1
}

// takeOverSessions is the last leader's session table for this replica,
// which starts to lead: nil without gossip, or if none came recently
// enough. A leader that died sent its last table at most an interval
// before; a standby takes over at most a lease duration and a retry
// period after its last renewal.
func (r *replica) takeOverSessions() *handover.Table {
	if r.sessions == nil {
		return nil
	}
	le := r.cfg.LeaderElection
	return r.sessions.takeOver(r.cfg.Clock.Now(), le.LeaseDuration+2*le.RetryPeriod+3*r.cfg.Gossip.Interval)
}
