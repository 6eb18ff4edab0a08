package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flotilla-io/flotilla/hub/agentserver"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/handover"
	"github.com/flotilla-io/flotilla/hub/relay"
	"github.com/flotilla-io/flotilla/hub/replicas"
	"github.com/flotilla-io/flotilla/internal/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection lets several hub replicas share one store: the elected
// one leads (controllers, health decisions, agent listeners), the others
// stand by and take over when its Lease expires.
type LeaderElection struct {
	Enabled bool
	// LeaseDuration is how long a standby waits after the last renewal it
	// saw before it takes over; RenewDeadline is how long the leader keeps
	// trying to renew before it gives up leading; RetryPeriod is how often
	// both try.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Where the hub replicas' election Lease lives in the hub's API.
const (
	leaderLeaseNamespace = metav1.NamespaceSystem
	leaderLeaseName      = "flotilla-hub"
)

// ErrLostLeadership ends a replica that could not renew its Lease in time:
// another may lead already, so it stops (and restarts as a standby).
var ErrLostLeadership = errors.New("lost the hub leader election: this replica stopped; restart it to stand by")

// runElected stands for election until ctx ends and leads while elected.
// The Lease is released only after lead has stopped (said goodbye to its
// agents and stored what changed), so two replicas never lead at once on
// a graceful hand-over; a replica that fails to renew does not release it
// at all (client-go would, while lead still runs), so a standby takes over
// only once it expired, LeaseDuration - RenewDeadline after lead began to
// stop.
func (r *replica) runElected(ctx context.Context) error {
	kube, err := kubernetes.NewForConfig(r.api.HubConfig)
	if err != nil {
		return err
	}
	id, err := electionIdentity(r.cfg.HubID)
	if err != nil {
		return err
	}
	r.identity = id
	if r.cfg.Gossip.Addr != "" {
		if r.sessions, err = replicas.StartGossip(r.cfg.Gossip, r.cfg.DataDir, id, r.cfg.Clock, r.cfg.Logger); err != nil {
			return err
		}
		// The gossip outlives the agents' goodbyes: the leader hears of
		// the sessions they ended before this replica leaves the group.
		gossipCtx, stopGossip := context.WithCancel(context.WithoutCancel(ctx))
		gossipDone := make(chan struct{})
		go func() {
			defer close(gossipDone)
			r.sessions.Run(gossipCtx)
		}()
		defer func() {
			stopGossip()
			<-gossipDone
		}()
	}
	if r.sessions != nil {
		stopServing, err := r.serveAgents(ctx)
		if err != nil {
			return err
		}
		defer stopServing()
	}
	le := r.cfg.LeaderElection
	e := &election{replica: r, ctx: ctx, id: id, led: make(chan error, 1),
		log: r.cfg.Logger.With("identity", id, "lease", leaderLeaseNamespace+"/"+leaderLeaseName)}
	// The elector runs on a context of its own: cancelling it releases
	// the Lease, which must wait until lead has returned.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &releaseGuard{Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: leaderLeaseNamespace, Name: leaderLeaseName},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}, allowed: &e.mayRelease},
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            "flotilla-hub",
		Callbacks:       leaderelection.LeaderCallbacks{OnStartedLeading: e.lead, OnStoppedLeading: func() {}, OnNewLeader: e.newLeader},
	})
	if err != nil {
		return fmt.Errorf("hub leader election: %w", err)
	}
	if r.relay != nil {
		// The elector's view, not the order its OnNewLeader calls arrive.
		r.relay.FollowElector(elector.GetLeader)
	}
	r.http.setStandby(standbyHandler(r, &e.leader))
	e.log.Info("standing for leader election", "leaseDuration", le.LeaseDuration, "renewDeadline", le.RenewDeadline, "retryPeriod", le.RetryPeriod)
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electCtx)
	}()
	select {
	case <-ctx.Done(): // stopping: lead says goodbye, then the Lease goes
		err := e.stop()
		stopElecting()
		<-electorDone
		return err
	case err := <-e.led: // lead ended by itself: it failed, or lost the Lease
		stopElecting()
		<-electorDone
		if err == nil && ctx.Err() == nil {
			err = ErrLostLeadership
		}
		return err
	case <-electorDone: // only a failed renewal ends the elector: it led
		return errors.Join(ErrLostLeadership, <-e.led)
	}
}

