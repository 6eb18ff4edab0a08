// Command flotilla-propagation measures propagation end to end on real
// member clusters: the latency from `apply` to a Deployment Available in
// every cluster (as the hub sees it: the template's readyReplicas summed
// over clusters), and the throughput of many bindings at once — bindings
// scheduled per second, Works applied per second — with the hub's memory.
//
// With --failover it measures cluster failover instead of the latency:
// once the Deployments run 1:1:1, it kills member-1's agent and times the
// hub's evictions and the replacements becoming Available (failover.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/hubclient"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/process"
	"github.com/flotilla-io/flotilla/test/procstat"
)

type options struct {
	clusters, bindings, samples, batch int
	dir, binDir, hubLogLevel           string
	hubExtraArgs                       []string
	hubNice                            int
	tunedMembers                       bool
	kubeQPS                            float32
	writeCapacity                      time.Duration
	failover                           failoverOptions
}

// memberComponents says how the member clusters' own components ran.
func (o options) memberComponents() string {
	if o.tunedMembers {
		return "tuned (--tuned-members)"
	}
	return "Kubernetes' and KWOK's defaults"
}

func main() {
	var o options
	flags := pflag.NewFlagSet("flotilla-propagation", pflag.ExitOnError)
	flags.IntVar(&o.clusters, "clusters", 3, "member clusters (real API servers with KWOK nodes)")
	flags.IntVar(&o.bindings, "bindings", 1000, "Deployments applied at once for the throughput measurement (and failed over with --failover)")
	flags.IntVar(&o.samples, "samples", 20, "Deployments applied one by one for the latency measurement")
	flags.IntVar(&o.batch, "batch", 500, "templates per apply request in the throughput measurement")
	flags.StringVar(&o.dir, "dir", "", "working folder (default: a temporary folder, removed afterwards)")
	flags.StringVar(&o.binDir, "bin-dir", "bin", "folder with flotilla-hub and flotilla-agent (make build)")
	flags.Float32Var(&o.kubeQPS, "kube-api-qps", 50, "the agents' --kube-api-qps (burst is twice that)")
	flags.StringVar(&o.hubLogLevel, "hub-log-level", "warn", "the hub's --log-level (its log is hub.log in the working folder)")
	flags.BoolVar(&o.tunedMembers, "tuned-members", false, "raise the member clusters' own throughput (controller-manager and scheduler client rate limits 1,000/s, 25 deployment and replica set workers, KWOK moving 32 pods through their stages at once), so that they do not bound the time to replacement pods Available")
	flags.IntVar(&o.hubNice, "hub-nice", 0, "run the hub at this nice value (e.g. -10: the hub first when the member clusters, which share its cores here, want the same CPU; needs root)")
	flags.StringArrayVar(&o.hubExtraArgs, "hub-arg", nil, "one more hub flag, after the tool's own (repeat it; e.g. --hub-arg=--enable-profiling to profile the hub on 127.0.0.1:7081)")
	flags.DurationVar(&o.writeCapacity, "write-capacity", 20*time.Second, "after the run, replay its mix of API writes on the hub's API server for this long, as fast as it answers, on scratch objects, and print the most bindings (or evictions) a second those writes would allow and how close the run came (0: skip)")
	o.failover.addFlags(flags)
	_ = flags.Parse(os.Args[1:])
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-propagation:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-propagation:", err)
		os.Exit(1)
	}
}

