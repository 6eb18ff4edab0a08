// Package hub wires Flotilla's control plane: etcd, the embedded Kubernetes
// API server, the cluster registry with its health decisions, the
// controllers on shared informers, the QUIC endpoint agents dial, and the
// operational HTTP endpoints (health, metrics, counters).
package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/hub/binding"
	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/clusterdeletion"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/dashboard"
	"github.com/flotilla-io/flotilla/hub/detector"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/hub/karmada"
	"github.com/flotilla-io/flotilla/hub/podlabel"
	"github.com/flotilla-io/flotilla/hub/purge"
	"github.com/flotilla-io/flotilla/hub/rebalancer"
	"github.com/flotilla-io/flotilla/hub/relay"
	"github.com/flotilla-io/flotilla/hub/scheduling"
	"github.com/flotilla-io/flotilla/hub/sharedfiles"
	"github.com/flotilla-io/flotilla/hub/status"
	"github.com/flotilla-io/flotilla/hub/templates"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/internal/profiling"
	"github.com/flotilla-io/flotilla/store"
)

// Config is everything the hub needs to run.
type Config struct {
	// DataDir holds the embedded etcd and the CA.
	DataDir string
	// EtcdEndpoints of an external etcd; empty means embedded.
	EtcdEndpoints []string
	// QUICAddr is the UDP address agents dial.
	QUICAddr string
	// AgentAddress is the host:port agents reach QUICAddr at, published
	// for join commands; empty: this host's name (or QUICAddr's IP, if
	// it names one) and the bound port.
	AgentAddress string
	// WebSocketAddr is the TCP address of the WebSocket fallback for
	// agents whose UDP is blocked; empty: QUIC's port, on TCP (if free);
	// WebSocketOff: none.
	WebSocketAddr string
	// HTTPAddr serves the dashboard, /livez, /readyz, /healthz, /metrics
	// and /debug/stats.
	HTTPAddr string
	// ProfilingAddr serves /debug/pprof/; empty: no profiling endpoints.
	// While they serve, the process samples mutex contention (a setting of
	// the whole process).
	ProfilingAddr string
	// APIAddr is the HTTPS address of the embedded kube-apiserver.
	APIAddr string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile secure an external etcd.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// AuditLogPath and AuditPolicyFile configure the API server's audit
	// log (empty path: no audit log; empty policy: the default one).
	AuditLogPath, AuditPolicyFile string
	// KubeAPIServerArgs are passed to the embedded kube-apiserver as they are.
	KubeAPIServerArgs []string
	// Health thresholds; HubStarted is set when the registry has loaded.
	Health health.Config
	// FlushInterval between batched writes of clusters and events.
	FlushInterval time.Duration
	// LeaseFlushInterval between batched writes of renewed leases.
	LeaseFlushInterval time.Duration
	// EventTTL: events older than this are deleted (the API server's
	// --event-ttl).
	EventTTL time.Duration
	// LeaseWritesPerSecond caps lease writes to the API server.
	LeaseWritesPerSecond float64
	// Failover settings: default tolerations, graceful eviction timeout,
	// partition protection.
	Failover failover.Config
	// MaxClockSkew tolerated before ClockSynced goes False.
	MaxClockSkew time.Duration
	// HubID names this hub replica.
	HubID string
	// TLSSANs are extra names or addresses for the QUIC serving certificate.
	TLSSANs []string
	// AgentCertTTL is the lifetime of the agent certificates joins get.
	AgentCertTTL time.Duration
	// AgentCSRApproval is join.ApprovalAuto or join.ApprovalManual.
	AgentCSRApproval string
	// MaxHandshakes bounds the agents' handshakes in flight, QUIC and the
	// WebSocket fallback's TLS together; beyond it a QUIC connection is
	// refused at once (the agent dials again soon) and a TCP one waits.
	// 0: DefaultMaxHandshakes.
	MaxHandshakes int
	// ControllerWorkers is how many bindings (or Works, templates...)
	// each controller reconciles at once; 0: DefaultControllerWorkers.
	ControllerWorkers int
	// Store guards etcd against agent-driven growth (quota, threshold,
	// check interval).
	Store store.GuardConfig
	// LeaderElection among replicas sharing an external etcd.
	LeaderElection LeaderElection
	// Gossip among the replicas (with LeaderElection): the leader's
	// session table, so that the next one judges each cluster as it would
	// have.
	Gossip Gossip
	// LabelLeaderPod: while leading, label this pod (POD_NAMESPACE,
	// POD_NAME) podlabel.Label=true in the cluster it runs in, so that a
	// Service selects the leader for agents.
	LabelLeaderPod bool
	Logger         *slog.Logger
	Clock          clock.WithTicker
}

