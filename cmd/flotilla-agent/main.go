// Command flotilla-agent runs in a member cluster: it dials the Flotilla hub
// over QUIC, renews the cluster's lease, reports the cluster's health and
// capacity, and applies the Works the hub sends. All of it lives in package
// agent; this file parses flags and wires signals and logging to it.
package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/flotilla-io/flotilla/internal/version"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/agent"
	"github.com/flotilla-io/flotilla/agent/work"
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
	fs := pflag.NewFlagSet("flotilla-agent", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, by run
	fs.StringVar(&cfg.Hub, "hub", "", "the hub's QUIC address, HOST:PORT (UDP); HOST must match the hub's certificate")
	fs.StringVar(&cfg.ClusterName, "cluster-name", "", "this member cluster's name (a DNS-1123 subdomain); tls.crt must be issued for it")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the member cluster; empty uses the in-cluster service account")
	fs.StringVar(&cfg.CertDir, "cert-dir", "", "directory holding ca.crt, tls.crt and tls.key (see below)")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", agent.DefaultLeaseDuration, "cluster lease duration to ask the hub for (1s to 1h)")
	fs.DurationVar(&cfg.StatusInterval, "status-interval", agent.DefaultStatusInterval, "how often to report cluster health and capacity")
	fs.StringVar(&cfg.SystemNamespace, "system-namespace", work.DefaultSystemNamespace,
		"namespace of the member cluster where the agent records the Works it applied (created if missing)")
	fs.Float32Var(&cfg.KubeQPS, "kube-api-qps", agent.DefaultKubeQPS, "requests per second to the member cluster's API server (each of the agent's two clients)")
	fs.IntVar(&cfg.KubeBurst, "kube-api-burst", agent.DefaultKubeBurst, "burst of requests to the member cluster's API server")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { fmt.Fprint(stdout, usage(fs)) }

	if err := fs.Parse(args); err != nil {
		return cfg, 0, err // pflag has printed the usage for --help
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Get())
		return cfg, 0, pflag.ErrHelp // nothing more to do
	}
	if fs.NArg() > 0 {
		return cfg, 0, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if missing := missingFlags(fs, "hub", "cluster-name", "cert-dir"); len(missing) > 0 {
		return cfg, 0, fmt.Errorf("missing required flags: %s (see --help)", strings.Join(missing, ", "))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return cfg, 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	return cfg, level, nil
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
	return `Usage: flotilla-agent --hub HOST:PORT --cluster-name NAME --cert-dir DIR [flags]

flotilla-agent runs in a member cluster. It dials the Flotilla hub over QUIC
(the hub never connects to the cluster), renews the cluster's lease,
reports the cluster's API server health, nodes and capacity, and applies the
Works the hub sends with server-side apply, reporting their health. It never
touches an object it did not create. It reconnects with backoff when the
connection drops, and keeps applying and retrying meanwhile; SIGINT or
SIGTERM make it say goodbye to the hub and exit.

Flags:
` + fs.FlagUsages() + `
Files in --cert-dir:
  ` + agent.CAFile + `    PEM certificate of the CA that signed the hub's serving certificate
  ` + agent.CertFile + `   PEM client certificate with CommonName "cluster:<cluster-name>",
            signed by the CA the hub trusts for agents
  ` + agent.KeyFile + `   PEM private key of tls.crt
`
}
