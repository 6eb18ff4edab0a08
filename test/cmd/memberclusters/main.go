// Command memberclusters starts real member Kubernetes clusters for manual use
// and the demo, prints where their kubeconfigs are, and stops them cleanly on
// Ctrl-C (SIGINT) or SIGTERM.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/test/membercluster"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "memberclusters:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	flags := pflag.NewFlagSet("memberclusters", pflag.ContinueOnError)
	flags.SetOutput(stderr)
	count := flags.Int("count", 3, "number of member clusters, named member-1 ... member-N")
	dir := flags.String("dir", "", "folder for etcd data, kubeconfigs, certificates and logs (required; created if missing)")
	binDir := flags.String("bin-dir", "", "folder with the test binaries (default: $"+membercluster.BinDirEnv+" or the nearest .testbin)")
	nodes := flags.Int("nodes", membercluster.DefaultNodes, "fake nodes per cluster")
	nodeCPU := flags.String("node-cpu", membercluster.DefaultNodeCPU, "allocatable CPU per node")
	nodeMemory := flags.String("node-memory", membercluster.DefaultNodeMemory, "allocatable memory per node")
	nodePods := flags.String("node-pods", membercluster.DefaultNodePods, "allocatable pods per node")
	flags.Usage = func() {
		fmt.Fprintf(stderr, "Usage: memberclusters --dir DIR [--count N] [flags]\n\n"+
			"Starts N real member clusters (kube-apiserver, controller-manager, scheduler and KWOK\n"+
			"fake nodes, on one shared etcd), writes DIR/<name>/kubeconfig for each, and runs until\n"+
			"interrupted. Build the binaries first with `make testbin`.\n\nFlags:\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		flags.Usage()
		return fmt.Errorf("--dir is required")
	}
	if *count < 1 {
		return fmt.Errorf("--count %d: want at least 1", *count)
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(absDir, 0o755); err != nil {
		return err
	}
	specs := membercluster.Specs(*count)
	for i := range specs {
		specs[i].Nodes, specs[i].NodeCPU, specs[i].NodeMemory, specs[i].NodePods = *nodes, *nodeCPU, *nodeMemory, *nodePods
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	env, err := membercluster.Start(ctx, membercluster.Options{Dir: absDir, BinDir: *binDir, Clusters: specs, Logger: logger})
	if err != nil {
		return err
	}
	for _, c := range env.Clusters() {
		fmt.Fprintf(stdout, "%s\t%s\t%s\n", c.Name, c.Server, c.Kubeconfig)
	}
	fmt.Fprintf(stdout, "# %d member clusters running; logs in %s/<name>/. Ctrl-C stops them.\n", *count, absDir)
	<-ctx.Done()
	return env.Stop()
}