// DefaultControllerWorkers is how many keys each controller reconciles at
// once unless Config.ControllerWorkers says otherwise.
const DefaultControllerWorkers = 4

// joinWait is how long a join waits for its certificate before the agent
// is told to come back (its request waits for approval).
const joinWait = 20 * time.Second

// Run runs the hub until ctx ends, then says goodbye to the agents, stores
// what changed and stops. ready, if not nil, is called with the bound
// addresses once everything serves.
//
// Every replica serves the Kubernetes API and its HTTP endpoints; with
// leader election, only the elected one runs the rest (lead): the
// controllers, the health decisions and the agent listeners. The others
// stand by and say so on /readyz.
func Run(ctx context.Context, cfg Config, ready func(quicAddr, httpAddr net.Addr)) error {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	logger := cfg.Logger
	apiserver.RouteKlog(logger)
	s, err := store.Open(ctx, store.Config{DataDir: cfg.DataDir, Endpoints: cfg.EtcdEndpoints, Logger: logger, Quota: cfg.Store.Quota,
		TLS: store.TLSFiles{CAFile: cfg.EtcdCAFile, CertFile: cfg.EtcdCertFile, KeyFile: cfg.EtcdKeyFile}})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.CheckNoLegacyData(ctx); err != nil {
		return err
	}
	if err := sharedfiles.Sync(ctx, s.Client(), cfg.DataDir, func() error { return ensureSharedFiles(cfg.DataDir) }, logger); err != nil {
		return err
	}
	hubCA, err := ca.EnsureCA(cfg.DataDir)
	if err != nil {
		return err
	}
	// The API server stops with apiCtx, after everything that uses it.
	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	api, err := startAPIServer(ctx, apiCtx, cfg, s, hubCA)
	if err != nil {
		stopAPI()
		if api != nil {
			<-api.Done()
		}
		return err
	}
	defer func() {
		stopping := time.Now()
		stopAPI()
		<-api.Done()
		logger.Info("API server stopped", "took", time.Since(stopping).Round(time.Millisecond))
	}()
	r := &replica{cfg: cfg, store: s, api: api, ca: hubCA, http: &switchHandler{}, ready: ready}
	if cfg.LabelLeaderPod {
		if r.labeler, err = podlabel.InCluster(logger); err != nil {
			return err
		}
	}
	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen for HTTP on %s: %w", cfg.HTTPAddr, err)
	}
	r.httpAddr = httpLn.Addr()
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	stopHTTP := serveHTTP(ctx, httpLn, r.http, stop)
	go func() {
		select {
		case <-api.Done():
			stop(fmt.Errorf("kube-apiserver stopped: %w", api.Err()))
		case <-runCtx.Done():
		}
	}()
	labelDone := make(chan struct{})
	go func() {
		defer close(labelDone)
		if r.labeler != nil {
			r.labeler.Run(runCtx)
		}
	}()
	if cfg.LeaderElection.Enabled {
		err = r.runElected(runCtx)
	} else {
		err = r.lead(runCtx)
	}
	// Stopped by a failed HTTP server or API server rather than ctx.
	if err == nil && ctx.Err() == nil && runCtx.Err() != nil {
		err = context.Cause(runCtx)
	}
	stop(nil)
	stopHTTP()
	<-labelDone // the label comes off the pod on the way out
	return err
}

// serveHTTP serves handler on ln until the returned function is called
// (which waits up to 10 s for requests to finish); a failure of the server
// stops the hub through stop. Requests see ctx: dashboard streams end with
// the hub rather than holding up its shutdown.
func serveHTTP(ctx context.Context, ln net.Listener, handler http.Handler, stop context.CancelCauseFunc) func() {
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			stop(fmt.Errorf("HTTP server: %w", err))
		}
	}()
	return func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
		<-done
	}
}

// ensureSharedFiles makes the files hub replicas share, where missing.
func ensureSharedFiles(dataDir string) error {
	if _, err := ca.EnsureCA(dataDir); err != nil {
		return err
	}
	if _, err := ca.LoadStatelessResetKey(dataDir); err != nil {
		return err
	}
	return apiserver.EnsureServiceAccountKey(dataDir)
}

