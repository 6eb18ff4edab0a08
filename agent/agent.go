package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/agent/clusterstatus"
	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/agent/work"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// Agent keeps one member cluster connected to the hub.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	clock clock.WithTicker
	// store keeps the credentials; tls is made from them, nil until a
	// join got them.
	store credstore.Store
	// token is where the bootstrap token is kept, emptied after a join
	// (nil: not in a Secret the agent knows).
	token  *credstore.TokenSecret
	tls    *tls.Config
	status *clusterstatus.Collector
	// capacity watches nodes and pods for the status reports.
	capacity *clusterstatus.Capacity
	works    *work.Engine
	stats    statsBox
	jitter   rand.Source
	// joinTimeout bounds one join attempt (joinAttemptTimeout; tests
	// shorten it).
	joinTimeout time.Duration
	// rotation schedules certificate renewals (rotate.go).
	rotation rotation
	// transports picks the transport of each dial (Run's goroutine only).
	transports transportChooser
	// lastHub is, per transport, the hub replica address of the last
	// connection: the next dial tries it first.
	// lookupIP resolves hub names; nil is net.DefaultResolver's (tests
	// give a name several addresses).
	lookupIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
	hubMu    sync.Mutex
	lastHub  map[transport.Kind]string
}

// New checks cfg, makes the member cluster clients, reads the credentials
// and returns an agent ready to run. Its errors are configuration errors,
// each naming the setting, file or Secret at fault. Without a certificate
// in its store but with a bootstrap token, the agent joins when it runs.
func New(cfg Config) (*Agent, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid agent configuration: %w", err)
	}
	clients, err := newKubeClients(cfg)
	if err != nil {
		return nil, err
	}
	return newAgentWithCredentials(context.Background(), cfg, clients)
}

