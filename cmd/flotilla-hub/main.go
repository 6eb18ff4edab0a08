// Command flotilla-hub runs Flotilla's control plane: the store (embedded
// etcd by default), the QUIC endpoint agents dial, cluster health and taints,
// and the HTTP API. `flotilla-hub certs issue` writes an agent certificate;
// `flotilla-hub token create|list|delete` manages bootstrap tokens;
// `flotilla-hub kubeconfig` prints the admin kubeconfig.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/hub"
	"github.com/flotilla-io/flotilla/hub/agentserver"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/hub/join"
	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/internal/version"
	"github.com/flotilla-io/flotilla/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code)) // the command printed why
		}
		fmt.Fprintln(os.Stderr, "flotilla-hub:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) >= 2 && args[0] == "certs" && args[1] == "issue" {
		return issueCerts(ctx, args[2:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "token" {
		return tokenCommand(ctx, args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "kubeconfig" {
		return kubeconfigCommand(args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "certs" {
		return fmt.Errorf("unknown command %q: the only certs command is `certs issue`", args)
	}
	return serve(ctx, args, stdout, stderr)
}

// serveOptions are serve's flags that do not go straight into hub.Config.
type serveOptions struct {
	enableProfiling, leaderElect, showVersion bool
	profilingAddr, logLevel                   string
	notReadySeconds, unreachableSeconds       int64
	failover                                  failover.Config
	// oldSecondaryRate is --secondary-eviction-rate, refused: its unit
	// (bindings per second) is gone.
	oldSecondaryRate float64
}

// addEvictionRateFlags adds the flags of partition protection's rates.
// Zones admit failed clusters, not bindings, since the hub evicts every
// binding of an admitted cluster at once; the flags that counted bindings
// either keep that meaning as a ceiling (--resource-eviction-rate, and
// --eviction-rate, deprecated) or are refused with the name to use
// (--secondary-eviction-rate), so that no upgrade changes a rate's unit
// silently.
func addEvictionRateFlags(flags *pflag.FlagSet, fo *failover.Config, oldSecondaryRate *float64) {
	flags.Float64Var(&fo.Zones.ClusterRate, "cluster-eviction-rate", fo.Zones.ClusterRate,
		"failed clusters per second per zone admitted to eviction, as Kubernetes' --node-eviction-rate admits nodes: a zone's first failed cluster at once, the next 1/rate seconds later, earliest failure first; "+
			"every workload on an admitted cluster then leaves as fast as the API allows (see --resource-eviction-rate). 0 halts evictions, except in zones partially disrupted, which keep --secondary-cluster-eviction-rate")
	flags.Float64Var(&fo.Zones.SecondaryClusterRate, "secondary-cluster-eviction-rate", fo.Zones.SecondaryClusterRate,
		"failed clusters per second admitted to eviction in a zone where --unhealthy-zone-threshold of the clusters are not Ready (zones of more than --large-zone-threshold clusters; smaller ones evict nothing; 0 halts evictions there too); Kubernetes' --secondary-node-eviction-rate")
	flags.Float64Var(&fo.Zones.BindingRate, "resource-eviction-rate", 0,
		"a ceiling on the bindings evicted per second per zone from clusters admitted to eviction; unset: no ceiling. Karmada's flag, whose rate is the only limit there and counts bindings of the whole fleet; "+
			"before zones admitted clusters it was Flotilla's eviction rate, where 0 halted evictions: 0 is refused now (to halt, give --cluster-eviction-rate=0)")
	flags.Float64Var(&fo.Zones.BindingRate, "eviction-rate", 0, "the former name of --resource-eviction-rate")
	_ = flags.MarkDeprecated("eviction-rate", "it is a ceiling on bindings evicted per second per zone now: use --resource-eviction-rate, or leave it out so that a failed cluster's workloads move as fast as the API allows (zones admit failed clusters at --cluster-eviction-rate)")
	flags.Float64Var(oldSecondaryRate, "secondary-eviction-rate", 0, "refused: it was bindings per second; use --secondary-cluster-eviction-rate")
	_ = flags.MarkHidden("secondary-eviction-rate")
}

// newFlags returns serve's flags, bound to cfg and o; hostname is the
// default of --hub-id. (docs/reference/flags.md is generated from them.)
func newFlags(cfg *hub.Config, o *serveOptions, hostname string) *pflag.FlagSet {
	defaults := health.DefaultConfig(time.Time{})
	flags := pflag.NewFlagSet("flotilla-hub", pflag.ContinueOnError)
	flags.StringVar(&cfg.DataDir, "data-dir", "flotilla-data", "folder for the embedded etcd (etcd/), the hub CA and keys (pki/), the ServiceAccount signing key (apiserver/), admin.kubeconfig and audit.log")
	flags.StringSliceVar(&cfg.EtcdEndpoints, "etcd-endpoints", nil, "external etcd endpoints (comma-separated) instead of the embedded etcd")
	flags.StringVar(&cfg.EtcdCAFile, "etcd-cafile", "", "CA bundle that verifies the external etcd's servers")
	flags.StringVar(&cfg.EtcdCertFile, "etcd-certfile", "", "client certificate for the external etcd")
	flags.StringVar(&cfg.EtcdKeyFile, "etcd-keyfile", "", "client key for the external etcd")
	flags.StringVar(&cfg.APIAddr, "api-addr", "0.0.0.0:6443", "HTTPS address of the hub's Kubernetes API (kubectl and flotilla use DATA/admin.kubeconfig)")
	flags.StringVar(&cfg.AuditLogPath, "audit-log-path", "", "audit log of the Kubernetes API, one JSON event per line, rotated at 100 MiB with 5 files kept (default DATA/audit.log; \"-\" is stdout; \"none\" turns it off)")
	flags.StringVar(&cfg.AuditPolicyFile, "audit-policy-file", "", "audit policy replacing the default one (every write with its user, at Metadata level; reads and the hub's own lease and status writes are not recorded)")
	flags.StringArrayVar(&cfg.KubeAPIServerArgs, "kube-apiserver-arg", nil, "flag passed to the embedded kube-apiserver as is, e.g. --kube-apiserver-arg=--oidc-issuer-url=https://issuer.example.com (repeatable; wins over the hub's own settings)")
	flags.StringVar(&cfg.QUICAddr, "quic-addr", ":7443", "UDP address agents dial (QUIC, ALPN flotilla/1)")
	flags.StringVar(&cfg.AgentAddress, "agent-address", "", "HOST:PORT agents reach --quic-addr at, printed in join commands (flotilla token create); HOST must be in the serving certificate (see --tls-san) (default this host's name, or --quic-addr's IP if it names one, and the bound port)")
	flags.StringVar(&cfg.WebSocketAddr, "websocket-addr", "", `TCP address of the WebSocket fallback (TLS, path /flotilla/v1/agent) for agents whose UDP is blocked; "off" turns it off (default --quic-addr's port on TCP, if free)`)
	flags.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:7080", "TCP address of the dashboard, /livez, /readyz (?verbose lists each check), /healthz and /metrics")
	flags.BoolVar(&cfg.HTTPTLS, "http-tls", false, "serve --http-addr over HTTPS, with a certificate of the hub CA (DATA/pki/ca.crt) for the names of the QUIC certificate (--tls-san); set it whenever --http-addr is not loopback, since dashboard tokens travel with every request")
	flags.BoolVar(&o.enableProfiling, "enable-profiling", false, "serve Go's profiling endpoints (/debug/pprof/) on --profiling-addr, and sample 1 in 100 mutex contentions for the mutex profile")
	flags.StringVar(&o.profilingAddr, "profiling-addr", "127.0.0.1:7081", "TCP address of the profiling endpoints, with --enable-profiling (keep it loopback: profiles show what the hub holds)")
	flags.DurationVar(&cfg.Health.GracePeriod, "cluster-monitor-grace-period", defaults.GracePeriod, "time without a lease renewal before a cluster's Ready goes Unknown")
	flags.DurationVar(&cfg.Health.StartupGracePeriod, "cluster-startup-grace-period", defaults.StartupGracePeriod, "time a registered cluster that never renewed gets before it goes Unknown")
	flags.DurationVar(&cfg.Health.EvictionTimeout, "failover-eviction-timeout", defaults.EvictionTimeout, "time not Ready before the NoSchedule health taint is joined by NoExecute")
	flags.BoolVar(&cfg.Health.NoExecuteTaints, "health-no-execute-taints", defaults.NoExecuteTaints, "add the not-ready and unreachable NoExecute taints to a cluster not Ready for --failover-eviction-timeout, so its workloads fail over (Flotilla's default); false adds only the NoSchedule health taints and leaves NoExecute to ClusterTaintPolicies, as Karmada 1.14 and later do: without such a policy nothing is evicted from a cluster that is not Ready")
	flags.DurationVar(&cfg.Health.FailureThreshold, "cluster-failure-threshold", defaults.FailureThreshold, "time the agent must report its API server unhealthy before Ready goes False")
	flags.DurationVar(&cfg.Health.SuccessThreshold, "cluster-success-threshold", defaults.SuccessThreshold, "time the agent must report it healthy again before Ready goes back to True")
	flags.DurationVar(&cfg.Health.DefaultLeaseDuration, "default-lease-duration", defaults.DefaultLeaseDuration, "lease duration for agents that do not propose one")
	flags.DurationVar(&cfg.FlushInterval, "store-flush-interval", time.Second, "how often changed clusters and events are written to the store in batches")
	flags.DurationVar(&cfg.LeaseFlushInterval, "lease-flush-interval", 10*time.Second, "how often renewed leases are written to the store in batches: each lease at most once per interval, whatever the heartbeat rate")
	flags.DurationVar(&cfg.EventTTL, "event-ttl", time.Hour, "how long events are kept (the API server's --event-ttl)")
	flags.Float64Var(&cfg.LeaseWritesPerSecond, "lease-writes-per-second", 100, "most writes per second of the cluster registry to the API server (0: no limit): leases get what Cluster writes leave (at least a tenth); with more clusters than this times --lease-flush-interval, each stored lease is refreshed less often (health changes are never held back, and health is decided in memory)")
	flags.IntVar(&cfg.Handshakes.Max, "max-handshakes", agentserver.DefaultMaxHandshakes, "agents' handshakes the hub carries at once, QUIC and the WebSocket fallback's TLS together; beyond it a QUIC connection is refused at its first packet and the agent dials again in 1-3 s, a TCP connection waits to be accepted (after a restart the whole fleet dials at once: handshakes beyond what the cores finish would all be slow and time out; 1 to 100000)")
	flags.IntVar(&cfg.Handshakes.RetryThreshold, "quic-retry-threshold", agentserver.DefaultRetryThreshold, "handshakes in flight (QUIC and TLS) from which a new QUIC connection must prove its source address first: the hub answers its first packet with a Retry (one round trip more), which spoofed packets never answer, so they hold at most this many handshake places (1 to 100000)")
	flags.IntVar(&cfg.Handshakes.PerSource, "max-handshakes-per-source", agentserver.DefaultMaxHandshakesPerSource, "QUIC handshakes in flight from one source address (an IPv6 /64) once it proved itself with a Retry; beyond it the agent is refused and dials again in 1-3 s; a source not validated gets a Retry beyond it (1 to 100000)")
	flags.DurationVar(&cfg.QUICHandshakeTimeout, "quic-handshake-timeout", agentserver.DefaultHandshakeTimeout, "a QUIC handshake silent this long is dropped, and one takes at most twice this in all: what a peer that never completes its handshake holds a place for (100ms to 1m)")
	flags.DurationVar(&cfg.WebSocketLimits.ReadHeaderTimeout, "tcp-read-header-timeout", netlimit.DefaultReadHeaderTimeout, "on --websocket-addr and --http-addr: time for a TLS handshake, and then for each request's headers; a connection that sends nothing is closed after it")
	flags.DurationVar(&cfg.WebSocketLimits.IdleTimeout, "tcp-idle-timeout", netlimit.DefaultIdleTimeout, "on --websocket-addr and --http-addr: how long a keep-alive connection may wait for its next request before the hub closes it")
	flags.IntVar(&cfg.WebSocketLimits.MaxConns, "websocket-max-conns", agentserver.DefaultWebSocketMaxConns, "connections the WebSocket fallback holds at once before their upgrade (after it, the agent's session is bounded by the agents); beyond it new ones wait in the kernel's accept queue (1 to 1000000)")
	flags.IntVar(&cfg.WebSocketLimits.MaxConnsPerSource, "websocket-max-conns-per-source", agentserver.DefaultWebSocketMaxConnsPerSource, "connections of one source address (an IPv6 /64) the WebSocket fallback holds at once before their upgrade; beyond it one is closed as soon as accepted (1 to 1000000)")
	flags.IntVar(&cfg.HTTPLimits.MaxConns, "http-max-conns", hub.DefaultHTTPMaxConns, "connections --http-addr holds at once; beyond it new ones wait in the kernel's accept queue (1 to 1000000)")
	flags.IntVar(&cfg.HTTPLimits.MaxConnsPerSource, "http-max-conns-per-source", hub.DefaultHTTPMaxConnsPerSource, "connections of one source address (an IPv6 /64) --http-addr holds at once; beyond it one is closed as soon as accepted (1 to 1000000)")
	flags.IntVar(&cfg.ControllerWorkers, "controller-workers", hub.DefaultControllerWorkers, "bindings (and Works, templates...) each controller reconciles at once: each waits for its writes to the API server, so more workers help when those answers are slow and cores are free (1 to 256)")
	flags.IntVar(&cfg.ReportWriteSlots, "report-write-slots", hub.DefaultReportWriteSlots, "writes of reported status (agents' Work status, bindings' aggregated status, templates' status) the hub has in flight at once: when the API server is busy, reports wait in the hub (each object's latest) and evictions, placements and Works go first (1 to 256)")
	flags.Int64Var(&cfg.Store.Quota, "store-quota-bytes", store.DefaultQuota, "etcd's backend quota: set on the embedded etcd; with --etcd-endpoints, give the external etcd's --quota-backend-bytes")
	flags.Float64Var(&cfg.Store.AgentThreshold, "store-agent-write-threshold", store.DefaultAgentThreshold, "fraction of --store-quota-bytes in use above which what agents drive (Work status reports, events about agents) is no longer stored, so health changes always have room (stored again below 80 % of it)")
	flags.DurationVar(&cfg.Store.Interval, "store-check-interval", 10*time.Second, "how often the hub checks etcd's size and alarms (and defragments or disarms NOSPACE when that helps)")
	flags.DurationVar(&cfg.MaxClockSkew, "max-clock-skew", 2*time.Second, "agent clock skew beyond which condition ClockSynced goes False")
	flags.StringVar(&cfg.HubID, "hub-id", hostname, "name of this hub replica, shown in status.agent.connectedTo; at most 200 characters with --gossip-join")
	flags.BoolVar(&o.leaderElect, "leader-elect", false, "replicas sharing an external etcd elect one (Lease kube-system/flotilla-hub in the hub's API) that runs the controllers and the health decisions; the others serve the API and stand by. With --gossip-join every replica serves agents and relays them to the leader; without, only the leader does and a standby's /readyz fails (default true with --etcd-endpoints)")
	flags.BoolVar(&cfg.LabelLeaderPod, "label-leader-pod", false, "in Kubernetes: while leading, label this pod flotilla.io/hub-leader=true (POD_NAMESPACE and POD_NAME from the downward API; the pod's ServiceAccount may patch it), so the agents' Service selects the leader; a standby's /readyz then passes, so a StatefulSet can roll it")
	flags.DurationVar(&cfg.LeaderElection.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before it takes over")
	flags.DurationVar(&cfg.LeaderElection.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops leading (and exits, to restart as a standby); less than the lease duration and more than 1.2 times the retry period")
	flags.DurationVar(&cfg.LeaderElection.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often the leader renews and standbys try to take over")
	flags.StringSliceVar(&cfg.Gossip.Join, "gossip-join", nil, "with leader election: the other replicas' gossip addresses, HOST:PORT (a name may resolve to all of them, e.g. a headless Service). The replicas form a memberlist group; every replica serves agents and relays their renewals and status to the leader every 100 ms (a replica silent for 2.5 s is lost: its clusters that were renewing get a grace to reconnect); the leader sends the others its agent sessions and last renewals every --gossip-interval, so the replica taking over after it dies gives the restart grace only to clusters whose agents were renewing and detects the others on time. Empty: no gossip")
	flags.StringVar(&cfg.Gossip.Addr, "gossip-addr", "0.0.0.0:7946", "with --gossip-join: HOST:PORT this replica gossips on (TCP and UDP)")
	flags.StringVar(&cfg.Gossip.AdvertiseAddr, "gossip-advertise-addr", "", "with --gossip-join: HOST:PORT the other replicas reach this one at (default: --gossip-addr, or with 0.0.0.0 this machine's private address)")
	flags.DurationVar(&cfg.Gossip.Interval, "gossip-interval", time.Second, "with --gossip-join: how often the leader sends its agent sessions to the other replicas (100ms up to --leader-elect-lease-duration)")
	flags.DurationVar(&cfg.AgentCertTTL, "agent-cert-ttl", 90*24*time.Hour, "lifetime of the certificates agents get when they join, at least 1m (agents renew at 80 %)")
	flags.StringVar(&cfg.AgentCSRApproval, "agent-csr-approval", join.ApprovalAuto, "how joining agents' certificate requests are approved: auto (when their bootstrap token is valid for the cluster) or manual (kubectl certificate approve)")
	flags.StringSliceVar(&cfg.TLSSANs, "tls-san", nil, "extra DNS names or IPs for the hub's QUIC, API and (--http-tls) HTTP serving certificates (localhost, 127.0.0.1 and the hostname are always included)")
	o.failover = failover.DefaultConfig()
	fo := &o.failover
	flags.Int64Var(&o.notReadySeconds, "default-not-ready-toleration-seconds", int64(fo.DefaultNotReadyToleration/time.Second),
		"how long workloads of a placement without its own NoExecute toleration of cluster.flotilla.io/not-ready stay on such a cluster")
	flags.Int64Var(&o.unreachableSeconds, "default-unreachable-toleration-seconds", int64(fo.DefaultUnreachableToleration/time.Second),
		"how long workloads of a placement without its own NoExecute toleration of cluster.flotilla.io/unreachable stay on such a cluster")
	flags.DurationVar(&fo.GracefulEvictionTimeout, "graceful-eviction-timeout", fo.GracefulEvictionTimeout,
		"how long an evicted cluster keeps its copy when the replacement is scheduled but not healthy yet (tasks without their own grace period)")
	addEvictionRateFlags(flags, fo, &o.oldSecondaryRate)
	flags.IntVar(&fo.Zones.LargeZoneThreshold, "large-zone-threshold", fo.Zones.LargeZoneThreshold,
		"zones with more clusters than this keep admitting failed clusters at --secondary-cluster-eviction-rate when partially disrupted (Kubernetes' --large-cluster-size-threshold)")
	flags.Float64Var(&fo.Zones.UnhealthyThreshold, "unhealthy-zone-threshold", fo.Zones.UnhealthyThreshold,
		"fraction of a zone's clusters not Ready (and more than 2) at which the zone is partially disrupted and slows to the secondary rate (Kubernetes' --unhealthy-zone-threshold)")
	flags.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	flags.BoolVar(&o.showVersion, "version", false, "print the version (and the Kubernetes release the hub embeds) and exit")
	return flags
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	hostname, _ := os.Hostname()
	var cfg hub.Config
	var o serveOptions
	flags := newFlags(&cfg, &o, hostname)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flotilla-hub [flags]\n"+
			"       flotilla-hub token create|list|delete [--data-dir DIR] ...   bootstrap tokens for joining agents\n"+
			"       flotilla-hub kubeconfig [--data-dir DIR] [--server URL]      print the admin kubeconfig\n"+
			"       flotilla-hub certs issue --data-dir DIR --cluster NAME --out DIR   offline agent certificate\n\n"+
			"Runs the Flotilla hub: agents dial --quic-addr over QUIC (or, where their UDP is blocked,\n"+
			"--websocket-addr over TLS on TCP), join with a bootstrap token\n"+
			"(flotilla-hub token create prints the helm command) and then use the certificate the hub\n"+
			"signed for them. The hub serves a Kubernetes API (an embedded kube-apiserver) on --api-addr,\n"+
			"with an admin kubeconfig in DATA/admin.kubeconfig, which kubectl and flotilla use;\n"+
			"--http-addr serves the dashboard, /livez, /readyz and /metrics; --enable-profiling serves\n"+
			"/debug/pprof/ on --profiling-addr. Go's memory limit is 90 %% of the container's (cgroup)\n"+
			"memory limit unless GOMEMLIMIT or AUTOMEMLIMIT (off, or a ratio) is set.\n\nFlags:\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if o.showVersion {
		fmt.Fprintln(stdout, version.Get())
		return nil
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", flags.Args())
	}
	if o.enableProfiling {
		if o.profilingAddr == "" {
			return errors.New("--enable-profiling needs a --profiling-addr")
		}
		cfg.ProfilingAddr = o.profilingAddr
	}
	if err := checkEvictionRateFlags(flags); err != nil {
		return err
	}
	if err := setFailover(&cfg, o.failover, o.notReadySeconds, o.unreachableSeconds); err != nil {
		return err
	}
	if err := validateDurations(cfg); err != nil {
		return err
	}
	if err := setConnLimits(&cfg); err != nil {
		return err
	}
	cfg.LeaderElection.Enabled = o.leaderElect || (!flags.Changed("leader-elect") && len(cfg.EtcdEndpoints) > 0)
	if err := validateLeaderElection(cfg.LeaderElection); err != nil {
		return err
	}
	if err := validateGossip(&cfg); err != nil {
		return err
	}
	if err := setAPIServer(&cfg); err != nil {
		return err
	}
	logger, err := newLogger(stderr, o.logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	setMemoryLimit(logger, memlimit.FromCgroup)
	return hub.Run(ctx, cfg, nil)
}

func validateDurations(cfg hub.Config) error {
	for name, d := range map[string]time.Duration{
		"--cluster-monitor-grace-period": cfg.Health.GracePeriod,
		"--cluster-startup-grace-period": cfg.Health.StartupGracePeriod,
		"--default-lease-duration":       cfg.Health.DefaultLeaseDuration,
		"--store-flush-interval":         cfg.FlushInterval,
		"--lease-flush-interval":         cfg.LeaseFlushInterval,
		"--event-ttl":                    cfg.EventTTL,
	} {
		if d <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", name, d)
		}
	}
	for name, d := range map[string]time.Duration{
		"--failover-eviction-timeout": cfg.Health.EvictionTimeout,
		"--cluster-failure-threshold": cfg.Health.FailureThreshold,
		"--cluster-success-threshold": cfg.Health.SuccessThreshold,
		"--max-clock-skew":            cfg.MaxClockSkew,
	} {
		if d < 0 {
			return fmt.Errorf("%s %v: want zero or a positive duration", name, d)
		}
	}
	return nil
}

// setConnLimits checks the limits on what peers not authenticated yet
// may hold, and gives the HTTP server the TCP timeouts too.
func setConnLimits(cfg *hub.Config) error {
	cfg.HTTPLimits.ReadHeaderTimeout = cfg.WebSocketLimits.ReadHeaderTimeout
	cfg.HTTPLimits.IdleTimeout = cfg.WebSocketLimits.IdleTimeout
	for _, c := range []struct {
		name     string
		n, limit int
	}{
		{"--max-handshakes", cfg.Handshakes.Max, 100000},
		{"--quic-retry-threshold", cfg.Handshakes.RetryThreshold, 100000},
		{"--max-handshakes-per-source", cfg.Handshakes.PerSource, 100000},
		{"--websocket-max-conns", cfg.WebSocketLimits.MaxConns, 1000000},
		{"--websocket-max-conns-per-source", cfg.WebSocketLimits.MaxConnsPerSource, 1000000},
		{"--http-max-conns", cfg.HTTPLimits.MaxConns, 1000000},
		{"--http-max-conns-per-source", cfg.HTTPLimits.MaxConnsPerSource, 1000000},
	} {
		if c.n < 1 || c.n > c.limit {
			return fmt.Errorf("%s %d: want 1 to %d", c.name, c.n, c.limit)
		}
	}
	if d := cfg.QUICHandshakeTimeout; d < 100*time.Millisecond || d > time.Minute {
		return fmt.Errorf("--quic-handshake-timeout %v: want 100ms to 1m", d)
	}
	for name, d := range map[string]time.Duration{"--tcp-read-header-timeout": cfg.WebSocketLimits.ReadHeaderTimeout, "--tcp-idle-timeout": cfg.WebSocketLimits.IdleTimeout} {
		if d <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", name, d)
		}
	}
	return nil
}

// setAPIServer checks the API server flags and fills in their defaults.
func setAPIServer(cfg *hub.Config) error {
	switch cfg.AuditLogPath {
	case "":
		cfg.AuditLogPath = filepath.Join(cfg.DataDir, "audit.log")
	case "none":
		cfg.AuditLogPath = ""
	}
	switch {
	case cfg.Store.Quota <= 0:
		return fmt.Errorf("--store-quota-bytes %d: want a positive number of bytes", cfg.Store.Quota)
	case cfg.Store.AgentThreshold <= 0 || cfg.Store.AgentThreshold > 1:
		return fmt.Errorf("--store-agent-write-threshold %v: want a fraction of the quota in (0, 1]", cfg.Store.AgentThreshold)
	case cfg.Store.Interval <= 0:
		return fmt.Errorf("--store-check-interval %v: want a positive duration", cfg.Store.Interval)
	}
	if cfg.WebSocketAddr != "" && cfg.WebSocketAddr != agentserver.WebSocketOff {
		if _, _, err := net.SplitHostPort(cfg.WebSocketAddr); err != nil {
			return fmt.Errorf("--websocket-addr %q: want HOST:PORT, :PORT or off: %w", cfg.WebSocketAddr, err)
		}
	}
	if cfg.ControllerWorkers < 1 || cfg.ControllerWorkers > 256 {
		return fmt.Errorf("--controller-workers %d: want 1 to 256", cfg.ControllerWorkers)
	}
	if cfg.ReportWriteSlots < 1 || cfg.ReportWriteSlots > 256 {
		return fmt.Errorf("--report-write-slots %d: want 1 to 256", cfg.ReportWriteSlots)
	}
	if cfg.LeaseWritesPerSecond < 0 {
		return fmt.Errorf("--lease-writes-per-second %v: want zero (no limit) or a positive rate", cfg.LeaseWritesPerSecond)
	}
	for _, arg := range cfg.KubeAPIServerArgs {
		if !strings.HasPrefix(arg, "--") {
			return fmt.Errorf("--kube-apiserver-arg %q: want a flag such as --oidc-issuer-url=URL", arg)
		}
	}
	if cfg.AgentCSRApproval != join.ApprovalAuto && cfg.AgentCSRApproval != join.ApprovalManual {
		return fmt.Errorf("--agent-csr-approval %q: want %s or %s", cfg.AgentCSRApproval, join.ApprovalAuto, join.ApprovalManual)
	}
	// Short lifetimes are for tests of rotation (agents renew at 80 %).
	if cfg.AgentCertTTL < time.Minute {
		return fmt.Errorf("--agent-cert-ttl %v: want at least 1m", cfg.AgentCertTTL)
	}
	if len(cfg.EtcdEndpoints) == 0 && (cfg.EtcdCAFile != "" || cfg.EtcdCertFile != "" || cfg.EtcdKeyFile != "") {
		return errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-endpoints (the embedded etcd listens on a unix socket only)")
	}
	return nil
}

// validateLeaderElection checks what client-go's elector would refuse,
// naming the flags.
func validateLeaderElection(le hub.LeaderElection) error {
	if !le.Enabled {
		return nil
	}
	switch {
	case le.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period %v: want a positive duration", le.RetryPeriod)
	case le.RenewDeadline <= time.Duration(1.2*float64(le.RetryPeriod)):
		return fmt.Errorf("--leader-elect-renew-deadline %v: want more than 1.2 × --leader-elect-retry-period (%v)", le.RenewDeadline, le.RetryPeriod)
	case le.LeaseDuration <= le.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration %v: want more than --leader-elect-renew-deadline (%v)", le.LeaseDuration, le.RenewDeadline)
	}
	return nil
}

// maxGossipHubID leaves room for the election identity's suffix within the
// 253 bytes a session table allows for a name.
const maxGossipHubID = 200

// validateGossip checks the gossip flags; without --gossip-join the
// replica does not gossip.
func validateGossip(cfg *hub.Config) error {
	g := &cfg.Gossip
	if len(g.Join) == 0 {
		g.Addr = ""
		return nil
	}
	switch {
	case !cfg.LeaderElection.Enabled:
		return errors.New("--gossip-join needs leader election (--leader-elect, or --etcd-endpoints): only replicas gossip")
	case g.Interval < 100*time.Millisecond || g.Interval > cfg.LeaderElection.LeaseDuration:
		return fmt.Errorf("--gossip-interval %v: want 100ms to --leader-elect-lease-duration (%v): the standbys must hear of the leader's sessions well before they take over", g.Interval, cfg.LeaderElection.LeaseDuration)
	case len(cfg.HubID) > maxGossipHubID:
		return fmt.Errorf("--hub-id %q: at most %d characters with gossip (it names the replica in its session tables)", cfg.HubID, maxGossipHubID)
	}
	if _, _, err := net.SplitHostPort(g.Addr); err != nil {
		return fmt.Errorf("--gossip-addr %q: want HOST:PORT: %w", g.Addr, err)
	}
	if g.AdvertiseAddr != "" {
		host, _, err := net.SplitHostPort(g.AdvertiseAddr)
		switch {
		case err != nil:
			return fmt.Errorf("--gossip-advertise-addr %q: want HOST:PORT: %w", g.AdvertiseAddr, err)
		case net.ParseIP(host) == nil:
			return fmt.Errorf("--gossip-advertise-addr %q: want an IP address and a port (the other replicas dial it as it is)", g.AdvertiseAddr)
		}
	}
	for _, addr := range g.Join {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("--gossip-join %q: want HOST:PORT: %w", addr, err)
		}
	}
	return nil
}

// checkEvictionRateFlags refuses the rate flags whose meaning changed
// when given in a way that would now do something else.
func checkEvictionRateFlags(flags *pflag.FlagSet) error {
	if flags.Changed("eviction-rate") && flags.Changed("resource-eviction-rate") {
		return errors.New("--eviction-rate and --resource-eviction-rate (its new name) are the same setting: give one")
	}
	if flags.Changed("secondary-eviction-rate") {
		return errors.New("--secondary-eviction-rate: no longer supported: it counted bindings per second, and zones now admit failed clusters to eviction; " +
			"give --secondary-cluster-eviction-rate (clusters per second, default 0.01) instead")
	}
	for _, name := range []string{"resource-eviction-rate", "eviction-rate"} {
		if f := flags.Lookup(name); f.Changed && f.Value.String() == "0" {
			return fmt.Errorf("--%s 0: no longer halts evictions: it is a ceiling on bindings per second now and 0 would mean none; "+
				"to halt evictions give --cluster-eviction-rate=0, for no ceiling leave the flag out", name)
		}
	}
	return nil
}

// setFailover checks the failover flags and puts them in cfg.
func setFailover(cfg *hub.Config, fo failover.Config, notReadySeconds, unreachableSeconds int64) error {
	for name, n := range map[string]int64{
		"--default-not-ready-toleration-seconds":   notReadySeconds,
		"--default-unreachable-toleration-seconds": unreachableSeconds,
	} {
		if n < 0 {
			return fmt.Errorf("%s %d: want zero or more seconds", name, n)
		}
	}
	fo.DefaultNotReadyToleration, fo.DefaultUnreachableToleration = time.Duration(notReadySeconds)*time.Second, time.Duration(unreachableSeconds)*time.Second
	switch z := fo.Zones; {
	case fo.GracefulEvictionTimeout < 0:
		return fmt.Errorf("--graceful-eviction-timeout %v: want zero or a positive duration", fo.GracefulEvictionTimeout)
	case z.ClusterRate < 0:
		return fmt.Errorf("--cluster-eviction-rate %v: want zero (no evictions) or a positive number of clusters per second", z.ClusterRate)
	case z.SecondaryClusterRate < 0:
		return fmt.Errorf("--secondary-cluster-eviction-rate %v: want zero (no evictions) or a positive number of clusters per second", z.SecondaryClusterRate)
	case z.BindingRate < 0:
		return fmt.Errorf("--resource-eviction-rate %v: want a positive number of bindings per second, or no flag for no ceiling", z.BindingRate)
	case z.LargeZoneThreshold < 0:
		return fmt.Errorf("--large-zone-threshold %d: want zero or more clusters", z.LargeZoneThreshold)
	case z.UnhealthyThreshold <= 0 || z.UnhealthyThreshold > 1:
		return fmt.Errorf("--unhealthy-zone-threshold %v: want a fraction in (0, 1]", z.UnhealthyThreshold)
	}
	cfg.Failover = fo
	return nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
