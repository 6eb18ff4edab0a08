// Command flotilla-dashload measures the hub's dashboard under a large
// fleet: the server-sent event stream (snapshot size and time, delta rate,
// renewal → browser delivery delay) and, in headless Chromium, sign-in to
// every row drawn, the delay from an API change to the page's state, and
// the page's long main-thread tasks while renewals stream in. Run it against
// a hub with many agents, e.g. one started by flotilla-load (which prints
// the hub's kubeconfig and HTTP address); see docs/operations.md, "The dashboard".
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
)

// options are the command's flags.
type options struct {
	kubeconfig, httpAddr, chromium, screenshot string
	addClusters, cordons                       int
	stream, watch                              time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "flotilla-dashload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := pflag.NewFlagSet("flotilla-dashload", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the hub's admin kubeconfig (DATA/admin.kubeconfig; required)")
	fs.StringVar(&o.httpAddr, "http-addr", "", "the hub's --http-addr, HOST:PORT (required)")
	fs.IntVar(&o.addClusters, "add-clusters", 0, "Clusters without an agent to register first (they go Unknown after the startup grace)")
	fs.DurationVar(&o.stream, "stream", 30*time.Second, "how long to read the event stream for delivery delays (0 skips it)")
	fs.IntVar(&o.cordons, "cordons", 10, "clusters to cordon (or uncordon) through the API, timing each until the page shows it")
	fs.DurationVar(&o.watch, "watch", 30*time.Second, "how long to record the page's long tasks after the cordons")
	fs.StringVar(&o.chromium, "chromium", "/usr/bin/chromium", "Chromium binary (\"\" skips the browser measurements)")
	fs.StringVar(&o.screenshot, "screenshot", "", "PNG file for a screenshot of the fleet view at the end")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flotilla-dashload --kubeconfig FILE --http-addr HOST:PORT [flags]\n\n"+
			"Measures the dashboard of a running hub; figures go to stdout.\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.kubeconfig == "" || o.httpAddr == "" {
		fs.Usage()
		return errors.New("--kubeconfig and --http-addr are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 100
	hub, err := newHubClient(cfg, o.httpAddr)
	if err != nil {
		return err
	}
	if o.addClusters > 0 {
		if err := hub.addClusters(ctx, o.addClusters, stdout); err != nil {
			return err
		}
	}
	token, err := hub.adminToken(ctx)
	if err != nil {
		return err
	}
	if o.stream > 0 {
		if err := measureStream(ctx, hub, token, o.stream, stdout); err != nil {
			return fmt.Errorf("stream: %w", err)
		}
	}
	if o.chromium == "" {
		return nil
	}
	return measurePage(ctx, hub, token, o, stdout)
}
