// Command flotilla-demo runs the whole system on one machine: three real
// member clusters, the hub with its embedded store, one agent per cluster,
// the seed workload (nginx, 3 replicas divided 1:2 over member-1 and
// member-2) propagated to them, and a scripted failover you can watch —
// member-1's agent is killed, its cluster goes Unknown and is tainted, the
// nginx replicas move to member-2 once the toleration runs out, and when
// the agent comes back the old copy is deleted there; a WorkloadRebalancer
// then puts the replicas back 1:2. It opens with the dashboard's address and
// a token to sign in with, prints the cluster and binding tables as it goes
// and runs until Ctrl-C.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/process"
	"github.com/flotilla-io/flotilla/test/webapp"
)

type options struct {
	dir, binDir        string
	quicAddr, httpAddr string
	apiAddr            string
	kubeconfig         string // the hub's admin kubeconfig
	clusters           int
	grace, eviction    time.Duration
	toleration         time.Duration
	failCluster        string
	failAfter, outage  time.Duration
	every              time.Duration
	realNodes          string
}

func main() {
	var o options
	flags := pflag.NewFlagSet("flotilla-demo", pflag.ExitOnError)
	flags.StringVar(&o.dir, "dir", ".demo", "folder for the hub data, member clusters, certificates and logs")
	flags.StringVar(&o.binDir, "bin-dir", "bin", "folder with flotilla-hub, flotilla-agent and flotilla (make build)")
	flags.StringVar(&o.quicAddr, "quic-addr", "127.0.0.1:7443", "hub QUIC address")
	flags.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:7080", "hub HTTP address: the dashboard, /metrics, /readyz")
	flags.StringVar(&o.apiAddr, "api-addr", "127.0.0.1:6443", "hub Kubernetes API address (kubectl --kubeconfig DIR/hub/admin.kubeconfig)")
	flags.IntVar(&o.clusters, "clusters", 3, "member clusters")
	flags.DurationVar(&o.grace, "grace", 10*time.Second, "hub --cluster-monitor-grace-period (short, so the demo is quick to watch)")
	flags.DurationVar(&o.eviction, "eviction-timeout", 30*time.Second, "hub --failover-eviction-timeout")
	flags.DurationVar(&o.toleration, "toleration", 10*time.Second, "hub --default-unreachable/not-ready-toleration-seconds: how long workloads stay on a NoExecute cluster")
	flags.StringVar(&o.failCluster, "fail-cluster", "member-1", "the cluster whose agent is killed")
	flags.DurationVar(&o.failAfter, "fail-after", 20*time.Second, "when to kill that agent (0: never)")
	flags.DurationVar(&o.outage, "outage", 80*time.Second, "how long that agent stays down")
	flags.DurationVar(&o.every, "print-every", 5*time.Second, "how often to print the cluster table")
	flags.StringVar(&o.realNodes, "real-nodes", "auto", "give member-1 and member-2 a real node each (kubelet, containerd, kube-proxy; needs root and Debian's containerd, runc and containernetworking-plugins) running a web server that really fails over: auto (when the machine can), on or off")
	_ = flags.Parse(os.Args[1:])
	if !slices.Contains([]string{"auto", "on", "off"}, o.realNodes) {
		fmt.Fprintf(os.Stderr, "flotilla-demo: --real-nodes %q: want auto, on or off\n", o.realNodes)
		os.Exit(2)
	}
	if !slices.Contains(clusterNames(o.clusters), o.failCluster) {
		fmt.Fprintf(os.Stderr, "flotilla-demo: --fail-cluster %s: no such cluster (member-1 ... member-%d)\n", o.failCluster, o.clusters)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-demo:", err)
		os.Exit(1)
	}
}

// waitReady polls the hub until every cluster is Ready (a minute at most).
func waitReady(ctx context.Context, o options) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ready, err := readyClusters(ctx, o.kubeconfig)
		if err == nil && ready == o.clusters {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d Ready clusters (last: %d, %v): %w", o.clusters, ready, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func readyClusters(ctx context.Context, kubeconfig string) (int, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, err // not written yet: the hub is starting
	}
	client, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	list, err := client.FlotillaV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	ready := 0
	for i := range list.Items {
		if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, v1alpha1.ClusterConditionReady) {
			ready++
		}
	}
	return ready, nil
}

func clusterNames(n int) []string {
	var names []string
	for _, s := range membercluster.Specs(n) {
		names = append(names, s.Name)
	}
	return names
}

