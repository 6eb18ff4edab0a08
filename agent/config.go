package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/agent/memberpolicy"
	"github.com/flotilla-io/flotilla/agent/work"
)

// DefaultPodSecurity is the Pod Security Admission level of the namespaces
// the agent creates, unless its owner says otherwise.
const DefaultPodSecurity = "baseline"

// DefaultMemberPolicy is the policy of an agent whose owner set none: see
// Config.MemberPolicy.
func DefaultMemberPolicy(systemNamespace string) *memberpolicy.Policy {
	if systemNamespace == "" {
		systemNamespace = work.DefaultSystemNamespace
	}
	return &memberpolicy.Policy{DenyNamespaces: memberpolicy.DefaultDenyNamespaces,
		Reserved: []string{systemNamespace}, PodSecurity: DefaultPodSecurity}
}

// Defaults for Config fields left zero.
const (
	DefaultLeaseDuration  = 40 * time.Second
	DefaultStatusInterval = 10 * time.Second
	DefaultKubeQPS        = 50
	DefaultKubeBurst      = 100
	// DefaultBootstrapTokenSecretKey is the token's key in the
	// BootstrapTokenSecret, as the agent chart stores it.
	DefaultBootstrapTokenSecretKey = "token"
)

// maxLeaseDuration is the longest lease the protocol lets an agent ask for.
const maxLeaseDuration = time.Hour

// Config configures an Agent.
type Config struct {
	// Hub is the hub's QUIC address, host:port (UDP).
	Hub string
	// Transport is auto (default: QUIC, falling back to the WebSocket over
	// TCP when QUIC gets no answer), quic or websocket.
	Transport string
	// HubWebSocket is the hub's TCP address for the WebSocket fallback,
	// host:port (default: Hub's, the same port on TCP).
	HubWebSocket string
	// QUICFallbackAfter is how long a QUIC dial may go unanswered before
	// auto tries the WebSocket (default 5s).
	QUICFallbackAfter time.Duration
	// QUICRetryInterval is how often a session on the fallback tries QUIC
	// again, and moves to it when it connects (default 1m).
	QUICRetryInterval time.Duration
	// ClusterName is this member cluster's name, a DNS-1123 subdomain. The
	// client certificate must be issued for it.
	ClusterName string
	// Kubeconfig is the path of a kubeconfig for the member cluster; empty
	// means the in-cluster configuration of the agent's service account.
	Kubeconfig string
	// CertDir holds ca.crt (the CA that signed the hub's certificate),
	// tls.crt and tls.key (this agent's client certificate and key). When
	// any of them is missing and BootstrapToken is set, the agent joins
	// and writes them here (creating CertDir, mode 0700, if needed).
	// Exactly one of CertDir and CertSecret is required.
	CertDir string
	// CertSecret names a Secret in SystemNamespace of the member cluster
	// that keeps the same items as data keys (and tls.key.next while a
	// renewal waits for its answer): a join creates it, a renewal updates
	// it, every start (and every newly elected leader) reads it.
	CertSecret string
	// BootstrapToken (from `flotilla token create`) lets an agent without
	// a certificate join the hub: it sends the token and a certificate
	// request, and the hub signs it. It needs HubCAHash. Unused once
	// CertDir holds a certificate.
	BootstrapToken string
	// BootstrapTokenSecret names the Secret in SystemNamespace that holds
	// the bootstrap token, under BootstrapTokenSecretKey (default
	// "token"): once a join has stored the certificate, the agent empties
	// the token there, so the member cluster keeps no copy of it.
	BootstrapTokenSecret    string
	BootstrapTokenSecretKey string
	// HubCAHash pins the hub's CA while joining, "sha256:" and the hex
	// SHA-256 of its public key (kubeadm's --discovery-token-ca-cert-hash):
	// the agent trusts a hub whose certificate chain has that CA, and
	// nothing else.
	HubCAHash string
	// Provider, Region, Zone and Labels are registration metadata sent
	// when joining. The hub takes only Labels under
	// protocol.AgentLabelPrefix from an agent, and ignores the rest (the
	// token it joins with sets them); the agent warns of them at its
	// join. Each value is a Kubernetes label value, and Labels' keys
	// label keys.
	Provider, Region, Zone string
	Labels                 map[string]string
	// LeaseDuration is the lease the agent asks the hub for (default 40s,
	// whole seconds, at most 1h).
	LeaseDuration time.Duration
	// StatusInterval is how often the agent reports cluster status
	// (default 10s).
	StatusInterval time.Duration
	// SystemNamespace is the member cluster namespace where the agent keeps
	// its records of the Works it applied, its credential Secret and its
	// election Lease (default flotilla-system). It is created if missing.
	SystemNamespace string
	// OwnerServiceAccount names a ServiceAccount in SystemNamespace (the
	// Helm release's) that becomes the owner of the objects the agent
	// makes there for itself: its election Lease, its certificate Secret
	// and its Work records; ones made without it get it on the agent's
	// next start or write. Deleting the ServiceAccount (uninstalling the
	// release) then has the member cluster's garbage collector delete
	// them. Empty: no owner; they stay until deleted by hand. An owner
	// that cannot be read is warned of once, and the objects are written
	// without it.
	OwnerServiceAccount string
	// MemberPolicy bounds what the hub may write in the member cluster
	// (see package memberpolicy). Nil: the default policy, which refuses
	// kube-system, kube-public, kube-node-lease and SystemNamespace, every
	// cluster-scoped kind, and labels created namespaces Pod Security
	// baseline.
	MemberPolicy *memberpolicy.Policy
	// KubeQPS and KubeBurst limit the agent's requests to its member
	// cluster (defaults 50 and 100; client-go's own 5/10 would throttle a
	// rollout of many Works).
	KubeQPS   float32
	KubeBurst int
	// LeaderElection, when enabled, makes the agent one of several
	// replicas of which only the leader runs (see leader.go).
	LeaderElection LeaderElection
	// HTTPAddr is the address of the agent's HTTP endpoints (/healthz,
	// /readyz, /metrics); empty means none.
	HTTPAddr string
	// HTTPAddrOptional makes a failure to listen on HTTPAddr a warning
	// (the agent runs without endpoints) instead of an error. It is for
	// flotilla-agent's default address, which only one of several agents
	// on a host can have; an address given explicitly must work.
	HTTPAddrOptional bool
	// ProfilingAddr serves Go's profiling endpoints (/debug/pprof/);
	// empty means none. While they serve, the process samples mutex
	// contention (a setting of the whole process).
	ProfilingAddr string
	// Version is the agent's version, sent in Hello.
	Version string
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// Clock drives renewals, status reports, backoff and measurements; nil
	// means the real clock. Network deadlines always use the real clock.
	Clock clock.WithTicker

	// metrics are the agent's metrics; withDefaults makes them.
	metrics *metrics
	// onHTTP, if set, is told the address the HTTP endpoints listen on
	// (tests listen on port 0).
	onHTTP func(net.Addr)
}