// serveAgents opens this replica's agent listeners for as long as it
// runs, leading or standing by: a standby relays what its agents say to
// the leader over the gossip group, and the leader's registry decides
// their health. The returned stop says goodbye to the agents and sends
// the leader the last batch.
func (r *replica) serveAgents(ctx context.Context) (stop func(), err error) {
	cfg := r.cfg
	clients, err := kube.NewClients(r.api.HubConfig)
	if err != nil {
		return nil, err
	}
	reports, err := kube.NewClients(reportsConfig(r.api.HubConfig, r.reportWrites))
	if err != nil {
		return nil, err
	}
	frontCtx, stopFront := context.WithCancel(context.WithoutCancel(ctx))
	informers := controller.NewAgentInformers(clients)
	recorder := controller.StartEventRecorder(frontCtx, clients.Kube)
	r.relay = replicas.NewRelay(cfg.HubID, r.identity, clients.Flotilla.FlotillaV1alpha1().Clusters(), informers.Clusters.Get, r.sessions.SendTo, cfg.Clock, cfg.Logger)
	if r.front, err = agentserver.Open(frontCtx, cfg.agentServer(), r.cas(), clients, reports, informers, recorder, r.relay); err != nil {
		stopFront()
		return nil, err
	}
	// The store gate holds for Work status written here too; the leader's
	// guard, which also recovers the store, takes over when this one leads.
	watchCfg := cfg.Store
	watchCfg.WatchOnly = true
	guard := r.store.NewGuard(watchCfg, nil)
	r.front.Dispatcher().SetStoreGate(guard.AllowAgentWrite)
	r.sessions.OnEnd(func(e relay.End) { r.front.EndSession(e.Cluster, e.Session, e.Reason) })
	r.sessions.OnResync(r.relay.RequestFull)
	informers.Start(frontCtx)
	r.front.Joins().Watch(frontCtx)
	r.front.Start(frontCtx)
	relayCtx, stopRelay := context.WithCancel(frontCtx)
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		r.relay.Run(relayCtx)
	}()
	guardDone := make(chan struct{})
	go func() {
		defer close(guardDone)
		guard.Run(frontCtx)
	}()
	cfg.Logger.Info("serving agents on this replica, leading or standing by", "quic", r.front.Addr().String(), "websocket", r.front.WebSocketAddr())
	return func() {
		r.front.Goodbye()
		stopRelay()
		<-relayDone // the sessions the goodbyes dropped reach the leader
		stopFront()
		<-guardDone
		r.front.Close()
	}, nil
}

// election is one replica's part in the election.
type election struct {
	*replica
	ctx    context.Context // the hub's: when it ends, nothing starts leading
	id     string
	log    *slog.Logger
	leader atomic.Pointer[string] // the identity leading, for the standby page
	// led receives lead's result, once, if this replica led.
	led chan error
	// mayRelease lets the elector release the Lease: only once lead has
	// returned.
	mayRelease atomic.Bool

	mu       sync.Mutex
	stopping bool // the hub stops: do not start leading
	leading  bool // lead started
}

// lead is the elector's OnStartedLeading: it runs the hub's leader part
// until the hub stops or the Lease is lost, unless the hub is stopping.
func (e *election) lead(leadCtx context.Context) {
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		return
	}
	e.leading = true
	e.mu.Unlock()
	e.log.Info("elected: this replica leads")
	runCtx, cancel := context.WithCancelCause(leadCtx)
	defer cancel(nil)
	stop := context.AfterFunc(e.ctx, func() { cancel(context.Cause(e.ctx)) })
	defer stop()
	err := e.replica.lead(runCtx)
	if e.sessions != nil {
		e.sessions.StepDown()
	}
	e.mayRelease.Store(true)
	e.led <- err
}