func say(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func run(ctx context.Context, o options) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	bin := func(name string) string { return filepath.Join(o.binDir, name) }
	for _, name := range []string{"flotilla-hub", "flotilla-agent", "flotilla"} {
		if _, err := os.Stat(bin(name)); err != nil {
			return fmt.Errorf("%w: run `make build` first", err)
		}
	}
	// A fresh demo each time: old clusters, data and certificates go.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	dataDir := filepath.Join(dir, "hub")
	o.kubeconfig = filepath.Join(dataDir, "admin.kubeconfig")
	hubProc := &process.Process{
		Name: "flotilla-hub", Binary: bin("flotilla-hub"), LogPath: filepath.Join(dir, "hub.log"),
		Args: []string{"--data-dir=" + dataDir, "--quic-addr=" + o.quicAddr, "--http-addr=" + o.httpAddr, "--api-addr=" + o.apiAddr, "--hub-id=demo-hub",
			"--cluster-monitor-grace-period=" + o.grace.String(), "--failover-eviction-timeout=" + o.eviction.String(),
			fmt.Sprintf("--default-unreachable-toleration-seconds=%d", int(o.toleration/time.Second)),
			fmt.Sprintf("--default-not-ready-toleration-seconds=%d", int(o.toleration/time.Second))},
		Env: []string{"QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true"},
	}
	say("starting the hub (QUIC %s, Kubernetes API https://%s, kubeconfig %s, grace %v, eviction timeout %v); log: %s", o.quicAddr, o.apiAddr, o.kubeconfig, o.grace, o.eviction, hubProc.LogPath)
	if err := hubProc.Start(); err != nil {
		return err
	}
	defer hubProc.Stop()
	// The dashboard first, so the clusters can be watched joining.
	token, err := dashboardToken(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	if err := announceDashboard(dir, o.httpAddr, token); err != nil {
		return err
	}

	real, err := useRealNodes(o.realNodes)
	if err != nil {
		return err
	}
	opts := membercluster.Options{
		Dir: filepath.Join(dir, "clusters"), Clusters: demoSpecs(o.clusters, real),
		Logger: slog.New(slog.NewTextHandler(os.Stdout, nil)),
	}
	say("starting %d member clusters (kube-apiserver, controller-manager, scheduler, KWOK) in %s", o.clusters, dir)
	if real {
		opts.Images = webTarball()
		say("%v also get a real node each (kubelet, containerd, kube-proxy), where the web server %s runs as real containers", realClusters, webapp.Image)
	}
	env, err := membercluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer env.Stop()
	members := map[string]kubernetes.Interface{}
	for _, c := range env.Clusters() {
		if c.RealNodes() == nil {
			continue
		}
		if members[c.Name], err = c.Clientset(); err != nil {
			return err
		}
	}

	agents := map[string]*process.Process{}
	for i, c := range env.Clusters() {
		join, err := createToken(ctx, bin("flotilla-hub"), dataDir, c.Name)
		if err != nil {
			return err
		}
		if i == 0 {
			say("bootstrap token for %s: flotilla-hub token create --data-dir %s --cluster %s --provider kwok printed\n%s", c.Name, dataDir, c.Name, join.output)
		}
		say("%s's agent joins with token %s... and the CA pin (no certificate issued beforehand)", c.Name, join.token[:6])
		certDir := filepath.Join(dir, "certs", c.Name)
		a := &process.Process{
			Name: "flotilla-agent/" + c.Name, Binary: bin("flotilla-agent"), LogPath: filepath.Join(dir, "agent-"+c.Name+".log"),
			Args: []string{"--hub=" + o.quicAddr, "--cluster-name=" + c.Name, "--kubeconfig=" + c.Kubeconfig, "--cert-dir=" + certDir, "--lease-duration=8s",
				"--bootstrap-token=" + join.token, "--hub-ca-hash=" + join.pin, "--http-addr="},
			Env: []string{"QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true"},
		}
		if err := a.Start(); err != nil {
			return err
		}
		defer a.Stop()
		agents[c.Name] = a
	}
	// A Divided binding is divided among the clusters there are when it
	// is scheduled, and stays so: let every cluster join first.
	say("waiting for the %d clusters to be Ready", o.clusters)
	if err := waitReady(ctx, o); err != nil {
		return err
	}
	seed, err := writeSeed(dir)
	if err != nil {
		return err
	}
	say("propagating the seed example: flotilla apply -f %s", seed)
	apply := exec.CommandContext(ctx, bin("flotilla"), "--kubeconfig", o.kubeconfig, "apply", "-f", seed)
	apply.Stdout, apply.Stderr = os.Stdout, os.Stderr
	if err := retry(ctx, apply); err != nil {
		return fmt.Errorf("apply the seed example: %w", err)
	}
	say("agents started; watch in the browser at http://%[5]s/ (token in %[6]s) or from another terminal with:\n"+
		"    export KUBECONFIG=%[2]s\n"+
		"    %[1]s get clusters -o wide\n"+
		"    %[1]s get bindings -o wide\n"+
		"    %[1]s describe binding nginx-deployment\n"+
		"    %[1]s get resources\n"+
		"    %[1]s describe cluster member-%[3]d\n"+
		"    .testbin/kubectl get clusters -w                  # the hub is a Kubernetes API server\n"+
		"    .testbin/kubectl --kubeconfig %[4]s get deployments -A   # a member cluster", bin("flotilla"), o.kubeconfig, o.clusters, env.Clusters()[0].Kubeconfig,
		o.httpAddr, filepath.Join(dir, "dashboard-token"))
	if real {
		if err := applyHello(ctx, dir, bin("flotilla"), o.kubeconfig); err != nil {
			return err
		}
		say("hello, the web server, runs as real containers on the real nodes of %v; each table below lists its pods and what they answer", realClusters)
	}
	return script(ctx, o, bin("flotilla"), agents[o.failCluster], members)
}

// rebalanceAfter is how long after the failed agent's return the demo
// rebalances nginx back.
const rebalanceAfter = 15 * time.Second

// script prints the cluster table regularly and plays the failure.
// members are the clusters with real nodes, whose hello pods it lists.
func script(ctx context.Context, o options, cli string, victim *process.Process, members map[string]kubernetes.Interface) error {
	start := time.Now()
	ticker := time.NewTicker(o.every)
	defer ticker.Stop()
	killed, restored, rebalanced := o.failAfter <= 0, o.failAfter <= 0, o.failAfter <= 0
	for {
		select {
		case <-ctx.Done():
			say("stopping (Ctrl-C)")
			return nil
		case <-ticker.C:
		}
		elapsed := time.Since(start)
		switch {
		case !killed && elapsed >= o.failAfter:
			say("killing the agent of %s (SIGKILL): its lease stops; Unknown and unreachable:NoSchedule after %v, NoExecute %v later; "+
				"%v after that its workloads are evicted and the replicas move (the old copy stays until the agent is back)",
				victim.Name[len("flotilla-agent/"):], o.grace, o.eviction, o.toleration)
			if err := victim.Kill(); err != nil {
				return err
			}
			killed = true
		case killed && !restored && elapsed >= o.failAfter+o.outage:
			say("starting the agent again: Ready, taints removed, the evicted copy deleted there; the placement stays where it moved")
			if err := victim.Start(); err != nil {
				return err
			}
			restored = true
		case restored && !rebalanced && elapsed >= o.failAfter+o.outage+rebalanceAfter:
			say("rebalancing: flotilla rebalance deployment/nginx -n default — a Fresh schedule puts the replicas back 1:2")
			rebalance := exec.CommandContext(ctx, cli, "--kubeconfig", o.kubeconfig, "rebalance", "deployment/nginx", "-n", "default")
			rebalance.Stdout, rebalance.Stderr = os.Stdout, os.Stderr
			if err := rebalance.Run(); err != nil {
				say("rebalance failed: %v", err)
			}
			rebalanced = true
		}
		fmt.Printf("\n--- %s (+%v)\n", time.Now().Format("15:04:05"), elapsed.Round(time.Second))
		for _, args := range [][]string{{"get", "clusters", "-o", "wide"}, {"get", "bindings", "-A", "-o", "wide"}} {
			table := exec.CommandContext(ctx, cli, append([]string{"--kubeconfig", o.kubeconfig}, args...)...)
			table.Stdout, table.Stderr = os.Stdout, io.Discard
			_ = table.Run()
		}
		if len(members) > 0 {
			printHello(ctx, os.Stdout, members)
		}
	}
}

// seedExample is the workload the demo propagates: Karmada's seed example.
const seedExample = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  namespace: default
  labels: {app: nginx}
spec:
  replicas: 3
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers:
        - name: nginx
          image: nginx:1.27
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
  namespace: default
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member-1, member-2]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - targetCluster: {clusterNames: [member-1]}
            weight: 1
          - targetCluster: {clusterNames: [member-2]}
            weight: 2