// LeaderElection configures leader election among agent replicas, on a
// coordination.k8s.io Lease in the system namespace.
type LeaderElection struct {
	Enabled bool
	// LeaseName names the Lease (default flotilla-agent).
	LeaseName string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's
	// (defaults 15s, 10s, 2s): a standby takes over LeaseDuration after
	// the leader's last renewal; a leader that cannot renew for
	// RenewDeadline stops; every RetryPeriod each replica tries.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Defaults of leader election.
const (
	DefaultLeaderElectionLeaseName     = "flotilla-agent"
	DefaultLeaderElectionLeaseDuration = 15 * time.Second
	DefaultLeaderElectionRenewDeadline = 10 * time.Second
	DefaultLeaderElectionRetryPeriod   = 2 * time.Second
)

// withDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	if cfg.MemberPolicy == nil {
		cfg.MemberPolicy = DefaultMemberPolicy(cfg.SystemNamespace)
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.StatusInterval == 0 {
		cfg.StatusInterval = DefaultStatusInterval
	}
	if cfg.Transport == "" {
		cfg.Transport = TransportAuto
	}
	if cfg.HubWebSocket == "" { // the same host and port, on TCP
		cfg.HubWebSocket = strings.Join(splitHubs(cfg.Hub), ",")
	}
	if cfg.QUICFallbackAfter == 0 {
		cfg.QUICFallbackAfter = DefaultQUICFallbackAfter
	}
	if cfg.QUICRetryInterval == 0 {
		cfg.QUICRetryInterval = DefaultQUICRetryInterval
	}
	if cfg.SystemNamespace == "" {
		cfg.SystemNamespace = work.DefaultSystemNamespace
	}
	if cfg.BootstrapTokenSecretKey == "" {
		cfg.BootstrapTokenSecretKey = DefaultBootstrapTokenSecretKey
	}
	if cfg.KubeQPS == 0 {
		cfg.KubeQPS = DefaultKubeQPS
	}
	if cfg.KubeBurst == 0 {
		cfg.KubeBurst = DefaultKubeBurst
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.metrics == nil {
		cfg.metrics = newMetrics()
	}
	le := &cfg.LeaderElection
	if le.LeaseName == "" {
		le.LeaseName = DefaultLeaderElectionLeaseName
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration = DefaultLeaderElectionLeaseDuration
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = DefaultLeaderElectionRenewDeadline
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = DefaultLeaderElectionRetryPeriod
	}
	return cfg
}

// validate checks the fields that need no file access. It reports every
// problem at once.
func (cfg Config) validate() error {
	var errs []error
	if err := validateHubs(cfg.Hub); err != nil {
		errs = append(errs, err)
	}
	switch cfg.Transport {
	case TransportAuto, TransportQUIC, TransportWebSocket:
	default:
		errs = append(errs, fmt.Errorf("transport %q: want %s, %s or %s", cfg.Transport, TransportAuto, TransportQUIC, TransportWebSocket))
	}
	if cfg.HubWebSocket != strings.Join(splitHubs(cfg.Hub), ",") {
		if err := validateHubs(cfg.HubWebSocket); err != nil {
			errs = append(errs, fmt.Errorf("WebSocket %w", err))
		}
	}
	if cfg.QUICFallbackAfter < 0 || cfg.QUICRetryInterval < 0 {
		errs = append(errs, fmt.Errorf("QUIC fallback after %v, retry every %v: must be positive", cfg.QUICFallbackAfter, cfg.QUICRetryInterval))
	}
	if cfg.ClusterName == "" {
		errs = append(errs, errors.New("cluster name is required"))
	} else if msgs := validation.IsDNS1123Subdomain(cfg.ClusterName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("cluster name %q is not a DNS-1123 subdomain: %s",
			cfg.ClusterName, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(cfg.SystemNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("system namespace %q is not a DNS-1123 label: %s",
			cfg.SystemNamespace, strings.Join(msgs, "; ")))
	}
	switch {
	case cfg.CertDir == "" && cfg.CertSecret == "":
		errs = append(errs, errors.New("a certificate directory or a certificate Secret is required"))
	case cfg.CertDir != "" && cfg.CertSecret != "":
		errs = append(errs, errors.New("a certificate directory and a certificate Secret: give one, not both"))
	case cfg.CertSecret != "":
		if msgs := validation.IsDNS1123Subdomain(cfg.CertSecret); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("certificate Secret name %q is not a DNS-1123 subdomain: %s", cfg.CertSecret, strings.Join(msgs, "; ")))
		}
	}
	if cfg.OwnerServiceAccount != "" {
		if msgs := validation.IsDNS1123Subdomain(cfg.OwnerServiceAccount); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("owner ServiceAccount name %q is not a DNS-1123 subdomain: %s", cfg.OwnerServiceAccount, strings.Join(msgs, "; ")))
		}
	}
	if cfg.BootstrapTokenSecret != "" {
		if msgs := validation.IsDNS1123Subdomain(cfg.BootstrapTokenSecret); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("bootstrap token Secret name %q is not a DNS-1123 subdomain: %s", cfg.BootstrapTokenSecret, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsConfigMapKey(cfg.BootstrapTokenSecretKey); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("bootstrap token Secret key %q: %s", cfg.BootstrapTokenSecretKey, strings.Join(msgs, "; ")))
		}
	}
	errs = append(errs, cfg.LeaderElection.validate()...)
	if cfg.LeaseDuration < time.Second || cfg.LeaseDuration > maxLeaseDuration {
		errs = append(errs, fmt.Errorf("lease duration %v must be between 1s and %v", cfg.LeaseDuration, maxLeaseDuration))
	}
	if cfg.StatusInterval < 0 {
		errs = append(errs, fmt.Errorf("status interval %v must be positive", cfg.StatusInterval))
	}
	if cfg.KubeQPS < 0 || cfg.KubeBurst < 0 {
		errs = append(errs, fmt.Errorf("member cluster request limits %v/s, burst %d: must be positive", cfg.KubeQPS, cfg.KubeBurst))
	}
	errs = append(errs, cfg.validateJoin()...)
	return errors.Join(errs...)
}

