// Command flotilla-agentidle measures what an idle agent costs on a large
// member cluster: it starts a real member cluster with many KWOK nodes and
// pods, a real flotilla-hub, and then, one after the other, each agent
// binary it is given. For each it waits until the hub shows the cluster's
// whole capacity, lets it settle, and samples the agent's and the member
// kube-apiserver's CPU and RSS over a window, with the agent's requests to
// that API server by verb (from its /metrics). Windows without any agent,
// before and after, give the API server's own baseline. The machine's load
// average is printed with every window: other work on it skews the figures.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/test/membercluster"
)

type options struct {
	nodes, pods, parallel int
	window, settle, every time.Duration
	nodeStatus            time.Duration
	agents                []string // label=path or path
	hubBin, dir           string
}

func main() {
	var o options
	flags := pflag.NewFlagSet("flotilla-agentidle", pflag.ExitOnError)
	flags.IntVar(&o.nodes, "nodes", 1000, "KWOK nodes of the member cluster")
	flags.IntVar(&o.pods, "pods", 30000, "pods, bound to the nodes round-robin and left Running by KWOK")
	flags.IntVar(&o.parallel, "parallel", 16, "pod creations in flight")
	flags.DurationVar(&o.window, "window", 2*time.Minute, "length of each measurement window")
	flags.DurationVar(&o.settle, "settle", 30*time.Second, "wait after the agent shows the whole cluster (and after it stopped) before a window")
	flags.DurationVar(&o.nodeStatus, "node-status-period", 0, "how often, on average, KWOK rewrites each Ready node's status; 0 keeps KWOK's heartbeat stage (every 20-25 s); 5m is a kubelet that heartbeats through its node Lease (nodeStatusReportFrequency)")
	flags.DurationVar(&o.every, "sample", 5*time.Second, "RSS sampling period within a window")
	flags.StringArrayVar(&o.agents, "agent-bin", []string{"bin/flotilla-agent"}, "flotilla-agent binary to measure, as PATH or LABEL=PATH; repeat to compare builds on the same cluster")
	flags.StringVar(&o.hubBin, "hub-bin", "bin/flotilla-hub", "flotilla-hub binary")
	flags.StringVar(&o.dir, "dir", "", "working folder (default: a temporary folder, removed afterwards)")
	_ = flags.Parse(os.Args[1:])
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-agentidle:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-agentidle:", err)
		os.Exit(1)
	}
}

func (o *options) validate() error {
	switch {
	case o.nodes < 1:
		return fmt.Errorf("--nodes %d: want at least 1", o.nodes)
	case o.pods < 0:
		return fmt.Errorf("--pods %d: want 0 or more", o.pods)
	case o.parallel < 1:
		return fmt.Errorf("--parallel %d: want at least 1", o.parallel)
	case o.window < 10*time.Second:
		return fmt.Errorf("--window %v: want at least 10s", o.window)
	case o.every <= 0 || o.every > o.window:
		return fmt.Errorf("--sample %v: want a positive period within --window", o.every)
	case o.nodeStatus != 0 && o.nodeStatus < time.Second:
		return fmt.Errorf("--node-status-period %v: want 0 (KWOK's heartbeat) or at least 1s", o.nodeStatus)
	case o.settle < 0:
		return fmt.Errorf("--settle %v: want 0 or more", o.settle)
	}
	for _, a := range o.agents {
		if _, err := os.Stat(agentPath(a)); err != nil {
			return fmt.Errorf("--agent-bin %s: %w", a, err)
		}
	}
	if _, err := os.Stat(o.hubBin); err != nil {
		return fmt.Errorf("--hub-bin: %w", err)
	}
	return nil
}

// agentLabel and agentPath split a --agent-bin value.
func agentLabel(v string) string {
	if label, _, ok := strings.Cut(v, "="); ok {
		return label
	}
	return v
}

func agentPath(v string) string {
	if _, path, ok := strings.Cut(v, "="); ok {
		return path
	}
	return v
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o options) error {
	dir := o.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "flotilla-agentidle-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	spec := membercluster.ClusterSpec{Name: "member-1", Nodes: o.nodes, NodePods: fmt.Sprint(o.pods/o.nodes + 10)}
	logf("starting a member cluster with %d KWOK nodes", o.nodes)
	env, err := membercluster.Start(ctx, membercluster.Options{Dir: filepath.Join(dir, "clusters"),
		Clusters: []membercluster.ClusterSpec{spec}, NodeStatusPeriod: o.nodeStatus, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer env.Stop()
	cluster := env.Clusters()[0]
	if err := createPods(ctx, cluster, o); err != nil {
		return err
	}
	apiserver, err := apiserverPid(cluster)
	if err != nil {
		return err
	}
	h, err := startHub(ctx, o.hubBin, dir, cluster.Name)
	if err != nil {
		return err
	}
	defer h.stop()

	var results []result
	measureBaseline := func(label string) error {
		logf("%s: no agent, settling %v", label, o.settle)
		if !sleep(ctx, o.settle) {
			return ctx.Err()
		}
		r, err := measure(ctx, o, label, apiserver, nil)
		results = append(results, r)
		return err
	}
	if err := measureBaseline("no agent (before)"); err != nil {
		return err
	}
	for _, bin := range o.agents {
		r, err := measureAgent(ctx, o, h, cluster, apiserver, bin)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	if err := measureBaseline("no agent (after)"); err != nil {
		return err
	}
	heartbeat := "KWOK's heartbeat (20-25 s)"
	if o.nodeStatus > 0 {
		heartbeat = fmt.Sprintf("a status rewrite every %v", o.nodeStatus)
	}
	fmt.Printf("machine: %d CPUs, %s/%s, %s; member cluster: %d KWOK nodes (%s), %d pods; windows of %v\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), o.nodes, heartbeat, o.pods, o.window)
	printResults(os.Stdout, results)
	return nil
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