// replica is what a hub process holds whether it leads or stands by.
type replica struct {
	cfg      Config
	store    *store.Store
	api      *apiserver.Server
	ca       *pki.CA
	http     *switchHandler
	httpAddr net.Addr
	ready    func(quicAddr, httpAddr net.Addr)
	// labeler, if set, marks this pod while it leads.
	labeler *podlabel.Labeler
	// identity is the replica's name in the election and the gossip;
	// sessions, if set, its part in the gossip.
	identity string
	sessions *sessionGossip
	// front and relay, with gossip, serve agents whether this replica
	// leads or stands by (serveAgents); without, lead opens the listeners.
	front *agentFront
	relay *sessionRelay
}

// agentsReceiveBuffer is the receive buffer asked for the agents' UDP
// socket. quic-go asks for 7 MiB; at 10,000 agents on two cores the hub's
// socket still dropped 4,000 packets a second while the fleet reconnected
// after a restart (handshakes then time out and agents back off), and
// thousands in the bursts of a steady fleet.
const agentsReceiveBuffer = 32 << 20

// lead runs the controllers and the registry until ctx ends, then says
// goodbye to the agents and stores what changed. It opens the agent
// listeners too, unless the replica serves agents anyway (r.front): its
// sessions then go to the registry from now on (r.relay), and so do what
// the other replicas relay about theirs.
func (r *replica) lead(ctx context.Context) error {
	cfg, s, api, hubCA, logger := r.cfg, r.store, r.api, r.ca, r.cfg.Logger
	cfg.Health.HubStarted = time.Time{} // the registry sets it once loaded
	metrics := newHubMetrics()
	hubConfig := metrics.instrument(api.HubConfig)
	clients, err := kube.NewClients(hubConfig)
	if err != nil {
		return err
	}
	crdClient, err := apiextensionsclient.NewForConfig(hubConfig)
	if err != nil {
		return err
	}
	templateSource := templates.New(clients, crdClient, logger)
	informers, err := controller.NewInformers(clients, templateSource)
	if err != nil {
		return err
	}
	// Events and the registry's writes outlive the controllers: the final
	// flush runs after everything else has stopped.
	registryCtx, stopRegistry := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRegistry()
	recorder := controller.StartEventRecorder(registryCtx, clients.Kube)
	clusters := informers.Clusters
	registry, err := NewRegistry(ctx, RegistryAPI{Flotilla: clients.Flotilla, Kube: clients.Kube, Recorder: recorder}, RegistryConfig{
		Health: cfg.Health, FlushInterval: cfg.FlushInterval, LeaseFlushInterval: cfg.LeaseFlushInterval,
		LeaseWritesPerSecond: cfg.LeaseWritesPerSecond, MaxClockSkew: cfg.MaxClockSkew, HubID: cfg.HubID,
		Handover: r.takeOverSessions(),
	}, cfg.Clock, logger)
	if err != nil {
		return err
	}
	guard := s.NewGuard(cfg.Store, func(refusing bool, why string) { recordStoreState(recorder, refusing, why) })
	registry.SetStoreGate(guard.AllowAgentWrite)
	clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		if cur == nil {
			registry.Forget(old.Name)
			return
		}
		registry.Observe(cur)
	})

	// Every controller adds its handlers to the shared informers before
	// they start.
	front := r.front
	if front == nil {
		if front, err = openAgentFront(ctx, cfg, hubCA, clients, informers, recorder, registry); err != nil {
			return err
		}
		defer front.close()
	}
	front.dispatcher.SetStoreGate(guard.AllowAgentWrite)
	if err := publishJoinInfo(ctx, clients.Kube, cfg.AgentAddress, front.udpConn.LocalAddr(), hubCA.Cert); err != nil {
		return err
	}
	profLn, err := profiling.Listen(cfg.ProfilingAddr)
	if err != nil {
		return err
	}
	failoverCtl := failover.New(clients, informers, recorder, cfg.Clock, logger, cfg.Failover)
	scheduler := scheduling.New(clients, informers, recorder, cfg.Clock, logger)
	metrics.observe(registry, front.dispatcher, scheduler, failoverCtl)
	controllers := []interface{ Run(context.Context, int) }{
		detector.New(clients, informers, recorder, cfg.Clock, logger),
		scheduler,
		binding.New(clients, informers, recorder, cfg.Clock, logger),
		status.New(clients, informers, recorder, cfg.Clock, logger),
		failoverCtl,
		rebalancer.New(clients, informers, recorder, cfg.Clock, logger),
		purge.New(clients, informers, recorder, cfg.Clock, logger),
		karmada.New(clients, informers, recorder, logger),
		clusterdeletion.New(clients, informers, recorder, logger),
		front.joins,
	}
	board := dashboard.New(dashboard.Config{
		Clusters: informers.Clusters, Bindings: informers.Bindings, ClusterBindings: informers.ClusterBindings,
		Leases: registry, ZoneModes: func() map[string]string { return failoverCtl.Stats().ZoneModes },
		Kube: clients.Kube, API: api.HubConfig, EvictionGrace: cfg.Failover.GracefulEvictionTimeout,
		Settings: dashboard.Settings{HubID: cfg.HubID, GracePeriod: cfg.Health.GracePeriod.Milliseconds(),
			DefaultLeaseDuration: cfg.Health.DefaultLeaseDuration.Milliseconds(), EvictionTimeout: cfg.Health.EvictionTimeout.Milliseconds()},
		Clock: cfg.Clock, Logger: logger,
	})
	templateSource.Start(registryCtx)
	informers.Start(registryCtx)
	httpAPI := &httpServer{registry: registry, agents: front.agents, failover: failoverCtl, guard: guard, dashboard: board.Handler(), metrics: metrics, events: recorder, sessions: r.sessions,
		probes: readinessProbes(s, clients.Kube, informers, &front.serving)}

	var wg sync.WaitGroup
	wg.Go(func() { registry.Run(registryCtx) })
	publishing := make(chan struct{})
	go func() {
		defer close(publishing)
		if r.sessions != nil {
			r.sessions.publish(ctx, registry, r.identity, cfg.Clock)
		}
	}()
	wg.Go(func() { guard.Run(registryCtx) })
	wg.Go(func() { board.Run(ctx) })
	workers := cmp.Or(cfg.ControllerWorkers, DefaultControllerWorkers)
	for _, c := range controllers {
		wg.Go(func() { c.Run(ctx, workers) })
	}
	// One session per cluster across the replicas: the registry ends the
	// older of two, here or on the replica holding it, through a bounded
	// queue (a peer relaying many stale sessions costs no goroutines).
	supersedes := make(chan supersession, supersedeQueue)
	registry.SetSupersede(func(cluster, session, replica, reason string) {
		select {
		case supersedes <- supersession{replica: replica, end: relay.End{Cluster: cluster, Session: session, Reason: reason}}:
		default:
			logger.Warn("a replaced agent session is left to end by itself: too many at once", "cluster", cluster, "session", session, "replica", replica)
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-supersedes:
				if s.replica == "" {
					front.agents.endSession(s.end.Cluster, s.end.Session, s.end.Reason)
				} else if r.sessions != nil {
					r.sessions.sendEnd(s.replica, s.end)
				}
			}
		}
	})
	if r.front == nil {
		front.start(ctx)
	} else {
		r.relay.attach(registry)
		wg.Go(func() { r.sessions.applyRelayed(ctx, registry, cfg.Clock) })
	}
	if profLn != nil {
		wg.Go(func() { profiling.Serve(ctx, profLn, logger) })
	}
	r.http.set(httpAPI.handler())
	defer r.http.set(nil)

	logger.Info("hub ready", "hubID", cfg.HubID, "quic", front.ln.Addr().String(), "websocket", front.wsAddr(), "http", r.httpAddr.String(), "api", api.URL, "kubeconfig", api.AdminKubeconfig,
		"gracePeriod", cfg.Health.GracePeriod, "evictionTimeout", cfg.Health.EvictionTimeout)
	if r.ready != nil {
		r.ready(front.ln.Addr(), r.httpAddr)
	}
	if r.labeler != nil { // agents may come now
		r.labeler.Want(true)
		defer r.labeler.Want(false)
	}
	<-ctx.Done()
	logger.Info("hub shutting down", "why", context.Cause(ctx))
	// No table goes out once the leader stops: publish drops one taken
	// after ctx ended, when the goodbyes (which start with it) may have
	// ended sessions.
	<-publishing
	// Agents get a goaway while the listener still runs (serve sends it when
	// its context ends); only then does the listener close.
	front.goodbye()
	logger.Info("agent sessions closed: agents reconnect to the next leader or this hub restarted")
	stopRegistry() // the writer's final flush runs on its way out
	wg.Wait()
	return nil
}

// supersession is a session to end because a newer one of its cluster
// serves it on another replica.
type supersession struct {
	replica string // "" for this hub's own session
	end     relay.End
}

// supersedeQueue bounds the sessions waiting to be ended.
const supersedeQueue = 1024