func (o *options) validate() error {
	switch {
	case o.clusters < 1:
		return fmt.Errorf("--clusters %d: want at least 1", o.clusters)
	case o.bindings < 1:
		return fmt.Errorf("--bindings %d: want at least 1", o.bindings)
	case o.batch < 1:
		return fmt.Errorf("--batch %d: want at least 1", o.batch)
	case o.samples < 1 && !o.failover.enabled:
		return fmt.Errorf("--samples %d: want at least 1", o.samples)
	case o.writeCapacity < 0:
		return fmt.Errorf("--write-capacity %v: want 0 (skip) or a duration", o.writeCapacity)
	}
	if o.failover.enabled {
		o.samples = 0 // the failover run skips the latency samples
		return o.failover.validate(o.clusters)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o options) error {
	dir := o.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "flotilla-propagation-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	specs := membercluster.Specs(o.clusters)
	for i := range specs {
		specs[i].NodePods = "2000" // room for every replica of the throughput run
	}
	logf("starting %d member clusters", o.clusters)
	env, err := membercluster.Start(ctx, membercluster.Options{Dir: filepath.Join(dir, "clusters"), Clusters: specs,
		Tuned: o.tunedMembers, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer env.Stop()
	h, err := startFleet(ctx, o, dir, env, o.failover.hubArgs()...)
	if err != nil {
		return err
	}
	defer h.stopAll()

	names := make([]string, o.clusters)
	for i, c := range env.Clusters() {
		names[i] = c.Name
	}
	if o.failover.enabled {
		return runFailover(ctx, h, env, o, names)
	}
	if err := h.apply(ctx, []any{policy("latency", names), policy("throughput", names)}); err != nil {
		return err
	}
	latencies, err := measureLatency(ctx, h, o)
	if err != nil {
		return err
	}
	through, err := measureThroughput(ctx, h, o, "throughput", func(name string) map[string]any {
		return deployment(name, "throughput", len(h.agents))
	})
	if err != nil {
		return err
	}
	rss, peak, _ := procstat.Memory(h.hub.Pid())
	fmt.Printf("machine                     %d CPUs, %s/%s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Printf("member clusters             %d (3 KWOK nodes each), Deployments of 1 replica per cluster (Divided, equal weights)\n", o.clusters)
	fmt.Printf("member components           %s\n", o.memberComponents())
	fmt.Printf("apply → Available           p50 %v  p99 %v  max %v  (%d samples, one at a time)\n",
		pct(latencies, 0.5), pct(latencies, 0.99), latencies[len(latencies)-1], len(latencies))
	fmt.Printf("throughput                  %d bindings, %d Works\n", o.bindings, o.bindings*o.clusters)
	fmt.Printf("  bindings scheduled/s      %.0f (all scheduled %v after the first apply request)\n", float64(o.bindings)/through.scheduled.Seconds(), through.scheduled.Round(time.Millisecond))
	fmt.Printf("  Works applied/s           %.0f (all applied by agents %v after it)\n", float64(o.bindings*o.clusters)/through.applied.Seconds(), through.applied.Round(time.Millisecond))
	fmt.Printf("  all Available             %v after it\n", through.available.Round(time.Millisecond))
	fmt.Printf("hub RSS                     %.0f MiB (peak %.0f MiB) with %d bindings\n", rss, peak, o.bindings+o.samples)
	printWrites("the hub's API writes per binding, first apply request → all templates ready", through.writes.table(o.bindings, "binding"))
	if o.writeCapacity > 0 {
		logf("measuring the API server's write capacity for that mix for %v", o.writeCapacity)
		c := h.measureCapacity(ctx, through.writes, o.writeCapacity, names[0])
		perBinding := through.writes.perUnit(o.bindings)
		c.print(perBinding, "binding", rate{what: "first apply request → all Available", perSec: float64(o.bindings) / through.available.Seconds(),
			writesS: perBinding * float64(o.bindings) / through.available.Seconds()})
	}
	return nil
}

func pct(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(p*float64(len(sorted)-1))].Round(time.Millisecond)
}

// policy propagates the Deployments labelled bench=NAME, one replica per
// cluster.
func policy(name string, clusters []string) map[string]any {
	return map[string]any{
		"apiVersion": "flotilla.io/v1alpha1", "kind": "PropagationPolicy",
		"metadata": map[string]any{"name": name, "namespace": "bench"},
		"spec": map[string]any{
			"resourceSelectors": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"bench": name}}}},
			"placement": map[string]any{
				"clusterAffinity":   map[string]any{"clusterNames": clusters},
				"replicaScheduling": map[string]any{"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"},
			},
		},
	}
}

func deployment(name, group string, replicas int) map[string]any {
	labels := map[string]any{"app": name}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "bench", "labels": map[string]any{"bench": group}},
		"spec": map[string]any{
			"replicas": replicas, "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1"}}}},
		},
	}
}

