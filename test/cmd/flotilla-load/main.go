// Command flotilla-load measures a hub under many agents: it starts a real
// flotilla-hub, connects N simulated agents over real QUIC (real client
// certificates, lease renewals, synthetic status, no member clusters),
// measures hub CPU, RSS, heartbeats/s and store writes/s, then stops a
// fraction of the agents at once and reports how exactly the hub detected
// it (time of Unknown minus last renewal plus grace period, p50/p99).
// With --restart-hub it restarts the hub under the whole fleet instead and
// measures the reconnect storm: how soon every agent is back, how often
// they dialled, and whether any cluster went Unknown.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/agent"
	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	hubca "github.com/flotilla-io/flotilla/hub/ca"
	hubstats "github.com/flotilla-io/flotilla/hub/stats"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/hubclient"
	"github.com/flotilla-io/flotilla/test/process"
)

type options struct {
	agents        int
	leaseDuration time.Duration
	grace         time.Duration
	startupGrace  time.Duration
	statusChange  time.Duration
	measure       time.Duration
	stopFraction  float64
	sockets       int
	parallel      int
	hubBin        string
	hubExtraArgs  []string
	hubEnv        []string
	dir           string
	restartHub    string
}

func main() {
	var o options
	flags := pflag.NewFlagSet("flotilla-load", pflag.ExitOnError)
	flags.IntVar(&o.agents, "agents", 1000, "number of simulated agents")
	flags.DurationVar(&o.leaseDuration, "lease-duration", 40*time.Second, "agents' lease duration; they renew every quarter of it")
	flags.DurationVar(&o.grace, "grace", 40*time.Second, "hub --cluster-monitor-grace-period")
	flags.DurationVar(&o.startupGrace, "startup-grace", 15*time.Minute, "hub --cluster-startup-grace-period: how long a cluster the tool registered waits for its agent's first renewal; keep it longer than the fleet takes to connect, or the clusters registered last all go Unknown at once while the rest connect")
	flags.DurationVar(&o.statusChange, "status-change", 0, "how often each agent's cluster status changes (a pod starts or ends), each change a Cluster write on the hub; 0: never, as in a steady fleet. Agents report a status when it changed, else every "+agent.UnchangedReportEvery.String()+" (10s makes every 10-second collection a change: the worst case)")
	flags.DurationVar(&o.measure, "measure", 30*time.Second, "length of the steady-state measurement window")
	flags.Float64Var(&o.stopFraction, "stop-fraction", 0.1, "fraction of agents stopped at once for the detection measurement")
	flags.IntVar(&o.sockets, "sockets", 0, "client UDP sockets the agents share (default: one per 250 agents)")
	flags.IntVar(&o.parallel, "parallel", 32, "handshakes in flight while connecting")
	flags.StringVar(&o.hubBin, "hub-bin", "", "flotilla-hub binary (default: built from this checkout)")
	flags.StringArrayVar(&o.hubEnv, "hub-env", nil, "one more KEY=VALUE in the hub's environment only (repeat it; e.g. --hub-env=GOMEMLIMIT=2GiB)")
	flags.StringArrayVar(&o.hubExtraArgs, "hub-arg", nil, "one more hub flag, after the tool's own (repeat it; e.g. --hub-arg=--enable-profiling to profile the hub on 127.0.0.1:7081)")
	flags.StringVar(&o.dir, "dir", "", "working folder for the hub's data and log (default: a temporary folder)")
	flags.StringVar(&o.restartHub, "restart-hub", "", `after the steady state, restart the hub under the fleet and measure the reconnect storm instead of the detection: "term" (SIGTERM, as an upgrade does) or "kill" (SIGKILL, a crash); the agents redial as real ones do`)
	_ = flags.Parse(os.Args[1:])
	if o.restartHub != "" && o.restartHub != "term" && o.restartHub != "kill" {
		fmt.Fprintf(os.Stderr, "flotilla-load: --restart-hub: %q is neither \"term\" nor \"kill\"\n", o.restartHub)
		os.Exit(2)
	}
	if o.stopFraction <= 0 || o.stopFraction > 1 {
		fmt.Fprintf(os.Stderr, "flotilla-load: --stop-fraction: %v is not in (0, 1]\n", o.stopFraction)
		os.Exit(2)
	}
	if o.sockets == 0 {
		o.sockets = max(1, o.agents/250)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-load:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o options) error {
	dir := o.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "flotilla-load-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if o.hubBin == "" {
		o.hubBin = filepath.Join(dir, "flotilla-hub")
		logf("building flotilla-hub")
		if out, err := exec.Command("go", "build", "-o", o.hubBin, "./cmd/flotilla-hub").CombinedOutput(); err != nil {
			return fmt.Errorf("build hub (run from the repository root): %v\n%s", err, out)
		}
	}
	dataDir := filepath.Join(dir, "data")
	ca, err := hubca.EnsureCA(dataDir)
	if err != nil {
		return err
	}
	agentCA, err := hubca.EnsureAgentCA(dataDir)
	if err != nil {
		return err
	}
	h, err := startHub(o, dir, dataDir)
	if err != nil {
		return err
	}
	defer h.proc.Stop()

	f, err := newFleet(h.quicAddr, ca, agentCA, o.agents, o.sockets, o.leaseDuration, o.statusChange)
	if err != nil {
		return err
	}
	defer f.close()
	regStarted := time.Now()
	if err := registerFleet(ctx, f, dataDir); err != nil {
		return fmt.Errorf("register the agents' clusters: %w", err)
	}
	logf("registered %d clusters (as certs issue does) in %v", o.agents, time.Since(regStarted).Round(time.Millisecond))
	started := time.Now()
	logf("connecting %d agents over %d sockets", o.agents, o.sockets)
	if err := f.connect(ctx, o.parallel, func(n int) { logf("  %d connected", n) }); err != nil {
		return fmt.Errorf("connect agents: %w", err)
	}
	logf("all %d agents connected in %v (%d failed handshakes tried again)", o.agents, time.Since(started).Round(time.Millisecond), f.handshakeRetries.Load())

	// Let the hub's restart grace (grace and one lease after its start)
	// pass and every agent renew a few times (the last ones to connect too).
	settle := max(time.Until(h.started.Add(o.grace+o.leaseDuration+o.leaseDuration/2)), o.leaseDuration)
	logf("settling for %v", settle.Round(time.Second))
	if err := sleepCtx(ctx, settle); err != nil {
		return err
	}
	steady, err := measureSteadyState(ctx, h, o.measure)
	if err != nil {
		return err
	}
	if o.restartHub != "" {
		// The detection is not measured after a restart: the new hub is
		// still storing the fleet's reconnects, and events wait behind
		// them, so their times would say more about that than about the
		// detection.
		restart, err := measureStorm(ctx, h, f, o.restartHub)
		if err != nil {
			return err
		}
		printReport(os.Stdout, o, steady, nil, f.errors.Load())
		restart.print(os.Stdout, len(f.agents))
		return nil
	}
	detection, err := measureDetection(ctx, h, f, o)
	if err != nil {
		return err
	}
	printReport(os.Stdout, o, steady, &detection, f.errors.Load())
	return nil
}

