// Command flotilla-agent runs in a member cluster: it dials the Flotilla hub
// over QUIC, renews the cluster's lease, reports the cluster's health and
// capacity, and applies the Works the hub sends. All of it lives in package
// agent; this file parses flags and wires signals and logging to it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/agent"
	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/agent/memberpolicy"
	"github.com/flotilla-io/flotilla/agent/work"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/internal/version"
	"github.com/flotilla-io/flotilla/protocol"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, level, err := parseFlags(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "flotilla-agent: %v\n", err)
		return 1
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	klog.SetSlogLogger(logger) // client-go logs through klog
	cfg.Logger = logger
	if err := agent.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "flotilla-agent: %v\n", err)
		return 1
	}
	return 0
}

// parseFlags turns the command line into an agent configuration and a log
// level. With --help it prints the usage to stdout and returns pflag.ErrHelp.
func parseFlags(args []string, stdout io.Writer) (agent.Config, slog.Level, error) {
	cfg := agent.Config{Version: version.Get().Flotilla}
	var o options
	fs := newFlags(&cfg, &o)
	fs.SetOutput(io.Discard) // errors are printed once, by run
	fs.Usage = func() { fmt.Fprint(stdout, usage(fs)) }

	if err := fs.Parse(args); err != nil {
		return cfg, 0, err // pflag has printed the usage for --help
	}
	if o.showVersion {
		fmt.Fprintln(stdout, version.Get())
		return cfg, 0, pflag.ErrHelp // nothing more to do
	}
	// Several agents on one host (tests, demos) cannot all have the
	// default address: only an address given explicitly must work.
	cfg.HTTPAddrOptional = !fs.Changed("http-addr")
	if fs.NArg() > 0 {
		return cfg, 0, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	missing := missingFlags(fs, "hub", "cluster-name")
	switch {
	case cfg.CertDir == "" && cfg.CertSecret == "":
		missing = append(missing, "--cert-dir or --cert-secret")
	case cfg.CertDir != "" && cfg.CertSecret != "":
		return cfg, 0, errors.New("--cert-dir and --cert-secret: give one, not both")
	}
	if len(missing) > 0 {
		return cfg, 0, fmt.Errorf("missing required flags: %s (see --help)", strings.Join(missing, ", "))
	}
	if err := joinFlags(&cfg, o.tokenFile, o.labels); err != nil {
		return cfg, 0, err
	}
	policy, err := memberPolicy(o.policy, cfg.SystemNamespace)
	if err != nil {
		return cfg, 0, err
	}
	cfg.MemberPolicy = policy
	if o.enableProfiling {
		if o.profilingAddr == "" {
			return cfg, 0, errors.New("--enable-profiling needs a --profiling-addr")
		}
		cfg.ProfilingAddr = o.profilingAddr
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return cfg, 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	return cfg, level, nil
}

// options are the agent's flags that do not go straight into agent.Config.
type options struct {
	tokenFile, labels, profilingAddr, logLevel string
	enableProfiling, showVersion               bool
	policy                                     memberpolicy.Settings
}

// newFlags returns the agent's flags, bound to cfg and o.
// (docs/reference/flags.md is generated from them.)
func newFlags(cfg *agent.Config, o *options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("flotilla-agent", pflag.ContinueOnError)
	fs.StringVar(&cfg.Hub, "hub", "", "the hub's QUIC address, HOST:PORT (UDP); HOST must match the hub's certificate. With several hub replicas, list each (comma-separated): a dial tries the last one that served first and the next ones 300ms apart, and keeps the first that answers; a HOST with several addresses is tried address by address the same way (IPv4 first, in the resolver's order), but only a list here makes the agent prefer the last replica and leave a silent one early")
	fs.StringVar(&cfg.Transport, "transport", agent.TransportAuto, "how to reach the hub: auto (QUIC; where QUIC gets no answer, e.g. UDP is blocked, a WebSocket over TLS on TCP, trying QUIC again every --quic-retry-interval), quic, or websocket (honours HTTPS_PROXY)")
	fs.StringVar(&cfg.HubWebSocket, "hub-websocket", "", "the hub's TCP address for the WebSocket, HOST:PORT, comma-separated for several replicas (default --hub's, on TCP)")
	fs.DurationVar(&cfg.QUICFallbackAfter, "quic-fallback-after", agent.DefaultQUICFallbackAfter, "with --transport=auto, how long a QUIC dial may go unanswered before the WebSocket is tried")
	fs.DurationVar(&cfg.QUICRetryInterval, "quic-retry-interval", agent.DefaultQUICRetryInterval, "with --transport=auto, how often a session on the WebSocket tries QUIC again (and moves to it once it connects)")
	fs.StringVar(&cfg.ClusterName, "cluster-name", "", "this member cluster's name (a DNS-1123 subdomain); tls.crt must be issued for it")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the member cluster; empty uses the in-cluster service account")
	fs.StringVar(&cfg.CertDir, "cert-dir", "", "directory holding ca.crt, tls.crt and tls.key (see below); a join writes them there (out of a cluster; or --cert-secret)")
	fs.StringVar(&cfg.CertSecret, "cert-secret", "", "Secret in --system-namespace of the member cluster holding ca.crt, tls.crt and tls.key as data keys; a join creates it, renewals update it (in a cluster; or --cert-dir)")
	fs.StringVar(&cfg.BootstrapToken, "bootstrap-token", "", "bootstrap token to join the hub with while --cert-dir or --cert-secret holds no certificate (see Joining below); other users can see it in the process list, so prefer --bootstrap-token-file")
	fs.StringVar(&o.tokenFile, "bootstrap-token-file", "", "file holding the bootstrap token, e.g. a mounted Secret (instead of --bootstrap-token); an empty file is no token (the agent empties its Secret after the join)")
	fs.StringVar(&cfg.BootstrapTokenSecret, "bootstrap-token-secret", "", "Secret in --system-namespace that holds the bootstrap token (the one --bootstrap-token-file mounts): once the join has stored the certificate, the agent empties the token there, so the member cluster keeps no copy (needs get and update on it)")
	fs.StringVar(&cfg.BootstrapTokenSecretKey, "bootstrap-token-secret-key", agent.DefaultBootstrapTokenSecretKey, "the token's key in --bootstrap-token-secret")
	fs.StringVar(&cfg.HubCAHash, "hub-ca-hash", "", "sha256:<hex> hash of the hub CA's public key: a joining agent trusts only a hub that presents this CA")
	fs.StringVar(&cfg.Provider, "cluster-provider", "", "deprecated, ignored by the hub: the hub registers the cluster with the provider of the token it joins with (flotilla token create --provider); accepted so older installs keep working, with a warning at the join")
	fs.StringVar(&cfg.Region, "cluster-region", "", "deprecated, ignored by the hub: the region comes from the token (flotilla token create --region); accepted with a warning at the join")
	fs.StringVar(&cfg.Zone, "cluster-zone", "", "deprecated, ignored by the hub: the zone comes from the token (flotilla token create --zone); accepted with a warning at the join")
	fs.StringVar(&o.labels, "cluster-labels", "", "labels the agent asks the hub to put on its Cluster when it joins, KEY=VALUE,KEY2=VALUE2: the hub takes only keys under "+protocol.AgentLabelPrefix+" (at most "+strconv.Itoa(protocol.MaxAgentLabels)+") and ignores the rest, which come from the token (flotilla token create --label)")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", agent.DefaultLeaseDuration, "cluster lease duration to ask the hub for (1s to 1h); the agent renews every quarter of it")
	fs.DurationVar(&cfg.StatusInterval, "status-interval", agent.DefaultStatusInterval, "how often to collect cluster health and capacity; a report goes to the hub when it changed, else every "+agent.UnchangedReportEvery.String())
	fs.StringVar(&cfg.SystemNamespace, "system-namespace", work.DefaultSystemNamespace,
		"namespace of the member cluster where the agent records the Works it applied (created if missing)")
	fs.StringVar(&cfg.OwnerServiceAccount, "owner-service-account", "", "ServiceAccount in --system-namespace (the Helm release's) that owns the objects the agent makes there for itself: the election Lease, --cert-secret and the Work records; deleting it (helm uninstall) has the garbage collector delete them (see Owner below). Empty: no owner")
	fs.Float32Var(&cfg.KubeQPS, "kube-api-qps", agent.DefaultKubeQPS, "requests per second to the member cluster's API server (each of the agent's three clients: typed, dynamic, and the node and pod watches)")
	fs.IntVar(&cfg.KubeBurst, "kube-api-burst", agent.DefaultKubeBurst, "burst of requests to the member cluster's API server")
	fs.BoolVar(&cfg.LeaderElection.Enabled, "leader-elect", false, "run as one of several replicas: only the leader of a Lease in --system-namespace runs the agent (see Leader election below)")
	fs.StringVar(&cfg.LeaderElection.LeaseName, "leader-elect-lease-name", agent.DefaultLeaderElectionLeaseName, "name of the coordination.k8s.io Lease of the leader election")
	fs.DurationVar(&cfg.LeaderElection.LeaseDuration, "leader-elect-lease-duration", agent.DefaultLeaderElectionLeaseDuration, "how long after the leader's last renewal a standby takes over")
	fs.DurationVar(&cfg.LeaderElection.RenewDeadline, "leader-elect-renew-deadline", agent.DefaultLeaderElectionRenewDeadline, "how long the leader tries to renew before it stops (shorter than the lease duration)")
	fs.DurationVar(&cfg.LeaderElection.RetryPeriod, "leader-elect-retry-period", agent.DefaultLeaderElectionRetryPeriod, "how often replicas try to acquire or renew the Lease")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", ":8080", `address of the plain HTTP endpoints /healthz, /readyz and /metrics (see below); "" turns them off; if the default is taken, the agent runs without them`)
	fs.BoolVar(&o.enableProfiling, "enable-profiling", false, "serve Go's profiling endpoints (/debug/pprof/) on --profiling-addr, and sample 1 in 100 mutex contentions for the mutex profile")
	fs.StringVar(&o.profilingAddr, "profiling-addr", "127.0.0.1:7082", "TCP address of the profiling endpoints, with --enable-profiling (keep it loopback and reach it with kubectl port-forward: profiles show what the agent holds)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	addPolicyFlags(fs, &o.policy)
	return fs
}

// joinFlags reads the bootstrap token file and checks the join flags and
// registration metadata, naming the flag at fault. It never prints a token.
func joinFlags(cfg *agent.Config, tokenFile, labels string) error {
	tokenFlag := "--bootstrap-token"
	if tokenFile != "" {
		if cfg.BootstrapToken != "" {
			return errors.New("--bootstrap-token and --bootstrap-token-file: give one, not both")
		}
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("--bootstrap-token-file: %w", err)
		}
		// Empty: the agent emptied it after its join.
		cfg.BootstrapToken = strings.TrimRightFunc(string(data), unicode.IsSpace)
		tokenFlag = "--bootstrap-token-file " + tokenFile
	}
	if cfg.BootstrapToken != "" {
		if err := agent.CheckBootstrapToken(cfg.BootstrapToken); err != nil {
			return fmt.Errorf("%s: %w", tokenFlag, err)
		}
		if cfg.HubCAHash == "" {
			return fmt.Errorf("%s needs --hub-ca-hash, the hash `flotilla token create` prints with the token", tokenFlag)
		}
	}
	if cfg.HubCAHash != "" {
		pin, err := pki.ParsePin(cfg.HubCAHash)
		if err != nil {
			return fmt.Errorf("--hub-ca-hash: %w", err)
		}
		cfg.HubCAHash = pin
	}
	for _, f := range []struct{ flag, value string }{
		{"--cluster-provider", cfg.Provider}, {"--cluster-region", cfg.Region}, {"--cluster-zone", cfg.Zone},
	} {
		if err := agent.CheckMetadataValue(f.value); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	var err error
	if cfg.Labels, err = agent.ParseLabels(labels); err != nil {
		return fmt.Errorf("--cluster-labels: %w", err)
	}
	return nil
}

// missingFlags lists the named flags that were not given a value.
func missingFlags(fs *pflag.FlagSet, names ...string) []string {
	var missing []string
	for _, name := range names {
		if fs.Lookup(name).Value.String() == "" {
			missing = append(missing, "--"+name)
		}
	}
	return missing
}

func usage(fs *pflag.FlagSet) string {
	return `Usage: flotilla-agent --hub HOST:PORT --cluster-name NAME (--cert-dir DIR | --cert-secret NAME) [flags]

flotilla-agent runs in a member cluster. It dials the Flotilla hub over QUIC
(the hub never connects to the cluster), renews the cluster's lease,
reports the cluster's API server health, nodes and capacity, and applies the
Works the hub sends with server-side apply, reporting their health. It never
touches an object it did not create. It reconnects with backoff when the
connection drops, and keeps applying and retrying meanwhile; SIGINT or
SIGTERM make it say goodbye to the hub and exit.

Flags:
` + fs.FlagUsages() + `
Files in --cert-dir (data keys of the Secret --cert-secret):
  ` + credstore.CAFile + `    PEM certificate of the CA that signed the hub's serving certificate
  ` + credstore.CertFile + `   PEM client certificate with CommonName "cluster:<cluster-name>",
            signed by the CA the hub trusts for agents
  ` + credstore.KeyFile + `   PEM private key of tls.crt
  While a renewal waits for the hub's answer, ` + credstore.NextKeyFile + ` holds the new key
  (and, in a directory, ` + credstore.NextCertFile + ` the new certificate for a moment): a
  restart finishes or abandons the renewal. The Secret (type Opaque, created
  by the first join) is updated with optimistic concurrency; the agent needs
  get, create and update on it (and patch, with --owner-service-account).

Joining:
  With all three items in --cert-dir (or --cert-secret) the agent starts
  its session at once. Otherwise, given a bootstrap token (--bootstrap-token
  or --bootstrap-token-file) and --hub-ca-hash, both printed by
  "flotilla token create", it joins first: it creates --cert-dir (mode
  0700) or the Secret if needed, makes a private key and stores it as
  tls.key (or keeps the one an earlier join left), dials the hub trusting
  it only if the hub presents the CA with that hash, and sends the token, a
  certificate request for "cluster:<cluster-name>" and the
  --cluster-labels under ` + protocol.AgentLabelPrefix + `. The hub registers the
  Cluster with the provider, region, zone and labels of the token (flotilla
  token create --provider/--region/--zone/--label), never with the agent's:
  it ignores --cluster-provider, --cluster-region, --cluster-zone and other
  labels, and records what it ignored as an event on the Cluster. Once the
  hub signs the request, the agent checks the
  certificate, stores ca.crt and tls.crt, and starts its session. While the
  request waits for an operator's approval (kubectl certificate approve),
  or the hub cannot be reached, it asks again with the same key, every 5 s
  to 1 min. A refused token or request, or a
  hub without that CA, stops it with the reason and a non-zero exit. After
  the join the token is not used again: the hub deletes a single-use token
  once it signed, and with --bootstrap-token-secret the agent empties the
  token in that Secret. A cluster name that has joined is refused to any
  other token unless it was made with "flotilla token create --cluster NAME
  --replace".

Transport (--transport):
  QUIC over UDP is preferred: lease renewals go as datagrams and never wait
  behind lost ones. Where UDP is blocked (QUIC gets no answer within
  --quic-fallback-after), auto dials the hub's WebSocket fallback instead:
  TLS on TCP (--hub-websocket, default --hub's port on TCP), through
  HTTPS_PROXY if set, the same streams multiplexed (yamux), renewals on the
  control stream. Reconnects go straight to the WebSocket for
  --quic-retry-interval; meanwhile the session tries QUIC every
  --quic-retry-interval and, once it connects, says GoAway and continues on
  QUIC at once (the lease does not lapse). Joining falls back the same way.

Leader election (--leader-elect):
  Several replicas may run with the same flags; they elect a leader on the
  coordination.k8s.io Lease --leader-elect-lease-name in --system-namespace
  (client-go leader election; identity: $POD_NAME or the host name, and a
  random suffix). Only the leader joins, holds the hub session, applies
  Works and renews the certificate; it reads the credentials when it is
  elected, so use --cert-secret. Standbys wait. A standby takes over
  --leader-elect-lease-duration after the leader's last renewal, or at its
  next try once a leader that stops on SIGTERM has closed its session and
  released the Lease. A leader that cannot renew for
  --leader-elect-renew-deadline closes its session and exits non-zero, to
  restart as a standby. The new leader applies nothing again: its Work
  records (ConfigMaps in --system-namespace) tell the hub what is applied.
  The agent needs get, create and update on the Lease.

Owner (--owner-service-account):
  The agent makes owner references to this ServiceAccount (blockOwnerDeletion
  false) on what it makes in --system-namespace for itself: the election
  Lease, the Secret --cert-secret and the Work records (ConfigMaps labelled
  ` + work.LabelWorkRecord + `). It adds the owner to such objects made without it
  (by an agent without the flag): to the Secret and the records when it
  starts, to the Lease at its next renewal. Deleting the ServiceAccount then
  has the member cluster's garbage collector delete them, the certificate
  with them: an agent installed again joins again, with a new token. What
  Works applied is never owned, and stays. The agent needs get on the
  ServiceAccount; while it cannot read it, it warns once, makes the objects
  without an owner, and reads it again every minute.

HTTP endpoints (--http-addr, plain HTTP, no authentication):
  /healthz  200 while the process serves; with --leader-elect, 500 once a
            leader has not renewed its Lease for the lease duration plus
            the renew deadline (it should have exited)
  /readyz   200 while the agent can do its job: running the agent (leader,
            or no --leader-elect), a hub session the hub welcomed is open;
            standing by, its last read of the Lease (every retry period)
            succeeded within the lease duration
  /metrics  Prometheus metrics: flotilla_agent_hub_connected,
            flotilla_agent_hub_session_starts_total,
            flotilla_agent_hub_session_ends_total{reason},
            flotilla_agent_lease_renewal_rtt_seconds,
            flotilla_agent_work_apply_duration_seconds,
            flotilla_agent_work_applies_total,
            flotilla_agent_work_apply_failures_total,
            flotilla_agent_fenced_works, flotilla_agent_leader,
            flotilla_agent_hub_transport{transport},
            flotilla_agent_transport_fallbacks_total,
            flotilla_agent_quic_probes_total{result},
            rest_client_request_duration_seconds{verb,host},
            rest_client_requests_total{code,method,host}, Go and process

Profiling (--enable-profiling): Go's /debug/pprof/ endpoints on
--profiling-addr only, never on --http-addr.
` + memberPolicyUsage
}