// measureLatency applies Deployments one at a time and times each until
// the hub reports all its replicas ready.
func measureLatency(ctx context.Context, h *fleetProcs, o options) ([]time.Duration, error) {
	var out []time.Duration
	for i := range o.samples {
		name := fmt.Sprintf("latency-%d", i)
		start := time.Now()
		if err := h.apply(ctx, []any{deployment(name, "latency", len(h.agents))}); err != nil {
			return nil, err
		}
		if err := h.await(ctx, 60*time.Second, name+" ready", func() (bool, error) {
			ready, err := h.readyReplicas(name)
			return ready == len(h.agents), err
		}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	logf("latency: %d samples, p50 %v", len(out), pct(out, 0.5))
	return out, nil
}

type throughput struct {
	scheduled, applied, available time.Duration
	// writes are the hub's API writes from the first apply request until
	// every template is ready.
	writes writePhase
}

// measureThroughput applies many Deployments at once (made by template,
// labelled bench=group, one replica per cluster) and times when every
// binding is scheduled, every Work applied and every template ready; it
// counts the hub's API writes over the same span.
func measureThroughput(ctx context.Context, h *fleetProcs, o options, group string, template func(name string) map[string]any) (throughput, error) {
	var t throughput
	// Counted from watches: listing thousands of objects every 20 ms
	// would cost the hub more than what is measured.
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	m, err := startMirror(watchCtx, h.api.Dynamic())
	if err != nil {
		return t, err
	}
	h.snapshotWrites(ctx, &t.writes, &t.writes.before)
	start := time.Now()
	for from := 0; from < o.bindings; from += o.batch {
		var items []any
		for i := from; i < min(from+o.batch, o.bindings); i++ {
			items = append(items, template(fmt.Sprintf("app-%05d", i)))
		}
		if err := h.apply(ctx, items); err != nil {
			return t, fmt.Errorf("apply Deployments %d–%d: %w", from, from+len(items)-1, err)
		}
	}
	logf("applied %d Deployments in %v", o.bindings, time.Since(start).Round(time.Millisecond))
	wantWorks := o.bindings * len(h.agents)
	for _, step := range []struct {
		what string
		into *time.Duration
		done func() (bool, error)
	}{
		{"bindings scheduled", &t.scheduled, func() (bool, error) { return m.scheduled() >= o.bindings+o.samples, nil }},
		{"Works applied", &t.applied, func() (bool, error) { return m.applied() >= wantWorks+o.samples*len(h.agents), nil }},
		{"templates ready", &t.available, func() (bool, error) { return m.ready(group, int64(len(h.agents))) >= o.bindings, nil }},
	} {
		if err := h.await(ctx, 30*time.Minute, step.what, step.done); err != nil {
			return t, err
		}
		*step.into = time.Since(start)
		logf("%s after %v", step.what, step.into.Round(time.Millisecond))
	}
	h.snapshotWrites(ctx, &t.writes, &t.writes.after)
	return t, nil
}

// fleetProcs is the hub and the agents.
type fleetProcs struct {
	hub      *process.Process
	started  time.Time // when the hub was started
	agents   []*process.Process
	httpAddr string
	// api reaches the hub's Kubernetes API as admin, once it is up.
	api *hubclient.Client
}

func startFleet(ctx context.Context, o options, dir string, env *membercluster.Environment, hubArgs ...string) (*fleetProcs, error) {
	quicPort, err := freeport.UDP()
	if err != nil {
		return nil, err
	}
	httpPort, err := freeport.TCP()
	if err != nil {
		return nil, err
	}
	apiPort, err := freeport.TCP()
	if err != nil {
		return nil, err
	}
	quicAddr := "127.0.0.1:" + strconv.Itoa(quicPort)
	f := &fleetProcs{httpAddr: "127.0.0.1:" + strconv.Itoa(httpPort)}
	dataDir := filepath.Join(dir, "hub")
	env0 := []string{"QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true"}
	hubBinary := filepath.Join(o.binDir, "flotilla-hub")
	f.hub = &process.Process{Name: "flotilla-hub", Binary: hubBinary, LogPath: filepath.Join(dir, "hub.log"), Env: env0,
		Args: append([]string{"--data-dir=" + dataDir, "--quic-addr=" + quicAddr, "--http-addr=" + f.httpAddr, "--api-addr=127.0.0.1:" + strconv.Itoa(apiPort), "--log-level=" + o.hubLogLevel}, append(hubArgs, o.hubExtraArgs...)...)}
	if o.hubNice != 0 {
		// nice execs the hub: same pid, and every thread it starts
		// inherits the value (Linux sets it per thread).
		f.hub.Args = append([]string{"-n", strconv.Itoa(o.hubNice), hubBinary}, f.hub.Args...)
		f.hub.Binary = "nice"
	}
	f.started = time.Now()
	if err := f.hub.Start(); err != nil {
		return nil, err
	}
	for _, c := range env.Clusters() {
		certDir := filepath.Join(dir, "certs", c.Name)
		issue := exec.CommandContext(ctx, hubBinary, "certs", "issue", "--data-dir", dataDir, "--cluster", c.Name, "--out", certDir)
		if out, err := issue.CombinedOutput(); err != nil {
			f.stopAll()
			return nil, fmt.Errorf("certs issue %s: %v\n%s", c.Name, err, out)
		}
		a := &process.Process{Name: "flotilla-agent/" + c.Name, Binary: filepath.Join(o.binDir, "flotilla-agent"), Env: env0,
			LogPath: filepath.Join(dir, "agent-"+c.Name+".log"),
			Args: []string{"--hub=" + quicAddr, "--cluster-name=" + c.Name, "--kubeconfig=" + c.Kubeconfig, "--cert-dir=" + certDir, "--log-level=warn",
				fmt.Sprintf("--kube-api-qps=%g", o.kubeQPS), fmt.Sprintf("--kube-api-burst=%d", int(2*o.kubeQPS))}}
		if err := a.Start(); err != nil {
			f.stopAll()
			return nil, err
		}
		f.agents = append(f.agents, a)
	}
	err = f.await(ctx, time.Minute, "the hub's API", func() (bool, error) {
		api, err := hubclient.New(filepath.Join(dataDir, "admin.kubeconfig"), f.httpAddr)
		if err != nil {
			return false, nil // not written yet
		}
		f.api = api
		return true, nil
	})
	if err == nil {
		err = f.await(ctx, time.Minute, "every cluster Ready", func() (bool, error) {
			var list struct {
				Items []struct {
					Status struct {
						Conditions []struct{ Type, Status string }
					}
				}
			}
			if err := f.get("/apis/flotilla.io/v1alpha1/clusters", &list); err != nil {
				return false, nil // the hub may still be starting
			}
			ready := 0
			for _, c := range list.Items {
				for _, cond := range c.Status.Conditions {
					if cond.Type == "Ready" && cond.Status == "True" {
						ready++
					}
				}
			}
			return ready == len(f.agents), nil
		})
	}
	if err != nil {
		f.stopAll()
		return nil, err
	}
	logf("hub pid %d and %d agents ready", f.hub.Pid(), len(f.agents))
	return f, nil
}

func (f *fleetProcs) stopAll() {
	for _, a := range f.agents {
		_ = a.Stop()
	}
	_ = f.hub.Stop()
}

func (f *fleetProcs) apply(ctx context.Context, items []any) error {
	return f.api.Apply(ctx, items)
}

// get decodes GET path into v (see hubclient.Client.Get).
func (f *fleetProcs) get(path string, v any) error {
	if f.api == nil {
		return errors.New("the hub's API is not up yet")
	}
	return f.api.Get(context.Background(), path, v)
}

// await polls done every 20 ms (the processes run on their own clocks).
func (f *fleetProcs) await(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (f *fleetProcs) readyReplicas(name string) (int, error) {
	var d struct {
		Status struct {
			ReadyReplicas int `json:"readyReplicas"`
		} `json:"status"`
	}
	if err := f.get("/apis/apps/v1/namespaces/bench/deployments/"+name, &d); err != nil {
		return 0, nil // not created yet
	}
	return d.Status.ReadyReplicas, nil
}
