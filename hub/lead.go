package hub

import (
	"cmp"
	"context"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/agentserver"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/hub/binding"
	"github.com/flotilla-io/flotilla/hub/clusterdeletion"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/dashboard"
	"github.com/flotilla-io/flotilla/hub/detector"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/hub/karmada"
	"github.com/flotilla-io/flotilla/hub/purge"
	"github.com/flotilla-io/flotilla/hub/rebalancer"
	"github.com/flotilla-io/flotilla/hub/registry"
	"github.com/flotilla-io/flotilla/hub/relay"
	"github.com/flotilla-io/flotilla/hub/scheduling"
	"github.com/flotilla-io/flotilla/hub/status"
	"github.com/flotilla-io/flotilla/hub/taintpolicy"
	"github.com/flotilla-io/flotilla/hub/templates"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/internal/profiling"
	"github.com/flotilla-io/flotilla/store"
)

// term is what one term of leadership builds (lead's steps fill it in
// order) and runs until it ends.
type term struct {
	r       *replica
	cfg     Config // the replica's, HubStarted cleared: the registry sets it once loaded
	metrics *hubMetrics

	clients   *kube.Clients
	reports   *kube.Clients // as clients, with few writes in flight: for reported status
	templates *templates.Source
	informers *controller.Informers
	recorder  controller.DroppingRecorder
	registry  *registry.Registry
	guard     *store.Guard
	// front serves agents: the replica's own (it serves agents anyway) or
	// one opened for this term (ownFront), closed when it ends.
	front    *agentserver.Front
	ownFront bool

	failover    *failover.Controller
	controllers []interface{ Run(context.Context, int) }
	board       *dashboard.Dashboard
	profiling   net.Listener // nil: no profiling endpoints
}

// lead runs the controllers and the registry until ctx ends, then says
// goodbye to the agents and stores what changed. It opens the agent
// listeners too, unless the replica serves agents anyway (r.front): its
// sessions then go to the registry from now on (r.relay), and so do what
// the other replicas relay about theirs.
func (r *replica) lead(ctx context.Context) error {
	t := &term{r: r, cfg: r.cfg, metrics: newHubMetrics(r.reportWrites)}
	t.cfg.Health.HubStarted = time.Time{}
	// Events and the registry's writes outlive the controllers: the final
	// flush runs after everything else has stopped.
	registryCtx, stopRegistry := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRegistry()
	defer t.closeFront()
	// Every controller adds its handlers to the shared informers before
	// they start.
	for _, step := range []func(ctx, registryCtx context.Context) error{t.connect, t.loadRegistry, t.openFront, t.buildControllers} {
		if err := step(ctx, registryCtx); err != nil {
			return err
		}
	}
	t.templates.Start(registryCtx)
	t.informers.Start(registryCtx)
	var wg sync.WaitGroup
	publishing := t.start(ctx, registryCtx, &wg)
	r.http.set(t.httpServer().handler())
	defer r.http.set(nil)
	t.announce()
	if r.labeler != nil { // agents may come now
		r.labeler.Want(true)
		defer r.labeler.Want(false)
	}
	<-ctx.Done()
	t.cfg.Logger.Info("hub shutting down", "why", context.Cause(ctx))
	// No table goes out once the leader stops: publish drops one taken
	// after ctx ended, when the goodbyes (which start with it) may have
	// ended sessions.
	<-publishing
	// Agents get a goaway while the listener still runs (serve sends it when
	// its context ends); only then does the listener close.
	t.front.Goodbye()
	t.cfg.Logger.Info("agent sessions closed: agents reconnect to the next leader or this hub restarted")
	stopRegistry() // the writer's final flush runs on its way out
	wg.Wait()
	return nil
}

// connect makes the term's clients of the embedded API server (counted
// and timed by the hub's metrics), its template source and its shared
// informers.
func (t *term) connect(context.Context, context.Context) error {
	config := t.metrics.instrument(t.r.api.HubConfig)
	var err error
	if t.clients, err = kube.NewClients(config); err != nil {
		return err
	}
	if t.reports, err = kube.NewClients(reportsConfig(config, t.r.reportWrites)); err != nil {
		return err
	}
	crdClient, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		return err
	}
	t.templates = templates.New(t.clients, crdClient, t.cfg.Logger)
	t.informers, err = controller.NewInformers(t.clients, t.templates)
	return err
}