// validate checks the leader election settings as client-go wants them:
// LeaseDuration > RenewDeadline > 1.2 × RetryPeriod > 0.
func (le LeaderElection) validate() []error {
	if !le.Enabled {
		return nil
	}
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(le.LeaseName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("leader election lease name %q is not a DNS-1123 subdomain: %s", le.LeaseName, strings.Join(msgs, "; ")))
	}
	switch {
	case le.RetryPeriod <= 0:
		errs = append(errs, fmt.Errorf("leader election retry period %v must be positive", le.RetryPeriod))
	case le.RenewDeadline <= le.RetryPeriod*12/10:
		errs = append(errs, fmt.Errorf("leader election renew deadline %v must be longer than 1.2 × the retry period %v", le.RenewDeadline, le.RetryPeriod))
	case le.LeaseDuration <= le.RenewDeadline:
		errs = append(errs, fmt.Errorf("leader election lease duration %v must be longer than the renew deadline %v", le.LeaseDuration, le.RenewDeadline))
	}
	return errs
}

// validateHubs checks a comma-separated list of hub replica addresses.
func validateHubs(list string) error {
	addrs := splitHubs(list)
	if len(addrs) == 0 {
		return validateHub("")
	}
	var errs []error
	for _, a := range addrs {
		errs = append(errs, validateHub(a))
	}
	return errors.Join(errs...)
}

// validateHub checks that hub is host:port with both parts present.
func validateHub(hub string) error {
	if hub == "" {
		return errors.New("hub address is required")
	}
	host, port, err := net.SplitHostPort(hub)
	if err != nil {
		return fmt.Errorf("hub address %q: %w", hub, err)
	}
	if host == "" {
		return fmt.Errorf("hub address %q: host is empty, want HOST:PORT", hub)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("hub address %q: port %q is not a number in 1-65535", hub, port)
	}
	return nil
}

// leaseSeconds is the lease duration as whole seconds for Hello.
func (cfg Config) leaseSeconds() int32 {
	return int32(cfg.LeaseDuration / time.Second)
}
