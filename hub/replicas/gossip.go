package replicas

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/gossip"
	"github.com/flotilla-io/flotilla/hub/handover"
	"github.com/flotilla-io/flotilla/hub/registry"
	"github.com/flotilla-io/flotilla/hub/relay"
)

// GossipConfig configures the replicas' memberlist group (with leader
// election only).
type GossipConfig struct {
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

// Gossip is a replica's part in the gossip: while it stands by it
// keeps the newest session table a leader sent; while it leads it sends
// its own to the others every interval.
type Gossip struct {
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
	relayed            chan receivedBatch
	lost               chan string
	received, overflow atomic.Int64
	// queuedBytes bounds the batches waiting (maxQueuedBytes).
	queuedBytes atomic.Int64
	// stale counts batches dropped for arriving after a newer one.
	stale atomic.Int64
	clock clock.WithTicker
	// send delivers a message to one replica (the group's SendTo).
	send func(name string, msg []byte) error
	// lostReplicas counts the replicas the leader counted lost while
	// they served agents.
	lostReplicas atomic.Int64
	// endSession, if set, ends a session of this replica the leader says
	// a newer one replaced elsewhere (relay.End); resync, if set, makes
	// the relay's next batch full (relay.Resync). See OnEnd and OnResync.
	endSession atomic.Pointer[func(relay.End)]
	resync     atomic.Pointer[func()]
}

// relayQueue and maxQueuedBytes bound the batches waiting for the
// leader's registry: at a batch per replica every relayInterval, seconds
// of them.
const (
	relayQueue     = 256
	maxQueuedBytes = 64 << 20
)

// receivedBatch is a batch and when it arrived.
type receivedBatch struct {
	batch *relay.Batch
	at    time.Time
	bytes int64
}

// StartGossip joins the replicas' group as identity. The group's key is
// the gossip key every replica shares (hub/sharedfiles, in dataDir), so
// only replicas of this hub can join.
func StartGossip(cfg GossipConfig, dataDir, identity string, clk clock.WithTicker, logger *slog.Logger) (*Gossip, error) {
	key, err := ca.LoadGossipKey(dataDir)
	if err != nil {
		return nil, err
	}
	s := &Gossip{interval: cfg.Interval, logger: logger, relayed: make(chan receivedBatch, relayQueue), lost: make(chan string, relayQueue),
		clock: clk}
	s.group, err = gossip.Start(gossip.Config{Name: identity, BindAddr: cfg.Addr, AdvertiseAddr: cfg.AdvertiseAddr, Join: cfg.Join,
		JoinRetry: 2 * time.Second, Key: key, Label: gossipLabel, SendTimeout: max(cfg.Interval, 2*time.Second), Receive: s.receive, Left: s.left, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--gossip-addr: %w", err)
	}
	s.send = s.group.SendTo
	logger.Info("gossiping with the other hub replicas", "addr", s.group.Addr(), "join", cfg.Join, "interval", cfg.Interval)
	return s, nil
}

// receive hands a relayed batch to the leader's registry, and keeps a
// leader's table if it is newer than the one kept.
func (s *Gossip) receive(msg []byte) {
	if relay.IsBatch(msg) {
		s.receiveBatch(msg)
		return
	}
	if relay.IsResync(msg) {
		if full := s.resync.Load(); full != nil {
			(*full)()
		}
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
func (s *Gossip) decodeFailed(what string, err error) {
	s.decodeFailures.Add(1)
	if last := s.lastDecodeWarning.Load(); time.Since(time.Unix(0, last)) >= 30*time.Second && s.lastDecodeWarning.CompareAndSwap(last, time.Now().UnixNano()) {
		s.logger.Warn("gossip: a hub replica sent a "+what+" that does not decode; ignored (warned at most every 30 s)", "err", err, "failures", s.decodeFailures.Load())
	}
}

// receiveBatch queues a relayed batch for the registry, while this
// replica leads; memberlist's goroutine never waits for it.
func (s *Gossip) receiveBatch(msg []byte) {
	if !s.leading.Load() {
		return // sent to a leader that just stepped down: the sender finds the next
	}
	size := int64(len(msg))
	if s.queuedBytes.Add(size) > maxQueuedBytes {
		s.queuedBytes.Add(-size)
		s.overflow.Add(1)
		return
	}
	b, err := relay.Decode(msg)
	if err != nil {
		s.queuedBytes.Add(-size)
		s.decodeFailed("relay batch", err)
		return
	}
	s.received.Add(1)
	select {
	case s.relayed <- receivedBatch{batch: b, at: s.clock.Now(), bytes: size}:
	default:
		s.queuedBytes.Add(-size)
		s.overflow.Add(1)
	}
}

// left queues the name of a replica that died or left, while this one
// leads.
func (s *Gossip) left(name string) {
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
// the group takes seconds to notice a death), until ctx ends. A batch
// older than one applied from its replica is dropped, and so is
// anything before a full batch from a replica new to this leader: the
// replica is asked for a full one (relay.Resync).
func (s *Gossip) ApplyRelayed(ctx context.Context, reg *registry.Registry, clk clock.WithTicker) {
	in := newRelayIntake()
	apply := func(rb receivedBatch) {
		s.queuedBytes.Add(-rb.bytes)
		ok, resync := in.admit(rb.batch, rb.at)
		if resync {
			go s.requestResync(rb.batch.Replica)
		}
		if !ok {
			s.stale.Add(1)
			return
		}
		if unknown := reg.ApplyRelayed(rb.batch); unknown > 0 {
			s.logger.Debug("relayed sessions of clusters not known yet", "replica", rb.batch.Replica, "clusters", unknown)
		}
	}
	lose := func(name string, lastHeard time.Time, why string) {
		if n := reg.ReplicaLost(name, lastHeard); n > 0 {
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
		case rb := <-s.relayed:
			apply(rb)
		case name := <-s.lost:
			lose(name, in.forget(name, clk.Now()), "the gossip group lost it")
		case <-tick.C():
			// What already arrived counts before anyone is called silent.
			for drained := false; !drained; {
				select {
				case rb := <-s.relayed:
					apply(rb)
				default:
					drained = true
				}
			}
			now := clk.Now()
			for name, heard := range in.silent(now) {
				lose(name, heard, "silent for "+now.Sub(heard).Round(time.Millisecond).String())
			}
		}
	}
}

// requestResync asks replica for a full batch.
func (s *Gossip) requestResync(replica string) {
	if err := s.send(replica, relay.Resync()); err != nil {
		s.logger.Debug("gossip: resync request not delivered", "replica", replica, "err", err)
	}
}

// relayIntake is the leader's bookkeeping of the replicas relaying to it:
// when each was last heard, the number of its last batch applied, and
// when it was last asked for a full batch. One goroutine owns it.
type relayIntake struct {
	replicas map[string]*relayReplica
}

type relayReplica struct {
	heard    time.Time
	seq      uint64
	resynced time.Time
}

// resyncEvery bounds the full batches asked of one replica.
const resyncEvery = time.Second

func newRelayIntake() *relayIntake { return &relayIntake{replicas: map[string]*relayReplica{}} }

// admit says whether b, arrived at at, is applied (not older than a batch
// applied from its replica) and whether its replica is to be asked for a
// full batch: it sent a stale one, or a partial one first (its sessions
// from before are unknown here).
func (in *relayIntake) admit(b *relay.Batch, at time.Time) (apply, resync bool) {
	r, known := in.replicas[b.Replica]
	if !known {
		r = &relayReplica{}
		in.replicas[b.Replica] = r
	}
	r.heard = at
	apply = !known || b.Seq > r.seq
	if apply {
		r.seq = b.Seq
	}
	if (!apply || !known && !b.Full) && at.Sub(r.resynced) >= resyncEvery {
		r.resynced, resync = at, true
	}
	return apply, resync
}

// silent removes and returns the replicas not heard from for longer than
// relaySilence at now, with when each was last heard.
func (in *relayIntake) silent(now time.Time) map[string]time.Time {
	var out map[string]time.Time
	for name, r := range in.replicas {
		if now.Sub(r.heard) > relaySilence {
			if out == nil {
				out = map[string]time.Time{}
			}
			out[name] = r.heard
			delete(in.replicas, name)
		}
	}
	return out
}

// forget removes a replica the group lost and returns when it was last
// heard (now if never).
func (in *relayIntake) forget(name string, now time.Time) time.Time {
	r, ok := in.replicas[name]
	if !ok {
		return now
	}
	delete(in.replicas, name)
	return r.heard
}

// sendEnd tells replica to end one of its sessions; a replica that
// cannot be reached has lost its sessions anyway.
func (s *Gossip) SendEnd(replica string, e relay.End) {
	msg, err := relay.EncodeEnd(e)
	if err == nil {
		err = s.send(replica, msg)
	}
	if err != nil {
		s.logger.Debug("gossip: a replaced session's end not delivered", "replica", replica, "cluster", e.Cluster, "err", err)
	}
}

// sendTo sends msg to the replica named name.
func (s *Gossip) SendTo(name string, msg []byte) error { return s.send(name, msg) }

// takeOver returns the last leader's table for a replica starting to lead
// at now, if it is at most maxAge old; this replica sends its own from now
// on.
func (s *Gossip) TakeOver(now time.Time, maxAge time.Duration) *handover.Table {
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
func (s *Gossip) StepDown() { s.leading.Store(false) }

// publish sends the registry's session table to the other replicas every
// interval until ctx ends. It returns only between two tables, so that
// sessions the leader ends on its way out are never sent as gone.
func (s *Gossip) Publish(ctx context.Context, reg *registry.Registry, identity string, clk clock.WithTicker) {
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
		table := reg.Sessions(identity)
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
func (s *Gossip) Run(ctx context.Context) { s.group.Run(ctx) }

// members is how many replicas are alive in the group, this one included.
func (s *Gossip) Members() int { return s.group.Members() }

// failures counts the errors SendToOthers joined.
func failures(err error) int {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return len(joined.Unwrap())
	}
	return 1
}

// WithRenewing returns a copy of t in which the clusters named are
// renewing. They are this replica's own agents: the last leader's table
// may predate their sessions (a leader that died within a gossip interval
// of an agent's connect lists it as not renewing), and judged by it they
// would go Unknown before attach hands their renewals to the new
// registry; as renewing they get the restart grace until then.
func WithRenewing(t *handover.Table, clusters []string) *handover.Table {
	if len(clusters) == 0 {
		return t
	}
	out := &handover.Table{Leader: t.Leader, TakenAt: t.TakenAt, Sessions: slices.Clone(t.Sessions)}
	index := make(map[string]int, len(out.Sessions))
	for i, s := range out.Sessions {
		index[s.Cluster] = i
	}
	for _, name := range clusters {
		if i, ok := index[name]; ok {
			out.Sessions[i].Renewing = true
			continue
		}
		out.Sessions = append(out.Sessions, handover.Session{Cluster: name, Renewing: true})
	}
	return out
}

// OnEnd sets what ends a session of this replica when the leader says a
// newer one replaced it on another replica.
func (s *Gossip) OnEnd(end func(relay.End)) { s.endSession.Store(&end) }

// OnResync sets what makes this replica's next relay batch list every
// session, when the leader asks for it.
func (s *Gossip) OnResync(resync func()) { s.resync.Store(&resync) }

// Counters are what the gossip counted since it started.
type Counters struct {
	// TablesSent and TablesFailed are the session tables this leader sent
	// to a standby, and those it could not send.
	TablesSent, TablesFailed int64
	// BatchesReceived are relayed batches this leader received,
	// BatchesDropped those dropped because the registry fell behind.
	BatchesReceived, BatchesDropped int64
	// ReplicasLost are replicas serving agents this leader counted lost.
	ReplicasLost int64
}

// Counters returns the gossip's counts so far.
func (s *Gossip) Counters() Counters {
	return Counters{TablesSent: s.sent.Load(), TablesFailed: s.failed.Load(), BatchesReceived: s.received.Load(),
		BatchesDropped: s.overflow.Load(), ReplicasLost: s.lostReplicas.Load()}
}