// hubProc is the hub under load.
type hubProc struct {
	proc               *process.Process
	quicAddr, httpAddr string
	dataDir            string
	started            time.Time
	api                *hubclient.Client
}

func startHub(o options, dir, dataDir string) (*hubProc, error) {
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
	h := &hubProc{quicAddr: "127.0.0.1:" + strconv.Itoa(quicPort), httpAddr: "127.0.0.1:" + strconv.Itoa(httpPort)}
	h.proc = &process.Process{
		Name: "flotilla-hub", Binary: o.hubBin, LogPath: filepath.Join(dir, "hub.log"),
		Env: append([]string{"QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true"}, o.hubEnv...),
		Args: []string{"--data-dir=" + dataDir, "--quic-addr=" + h.quicAddr, "--http-addr=" + h.httpAddr, "--api-addr=127.0.0.1:" + strconv.Itoa(apiPort),
			"--cluster-monitor-grace-period=" + o.grace.String(), "--cluster-startup-grace-period=" + o.startupGrace.String(),
			"--failover-eviction-timeout=1h", "--log-level=warn"},
	}
	h.proc.Args = append(h.proc.Args, o.hubExtraArgs...)
	h.dataDir = dataDir
	if err := h.start(); err != nil {
		return nil, err
	}
	return h, nil
}

// start starts the hub process (again: same flags, ports and data) and
// returns once it answers.
func (h *hubProc) start() error {
	dataDir := h.dataDir
	h.started = time.Now()
	if err := h.proc.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st hubstats.Stats
		api, err := hubclient.New(filepath.Join(dataDir, "admin.kubeconfig"), h.httpAddr)
		if err == nil {
			h.api = api
			if err := h.get("/debug/stats", &st); err == nil {
				logf("hub pid %d ready (log %s); dashboard http://%s/, kubeconfig %s (flotilla-dashload measures it)",
					h.proc.Pid(), h.proc.LogPath, h.httpAddr, filepath.Join(dataDir, "admin.kubeconfig"))
				return nil
			}
		}
		if h.proc.HasExited() || time.Now().After(deadline) {
			return fmt.Errorf("hub did not start: %v\n%s", h.proc.ExitError(), process.TailFile(h.proc.LogPath, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get decodes GET path into v (see hubclient.Client.Get).
func (h *hubProc) get(path string, v any) error {
	return h.api.Get(context.Background(), path, v)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// machine describes where the figures come from.
func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s, %d CPUs, %s/%s, %s", host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// registerFleet registers the fleet's clusters through the hub's API, as
// the hub (only it may record certificate serials).
func registerFleet(ctx context.Context, f *fleet, dataDir string) error {
	cfg, err := apiserver.AsHub(dataDir)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return f.register(ctx, client, 16)
}