// loadRegistry starts the event recorder, loads the registry (with the
// last leader's sessions, if gossip brought them) and guards the store
// against agent-driven growth.
func (t *term) loadRegistry(ctx, registryCtx context.Context) error {
	cfg := t.cfg
	t.recorder = controller.StartEventRecorder(registryCtx, t.clients.Kube)
	var err error
	t.registry, err = registry.New(ctx, registry.API{Flotilla: t.clients.Flotilla, Kube: t.clients.Kube, Recorder: t.recorder}, registry.Config{
		Health: cfg.Health, FlushInterval: cfg.FlushInterval, LeaseFlushInterval: cfg.LeaseFlushInterval,
		LeaseWritesPerSecond: cfg.LeaseWritesPerSecond, MaxClockSkew: cfg.MaxClockSkew, HubID: cfg.HubID,
		Handover: t.r.takeOverSessions(),
	}, cfg.Clock, cfg.Logger)
	if err != nil {
		return err
	}
	t.guard = t.r.store.NewGuard(cfg.Store, func(refusing bool, why string) { recordStoreState(t.recorder, refusing, why) })
	t.registry.SetStoreGate(t.guard.AllowAgentWrite)
	t.informers.Clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		if cur == nil {
			t.registry.Forget(old.Name)
			return
		}
		t.registry.Observe(cur)
	})
	return nil
}

// openFront opens the agent listeners unless the replica serves agents
// anyway, and publishes where agents dial.
func (t *term) openFront(ctx, _ context.Context) error {
	t.front = t.r.front
	if t.front == nil {
		var err error
		if t.front, err = agentserver.Open(ctx, t.cfg.agentServer(), t.r.cas(), t.clients, t.reports, t.informers, t.recorder, t.registry); err != nil {
			return err
		}
		t.ownFront = true
	}
	t.front.Dispatcher().SetStoreGate(t.guard.AllowAgentWrite)
	return publishJoinInfo(ctx, t.clients.Kube, t.cfg.AgentAddress, t.front.Addr(), t.r.ca.Cert)
}

// closeFront releases the listeners openFront opened for this term.
func (t *term) closeFront() {
	if t.ownFront {
		t.front.Close()
	}
}

// buildControllers makes the controllers, the dashboard and the
// profiling listener, and hooks the metrics into what they observe.
func (t *term) buildControllers(context.Context, context.Context) error {
	cfg, clients, informers, recorder, logger := t.cfg, t.clients, t.informers, t.recorder, t.cfg.Logger
	var err error
	if t.profiling, err = profiling.Listen(cfg.ProfilingAddr); err != nil {
		return err
	}
	t.failover = failover.New(clients, informers, recorder, cfg.Clock, logger, cfg.Failover)
	scheduler := scheduling.New(clients, informers, recorder, cfg.Clock, logger)
	t.failover.SetPlacer(scheduler.Place)
	detect := detector.New(clients, informers, recorder, cfg.Clock, logger)
	detect.SetPlacer(scheduler.Place)
	taintPolicies := taintpolicy.New(clients, informers, recorder, cfg.Clock, logger, taintpolicy.Options{HubNoExecute: cfg.Health.NoExecuteTaints})
	works := binding.New(clients, informers, recorder, cfg.Clock, logger)
	t.metrics.observe(t.registry, t.front.Dispatcher(), scheduler, t.failover, works)
	taintPolicies.SetObserver(func(policy, operation string) { t.metrics.policyTaints.WithLabelValues(policy, operation).Inc() })
	t.controllers = []interface{ Run(context.Context, int) }{
		detect,
		scheduler,
		works,
		status.New(t.reports, informers, recorder, cfg.Clock, logger),
		t.failover,
		rebalancer.New(clients, informers, recorder, cfg.Clock, logger),
		purge.New(clients, informers, recorder, cfg.Clock, logger),
		karmada.New(clients, informers, recorder, logger),
		clusterdeletion.New(clients, informers, recorder, logger),
		taintPolicies,
		t.front.Joins(),
	}
	t.board = dashboard.New(dashboard.Config{
		Clusters: informers.Clusters, Bindings: informers.Bindings, ClusterBindings: informers.ClusterBindings,
		Leases: t.registry, ZoneModes: func() map[string]string { return t.failover.Stats().ZoneModes },
		Kube: clients.Kube, API: t.r.api.HubConfig, EvictionGrace: cfg.Failover.GracefulEvictionTimeout,
		Settings: dashboard.Settings{HubID: cfg.HubID, GracePeriod: cfg.Health.GracePeriod.Milliseconds(),
			DefaultLeaseDuration: cfg.Health.DefaultLeaseDuration.Milliseconds(), EvictionTimeout: cfg.Health.EvictionTimeout.Milliseconds()},
		Clock: cfg.Clock, Logger: logger,
	})
	return nil
}