// stop keeps lead from starting and waits for it if it runs, so that the
// Lease is released only after it.
func (e *election) stop() error {
	e.mu.Lock()
	e.stopping = true
	leading := e.leading
	e.mu.Unlock()
	e.mayRelease.Store(!leading)
	if !leading {
		return nil
	}
	return <-e.led
}

func (e *election) newLeader(identity string) {
	e.leader.Store(&identity)
	if e.relay != nil {
		e.relay.SetLeader(identity)
	}
	if identity != e.id {
		e.log.Info("standing by: another replica leads", "leader", identity)
	}
}

// releaseGuard refuses to release the Lease (an update that empties its
// holder) until allowed: client-go releases it when renewing fails, while
// lead may still be writing.
type releaseGuard struct {
	resourcelock.Interface
	allowed *atomic.Bool
}

func (g *releaseGuard) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if record.HolderIdentity == "" && !g.allowed.Load() {
		return errors.New("not releasing the Lease: this replica is still stopping; it expires by itself")
	}
	return g.Interface.Update(ctx, record)
}

// electionIdentity names this replica in the Lease: its hub ID and a
// random suffix, so a restarted replica never takes itself for the leader
// it was (it waits for the Lease to expire, or to be released).
func electionIdentity(hubID string) (string, error) {
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return hubID + "_" + hex.EncodeToString(suffix), nil
}

// standbyHandler serves a standby replica's HTTP endpoints: it is alive,
// not ready (the agent listeners and controllers run on the leader), and
// points everything else at the leader.
func standbyHandler(r *replica, leader *atomic.Pointer[string]) http.Handler {
	leaderName := func() string {
		if l := leader.Load(); l != nil && *l != "" {
			return *l
		}
		return "none yet"
	}
	probes := []probe{storeProbe(r.store)}
	serving := "serves the Kubernetes API (on --api-addr); agents are served by the leader"
	switch {
	case r.front != nil:
		// It serves agents: ready whoever leads.
		serving = "serves agents (their sessions relayed to the leader) and the Kubernetes API"
		probes = append(probes, probe{name: "quic-listener", check: func(context.Context) error {
			if !r.front.Serving() {
				return errors.New("not accepting agent connections")
			}
			return nil
		}})
	case r.labeler == nil:
		// A labelled leader pod is what routes agents: a standby is ready
		// to take over, which lets a StatefulSet roll it.
		probes = append(probes, probe{name: "leader", check: func(context.Context) error {
			return fmt.Errorf("standing by: the leader is %s", leaderName())
		}})
	}
	mux := http.NewServeMux()
	handleHealth(mux, probes)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this hub replica stands by: the dashboard and metrics are on the leader, "+leaderName()+"; this one "+serving,
			http.StatusServiceUnavailable)
	})
	return mux
}

// switchHandler serves the leader's endpoints while it leads and the
// standby's otherwise.
type switchHandler struct {
	leading, standby atomic.Pointer[http.Handler]
}

func (h *switchHandler) set(leading http.Handler)        { storeHandler(&h.leading, leading) }
func (h *switchHandler) setStandby(standby http.Handler) { storeHandler(&h.standby, standby) }

func storeHandler(p *atomic.Pointer[http.Handler], h http.Handler) {
	if h == nil {
		p.Store(nil)
		return
	}
	p.Store(&h)
}

func (h *switchHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	for _, p := range []*atomic.Pointer[http.Handler]{&h.leading, &h.standby} {
		if handler := p.Load(); handler != nil {
			(*handler).ServeHTTP(w, req)
			return
		}
	}
	http.Error(w, "the hub is starting", http.StatusServiceUnavailable)
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
	now := r.cfg.Clock.Now()
	t := r.sessions.TakeOver(now, le.LeaseDuration+2*le.RetryPeriod+3*r.cfg.Gossip.Interval)
	if t == nil || r.relay == nil {
		return t
	}
	return replicas.WithRenewing(t, r.relay.RenewingClusters(now, r.cfg.Health.DefaultLeaseDuration))
}
