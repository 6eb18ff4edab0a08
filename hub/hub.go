// Package hub wires Flotilla's control plane: etcd, the embedded Kubernetes
// API server, the cluster registry with its health decisions, the
// controllers on shared informers, the QUIC endpoint agents dial, and the
// operational HTTP endpoints (health, metrics, counters).
package hub

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/hub/agentserver"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/hub/podlabel"
	"github.com/flotilla-io/flotilla/hub/replicas"
	"github.com/flotilla-io/flotilla/hub/sharedfiles"
	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/internal/writelimit"
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
	// agentserver.WebSocketOff: none.
	WebSocketAddr string
	// HTTPAddr serves the dashboard, /livez, /readyz, /healthz, /metrics
	// and /debug/stats.
	HTTPAddr string
	// HTTPTLS serves HTTPAddr over TLS, with a certificate of the hub CA
	// for the names the QUIC certificate has (TLSSANs).
	HTTPTLS bool
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
	// Handshakes bound the agents' handshakes in flight, QUIC and the
	// WebSocket fallback's TLS together: beyond Max a QUIC connection is
	// refused at once (the agent dials again soon) and a TCP one waits;
	// past RetryThreshold a QUIC connection proves its source address
	// first (Retry); PerSource caps one source address's. Zero fields:
	// agentserver's defaults.
	Handshakes agentserver.HandshakeLimits
	// QUICHandshakeTimeout: a QUIC handshake silent this long is dropped;
	// 0: agentserver.DefaultHandshakeTimeout.
	QUICHandshakeTimeout time.Duration
	// WebSocketLimits cap the WebSocket fallback's connections until
	// their upgrade and time their TLS handshakes, headers and idle
	// spells; HTTPLimits do the same for HTTPAddr's. Zero fields:
	// agentserver.DefaultWebSocketLimits, DefaultHTTPLimits.
	WebSocketLimits, HTTPLimits netlimit.ServerLimits
	// ControllerWorkers is how many bindings (or Works, templates...)
	// each controller reconciles at once; 0: DefaultControllerWorkers.
	ControllerWorkers int
	// ReportWriteSlots is how many writes of reported status (agents' Work
	// status, bindings' aggregated status, templates' status) the hub has
	// in flight at once; 0: DefaultReportWriteSlots.
	ReportWriteSlots int
	// Store guards etcd against agent-driven growth (quota, threshold,
	// check interval).
	Store store.GuardConfig
	// LeaderElection among replicas sharing an external etcd.
	LeaderElection LeaderElection
	// Gossip among the replicas (with LeaderElection): the leader's
	// session table, so that the next one judges each cluster as it would
	// have, and the sessions standbys serve, relayed to the leader.
	Gossip replicas.GossipConfig
	// LabelLeaderPod: while leading, label this pod (POD_NAMESPACE,
	// POD_NAME) podlabel.Label=true in the cluster it runs in, so that a
	// Service selects the leader for agents.
	LabelLeaderPod bool
	Logger         *slog.Logger
	Clock          clock.WithTicker
}

// Defaults of the caps on the connections to HTTPAddr: an operator's
// browser, Prometheus and probes need a handful each; behind a Service
// many may come from one node's address.
const (
	DefaultHTTPMaxConns          = 1024
	DefaultHTTPMaxConnsPerSource = 64
)

// DefaultHTTPLimits are HTTPAddr's caps and timeouts where
// Config.HTTPLimits leaves them zero.
var DefaultHTTPLimits = netlimit.DefaultServerLimits(DefaultHTTPMaxConns, DefaultHTTPMaxConnsPerSource)

// DefaultControllerWorkers is how many keys each controller reconciles at
// once unless Config.ControllerWorkers says otherwise.
const DefaultControllerWorkers = controller.DefaultWorkers

// DefaultReportWriteSlots bounds the hub's writes of reported status in
// flight unless Config.ReportWriteSlots says otherwise. When a failover
// floods the API server, the reports wait in the hub (each Work's and
// binding's latest one) and the evictions, placements and Works go first.
const DefaultReportWriteSlots = 4

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
	agentCA, err := ca.EnsureAgentCA(cfg.DataDir)
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
	r := &replica{cfg: cfg, store: s, api: api, ca: hubCA, agentCA: agentCA, http: &switchHandler{}, ready: ready,
		reportWrites: writelimit.New(cmp.Or(cfg.ReportWriteSlots, DefaultReportWriteSlots))}
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
	httpLimits := cfg.HTTPLimits.Or(DefaultHTTPLimits)
	r.httpConns = netlimit.NewListener(httpLn, "http", httpLimits.Limits, logger, nil)
	httpServed, err := httpListener(cfg, hubCA, r.httpConns)
	if err != nil {
		_ = httpLn.Close()
		return err
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	stopHTTP := serveHTTP(ctx, httpServed, httpLimits, r.http, stop)
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

// httpListener is ln, or with cfg.HTTPTLS, ln serving TLS with a
// certificate of the hub CA (the server's ReadHeaderTimeout bounds the
// handshake).
func httpListener(cfg Config, hubCA *pki.CA, ln net.Listener) (net.Listener, error) {
	if !cfg.HTTPTLS {
		return ln, nil
	}
	cert, err := ca.ServingCertificate(hubCA, cfg.TLSSANs)
	if err != nil {
		return nil, fmt.Errorf("serving certificate for --http-tls: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}), nil
}

// serveHTTP serves handler on ln, with limits' timeouts, until the
// returned function is called (which waits up to 10 s for requests to
// finish); a failure of the server stops the hub through stop. Requests
// see ctx: dashboard streams end with the hub rather than holding up its
// shutdown.
func serveHTTP(ctx context.Context, ln net.Listener, limits netlimit.ServerLimits, handler http.Handler, stop context.CancelCauseFunc) func() {
	server := &http.Server{Handler: handler, BaseContext: func(net.Listener) context.Context { return ctx }}
	limits.Apply(server)
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
	if _, err := ca.LoadGossipKey(dataDir); err != nil {
		return err
	}
	if _, err := ca.EnsureAgentCA(dataDir); err != nil {
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
	agentCA  *pki.CA // signs agent certificates
	http     *switchHandler
	httpAddr net.Addr
	// httpConns caps the connections to httpAddr and counts them.
	httpConns *netlimit.Listener
	ready     func(quicAddr, httpAddr net.Addr)
	// labeler, if set, marks this pod while it leads.
	labeler *podlabel.Labeler
	// identity is the replica's name in the election and the gossip;
	// sessions, if set, its part in the gossip.
	identity string
	sessions *replicas.Gossip
	// front and relay, with gossip, serve agents whether this replica
	// leads or stands by (serveAgents); without, lead opens the listeners.
	front *agentserver.Front
	relay *replicas.Relay
	// reportWrites bounds the writes of reported status in flight: the
	// dispatcher's and the status controller's clients share its slots.
	reportWrites *writelimit.Limiter
}

// cas are the CAs the agents' front uses.
func (r *replica) cas() agentserver.CAs { return agentserver.CAs{Hub: r.ca, Agent: r.agentCA} }