// newAgentWithCredentials assembles an agent on clients and reads its
// credentials (bounded by credentialsTimeout).
func newAgentWithCredentials(ctx context.Context, cfg Config, clients kubeClients) (*Agent, error) {
	a, err := newAgent(cfg, nil, clients, clusterstatus.APIServerProbe(clients.kube.Discovery().RESTClient()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, credentialsTimeout)
	defer cancel()
	if err := a.loadCredentials(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// credentialsTimeout bounds reading the credentials when the agent starts.
const credentialsTimeout = 30 * time.Second

// loadCredentials reads the credential store and sets a.tls from it, or
// to nil when a bootstrap token is given and the store lacks a certificate
// (the agent joins first).
func (a *Agent) loadCredentials(ctx context.Context) error {
	c, err := a.store.Load(ctx)
	if err != nil {
		return err
	}
	if a.cfg.BootstrapToken != "" && !c.Complete() {
		a.tls = nil
		return nil
	}
	// Certificate validity is about the real world, not an injected clock.
	tlsConf, err := tlsConfigFrom(a.cfg, a.store, c, time.Now())
	if err != nil {
		if a.cfg.BootstrapToken == "" && !c.Complete() {
			err = fmt.Errorf("%w; or give --bootstrap-token and --hub-ca-hash to join", err)
		}
		return err
	}
	a.tls = tlsConf
	return nil
}

// newAgent assembles an agent from checked parts; tests use it to swap the
// member cluster for a fake. The credential store is the one cfg names,
// on clients.kube; tlsConf is what the agent dials with, nil to join first.
func newAgent(cfg Config, tlsConf *tls.Config, clients kubeClients, probe clusterstatus.Probe) (*Agent, error) {
	cfg = cfg.withDefaults()
	client, dyn := clients.kube, clients.dynamic
	watchClient := clients.watch
	if watchClient == nil {
		watchClient = client
	}
	caps := clusterstatus.NewCapacity(watchClient)
	log := cfg.Logger.With("cluster", cfg.ClusterName)
	m := cfg.metrics
	works, err := work.NewEngine(work.Config{Kube: client, Dynamic: dyn, SystemNamespace: cfg.SystemNamespace, Owner: clients.owner,
		Logger: log.With("component", "work"), Clock: cfg.Clock, ObserveApply: m.observeApply, Policy: cfg.MemberPolicy})
	if err != nil {
		return nil, err
	}
	m.watchWorks(works)
	return &Agent{
		cfg:      cfg,
		log:      log,
		clock:    cfg.Clock,
		store:    newCredentialStore(cfg, clients),
		token:    tokenSecret(cfg, client),
		tls:      tlsConf,
		status:   clusterstatus.NewCollector(client, caps, probe, cfg.Clock, log),
		capacity: caps,
		works:    works,
		jitter:   rand.NewPCG(rand.Uint64(), rand.Uint64()),

		joinTimeout: joinAttemptTimeout,
		rotation:    newRotation(),
		transports:  transportChooser{mode: cfg.Transport, retry: cfg.QUICRetryInterval},
		lastHub:     map[transport.Kind]string{},
	}, nil
}

// newCredentialStore is the store cfg (with defaults) names: a Secret in
// the system namespace read and written with clients.kube, owned by
// clients.owner, or a directory.
func newCredentialStore(cfg Config, clients kubeClients) credstore.Store {
	log := cfg.Logger.With("cluster", cfg.ClusterName)
	if cfg.CertSecret != "" {
		return credstore.NewSecret(clients.kube, cfg.SystemNamespace, cfg.CertSecret, clients.owner, log)
	}
	return credstore.NewDir(cfg.CertDir, log)
}

// tokenSecret is where cfg keeps the bootstrap token, or nil.
func tokenSecret(cfg Config, client kubernetes.Interface) *credstore.TokenSecret {
	if cfg.BootstrapTokenSecret == "" {
		return nil
	}
	return &credstore.TokenSecret{Client: client, Namespace: cfg.SystemNamespace, Name: cfg.BootstrapTokenSecret, Key: cfg.BootstrapTokenSecretKey}
}

// Stats returns a snapshot of the agent's connection statistics. It is safe
// to call while Run runs.
func (a *Agent) Stats() Stats { return a.stats.get() }

// Run connects to the hub and keeps reconnecting, with jittered exponential
// backoff, until ctx ends. Then it sends GoAway, closes the connection and
// returns nil; no goroutine it started outlives it. The Work engine and
// the node and pod watches run for the whole of Run, connected or not.
// Call Run at most once.
//
// An agent without a certificate joins first (see [Agent.join]); Run
// returns an error if the hub refuses it.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("agent starting", "hub", a.cfg.Hub, "version", a.cfg.Version,
		"leaseDuration", a.cfg.LeaseDuration, "statusInterval", a.cfg.StatusInterval,
		"systemNamespace", a.cfg.SystemNamespace)
	if a.tls == nil {
		if err := a.join(ctx); err != nil {
			if ctx.Err() != nil {
				a.log.Info("agent stopped")
				return nil
			}
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := a.works.Run(ctx); err != nil {
			a.log.Error("work engine stopped", "err", err)
		}
	})
	wg.Go(func() { a.capacity.Run(ctx) })
	b := newBackoff(backoffInitial, backoffMax, a.jitter)
	var next *dialed // a connection a session found for the next one
	for {
		welcomedAt, err := a.runSession(ctx, next)
		next = nil
		var back *quicBackError
		if errors.As(err, &back) {
			next = back.next
		}
		if ctx.Err() != nil {
			if next != nil {
				next.conn.CloseWithError(protocol.CloseNormal, shutdownReason)
				next.release()
			}
			a.log.Info("agent stopped")
			return nil
		}
		if next != nil {
			a.transports.connected(transport.QUIC, nil, a.clock.Now())
			b.Reset()
			continue // at once, on the new connection
		}
		if errors.Is(err, errRotated) {
			a.log.Info("reconnecting with the renewed certificate")
			b.Reset()
			continue // at once: the lease must not lapse
		}
		delay := reconnectDelay(b, err, welcomedAt, a.clock.Now())
		a.logSessionEnd(err, !welcomedAt.IsZero(), delay)
		if !a.sleep(ctx, delay) {
			a.log.Info("agent stopped")
			return nil
		}
	}
}

// Redialer tells how long to wait before dialling the hub again after a
// session or dial ended, as the agent does (reconnectDelay); the load
// tool's simulated agents use it to come back as agents do. It is not
// safe for concurrent use.
type Redialer struct{ backoff *backoff }

// NewRedialer returns a Redialer drawing its jitter from src.
func NewRedialer(src rand.Source) *Redialer {
	return &Redialer{backoff: newBackoff(backoffInitial, backoffMax, src)}
}

// Delay is the wait before the next dial after a session that ended at now
// with err (nil after a session the hub welcomed and then ended without
// error), welcomed at welcomedAt (zero if it never was).
func (r *Redialer) Delay(err error, welcomedAt, now time.Time) time.Duration {
	return reconnectDelay(r.backoff, err, welcomedAt, now)
}

// reconnectDelay is the wait before redialing after a session that ended
// at now with err: short for a busy hub, else retryDelay.
func reconnectDelay(b *backoff, err error, welcomedAt, now time.Time) time.Duration {
	if HubBusy(err) {
		return b.Busy()
	}
	return retryDelay(b, welcomedAt, now, RefusedByHub(err))
}

// retryDelay is the wait before redialing after a session that ended at now;
// welcomedAt is when the hub welcomed it, zero if it never did; refused
// says whether the hub refused this agent. A session that ran stably
// starts the backoff over.
func retryDelay(b *backoff, welcomedAt, now time.Time, refused bool) time.Duration {
	if !welcomedAt.IsZero() && now.Sub(welcomedAt) >= stableSession {
		b.Reset()
	}
	if refused {
		return b.Next()
	}
	return b.Capped(backoffMaxUnreachable)
}

// logSessionEnd says why a session ended and when the agent retries.
func (a *Agent) logSessionEnd(err error, welcomed bool, delay time.Duration) {
	var goAway *goAwayError
	var peerErr *protocol.Error
	switch {
	case HubBusy(err):
		a.log.Info("the hub is busy with other agents' handshakes, dialling again soon", "retryIn", delay)
	case errors.As(err, &goAway):
		a.log.Info("hub sent GoAway, reconnecting", "reason", goAway.reason, "retryIn", delay)
	case errors.As(err, &peerErr):
		// Unauthorized, UnsupportedVersion, ClusterMismatch: an operator
		// must act, so say so loudly, but keep retrying in case they do.
		a.log.Error("hub refused the session", "code", peerErr.Code, "message", peerErr.Message,
			"err", err, "retryIn", delay)
	case welcomed:
		a.log.Warn("lost the connection to the hub", "err", err, "retryIn", delay)
	default:
		a.log.Warn("cannot connect to the hub", "err", err, "retryIn", delay)
	}
}

// sleep waits for d on the agent's clock; false means ctx ended first.
func (a *Agent) sleep(ctx context.Context, d time.Duration) bool {
	t := a.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