// start runs what the term built on wg: the registry and the store guard
// (until registryCtx ends), the dashboard, the controllers, the supersede
// loop and the agents' sessions (until ctx ends). publishing is closed
// once the session table is no longer sent to the standbys.
func (t *term) start(ctx, registryCtx context.Context, wg *sync.WaitGroup) (publishing <-chan struct{}) {
	wg.Go(func() { t.registry.Run(registryCtx) })
	published := make(chan struct{})
	go func() {
		defer close(published)
		if t.r.sessions != nil {
			t.r.sessions.Publish(ctx, t.registry, t.r.identity, t.cfg.Clock)
		}
	}()
	wg.Go(func() { t.guard.Run(registryCtx) })
	wg.Go(func() { t.board.Run(ctx) })
	workers := cmp.Or(t.cfg.ControllerWorkers, DefaultControllerWorkers)
	for _, c := range t.controllers {
		wg.Go(func() { c.Run(ctx, workers) })
	}
	wg.Go(t.superseding(ctx))
	if t.ownFront {
		t.front.Start(ctx)
	} else {
		t.r.relay.Attach(t.registry)
		wg.Go(func() { t.r.sessions.ApplyRelayed(ctx, t.registry, t.cfg.Clock) })
	}
	if t.profiling != nil {
		wg.Go(func() { profiling.Serve(ctx, t.profiling, t.cfg.Logger) })
	}
	return published
}

// superseding keeps one session per cluster across the replicas: the
// registry ends the older of two, here or on the replica holding it,
// through a bounded queue (a peer relaying many stale sessions costs no
// goroutines). The returned loop runs until ctx ends.
func (t *term) superseding(ctx context.Context) func() {
	supersedes := make(chan supersession, supersedeQueue)
	t.registry.SetSupersede(func(cluster, session, replica, reason string) {
		select {
		case supersedes <- supersession{replica: replica, end: relay.End{Cluster: cluster, Session: session, Reason: reason}}:
		default:
			t.cfg.Logger.Warn("a replaced agent session is left to end by itself: too many at once", "cluster", cluster, "session", session, "replica", replica)
		}
	})
	return func() {
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-supersedes:
				if s.replica == "" {
					t.front.EndSession(s.end.Cluster, s.end.Session, s.end.Reason)
				} else if t.r.sessions != nil {
					t.r.sessions.SendEnd(s.replica, s.end)
				}
			}
		}
	}
}

// supersession is a session to end because a newer one of its cluster
// serves it on another replica.
type supersession struct {
	replica string // "" for this hub's own session
	end     relay.End
}

// supersedeQueue bounds the sessions waiting to be ended.
const supersedeQueue = 1024

// httpServer is the leader's HTTP endpoints over what the term runs.
func (t *term) httpServer() *httpServer {
	return &httpServer{registry: t.registry, agents: t.front, failover: t.failover, guard: t.guard, dashboard: t.board.Handler(), board: t.board,
		metrics: t.metrics, events: t.recorder, sessions: t.r.sessions, httpConns: t.r.httpConns,
		probes: readinessProbes(t.r.store, t.clients.Kube, t.informers, t.front.Serving)}
}

// announce logs that the hub is ready and tells whoever waits for it.
func (t *term) announce() {
	cfg := t.cfg
	cfg.Logger.Info("hub ready", "hubID", cfg.HubID, "quic", t.front.Addr().String(), "websocket", t.front.WebSocketAddr(), "http", t.r.httpAddr.String(),
		"api", t.r.api.URL, "kubeconfig", t.r.api.AdminKubeconfig, "gracePeriod", cfg.Health.GracePeriod, "evictionTimeout", cfg.Health.EvictionTimeout)
	if t.r.ready != nil {
		t.r.ready(t.front.Addr(), t.r.httpAddr)
	}
}

// recordStoreState records on the hub's lease namespace that the store
// guard started or stopped refusing agent-driven writes.
func recordStoreState(recorder controller.Recorder, refusing bool, why string) {
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: v1alpha1.LeaseNamespace}
	if refusing {
		recorder.Event(ref, corev1.EventTypeWarning, "StoreFull", "agent-driven writes (Work status reports, events about agents) are refused until the store shrinks; health changes are still stored: "+why)
		return
	}
	recorder.Event(ref, corev1.EventTypeNormal, "StoreRecovered", "agent-driven writes are stored again: "+why)
}

// agentServer is the part of cfg the agents' front needs.
func (cfg Config) agentServer() agentserver.Config {
	return agentserver.Config{QUICAddr: cfg.QUICAddr, WebSocketAddr: cfg.WebSocketAddr, DataDir: cfg.DataDir, TLSSANs: cfg.TLSSANs,
		Handshakes: cfg.Handshakes, HandshakeTimeout: cfg.QUICHandshakeTimeout, WebSocket: cfg.WebSocketLimits,
		AgentCertTTL: cfg.AgentCertTTL, AgentCSRApproval: cfg.AgentCSRApproval, HubUser: apiserver.HubUser, Health: cfg.Health, HubID: cfg.HubID, Clock: cfg.Clock, Logger: cfg.Logger}
}