`

func writeSeed(dir string) (string, error) {
	path := filepath.Join(dir, "nginx.yaml")
	return path, os.WriteFile(path, []byte(seedExample), 0o644)
}

// retry runs cmd until it succeeds (the hub may still be starting).
// joinValues is what flotilla-hub token create printed.
type joinValues struct{ output, token, pin string }

var (
	tokenValue = regexp.MustCompile(`bootstrapToken=([a-z0-9]{6}\.[a-z0-9]{16})`)
	pinValue   = regexp.MustCompile(`hub\.caCertHash=(sha256:[0-9a-f]{64})`)
)

// createToken makes a bootstrap token for cluster with the hub's own
// command, retrying while the hub starts.
func createToken(ctx context.Context, hubBin, dataDir, cluster string) (joinValues, error) {
	var out []byte
	var err error
	for range 120 {
		out, err = exec.CommandContext(ctx, hubBin, "token", "create", "--data-dir", dataDir, "--cluster", cluster, "--ttl", "1h", "--provider", "kwok").CombinedOutput()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return joinValues{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err != nil {
		return joinValues{}, fmt.Errorf("flotilla-hub token create --cluster %s: %v\n%s", cluster, err, out)
	}
	token, pin := tokenValue.FindSubmatch(out), pinValue.FindSubmatch(out)
	if token == nil || pin == nil {
		return joinValues{}, fmt.Errorf("flotilla-hub token create printed no token or pin:\n%s", out)
	}
	return joinValues{output: string(out), token: string(token[1]), pin: string(pin[1])}, nil
}

func retry(ctx context.Context, cmd *exec.Cmd) error {
	var err error
	for range 60 {
		c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
		c.Stdout, c.Stderr = cmd.Stdout, io.Discard
		if err = c.Run(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}
