package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/netbed"
	"github.com/flotilla-io/flotilla/test/process"
)

// Behind NAT: the hub runs in the bed's cloud namespace and has no route
// to the edge; each member cluster's agent runs in an edge site behind
// the bed's masquerading router and joins with a bootstrap token. The
// member clusters' API servers stay on the host's loopback (they are big,
// and test/membercluster runs them there); each edge site gets its member
// API server's port on its own loopback through a forward, so the agent
// uses the cluster's kubeconfig unchanged and reaches nothing else of the
// host. The test reaches the hub's API and HTTP the same way, from the host.

// natHubQUIC is the hub's agent address in the bed's cloud.
var natHubQUIC = netip.AddrPortFrom(netbed.CloudAddr, 7443)

// startNATHub runs a hub with test timings in the bed's cloud namespace.
func startNATHub(t *testing.T, bed *netbed.Bed, extraFlags ...string) *hub {
	t.Helper()
	dir := t.TempDir()
	h := &hub{
		dataDir:  filepath.Join(dir, "data"),
		quicAddr: natHubQUIC.String(),
		httpAddr: "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP)),
		apiAddr:  "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP)),
	}
	for _, addr := range []string{h.httpAddr, h.apiAddr} {
		if _, err := bed.Forward(nil, addr, bed.Cloud, addr); err != nil {
			t.Fatal(err)
		}
	}
	runHub(t, h, dir, bed.Cloud.Command, append([]string{"--tls-san=" + netbed.CloudAddr.String()}, extraFlags...)...)
	return h
}

// startNATAgent joins cluster c from edge site edge with a bootstrap token
// bound to it, and runs the agent there until the test ends.
func startNATAgent(t *testing.T, bed *netbed.Bed, edge *netbed.Namespace, h *hub, c *membercluster.Cluster, extraArgs ...string) *agent {
	t.Helper()
	server, err := url.Parse(c.Server)
	if err != nil {
		t.Fatalf("%s server %q: %v", c.Name, c.Server, err)
	}
	if _, err := bed.Forward(edge, server.Host, nil, server.Host); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	token := h.createToken(t, "--cluster", c.Name)
	args := append(joinArgs(h, c, filepath.Join(dir, "certs"), token, h.pin(t)), "--http-addr=")
	bin, argv := edge.Command(filepath.Join(binDir, "flotilla-agent"), append(args, extraArgs...)...)
	a := &agent{&process.Process{Name: "flotilla-agent/" + c.Name, Binary: bin, Args: argv,
		LogPath: filepath.Join(dir, "agent.log"), Env: []string{"QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=true"}}}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Errorf("stop agent: %v", err)
		}
		if t.Failed() {
			t.Logf("agent %s log:\n%s", c.Name, process.TailFile(a.LogPath, 30))
		}
	})
	return a
}

// natFleet is a fleet whose hub is in the cloud and whose agents are each
// in an edge site behind the NAT router.
type natFleet struct {
	*fleet
	bed   *netbed.Bed
	edges map[string]*netbed.Namespace
}

func startNATFleet(t *testing.T, clusters int, agentArgs []string, hubFlags ...string) *natFleet {
	t.Helper()
	return startNATFleetWith(t, clusters, natFleetOptions{agentArgs: func(*netbed.Bed, int) []string { return agentArgs }, hubFlags: hubFlags})
}

// natFleetOptions adjust startNATFleetWith's fleet.
type natFleetOptions struct {
	// prepare, if set, sets up the bed before the hub and agents start.
	prepare func(bed *netbed.Bed)
	// agentArgs, if set, gives each agent's extra arguments, from the bed
	// and the agent's edge site (1-based), just before the agent starts.
	agentArgs func(bed *netbed.Bed, site int) []string
	hubFlags  []string
}

// startNATFleetWith is startNATFleet with the bed, the agents' arguments
// and the hub's flags from o.
func startNATFleetWith(t *testing.T, clusters int, o natFleetOptions) *natFleet {
	t.Helper()
	bed := netbed.New(t, clusters)
	if o.prepare != nil {
		o.prepare(bed)
	}
	f := &natFleet{bed: bed, edges: map[string]*netbed.Namespace{}, fleet: &fleet{t: t,
		env: membercluster.StartForTest(t, membercluster.Specs(clusters)...), agents: map[string]*agent{},
		clients: map[string]kubernetes.Interface{}, dir: t.TempDir()}}
	f.hub = startNATHub(t, bed, o.hubFlags...)
	for i, c := range f.env.Clusters() {
		f.edges[c.Name] = bed.Edges[i]
		var args []string
		if o.agentArgs != nil {
			args = o.agentArgs(bed, i+1)
		}
		f.agents[c.Name] = startNATAgent(t, bed, bed.Edges[i], f.hub, c, args...)
		client, err := c.Clientset()
		if err != nil {
			t.Fatal(err)
		}
		f.clients[c.Name] = client
	}
	for _, c := range f.env.Clusters() {
		waitReady(t, f.hub, c.Name, 60*time.Second)
	}
	return f
}

// connects counts the sessions an agent opened.
func connects(t *testing.T, a *agent) int {
	t.Helper()
	log, err := os.ReadFile(a.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(log), "msg=connected")
}

// hubMapping is the router's mapping of an edge site's flow to the hub.
//
// A joining agent's flow (its join connection, closed a moment before the
// session's) stays in the router's table until it times out: of several
// flows, the one the hub logged the session from wins, else the one used
// last (the longest time left).
func (f *natFleet) hubMapping(ctx context.Context, cluster string) (netbed.Mapping, bool, error) {
	ms, err := f.bed.UDPMappings(ctx)
	if err != nil {
		return netbed.Mapping{}, false, err
	}
	var found []netbed.Mapping
	for _, m := range ms {
		if m.Inside.Addr() == f.edges[cluster].Addr && m.Remote == natHubQUIC {
			found = append(found, m)
		}
	}
	if len(found) == 0 {
		return netbed.Mapping{}, false, nil
	}
	session := f.sessionRemote(cluster)
	best := found[0]
	for _, m := range found {
		if m.Public.String() == session {
			return m, true, nil
		}
		if m.Expires > best.Expires {
			best = m
		}
	}
	return best, true, nil
}

// sessionRemote is the address the hub last logged cluster's agent
// connecting from, "" if none.
func (f *natFleet) sessionRemote(cluster string) string {
	log, err := os.ReadFile(f.hub.LogPath)
	if err != nil {
		return ""
	}
	remote := ""
	for _, line := range strings.Split(string(log), "\n") {
		if !strings.Contains(line, `msg="agent connected" cluster=`+cluster+" ") {
			continue
		}
		if _, after, ok := strings.Cut(line, " remote="); ok {
			remote, _, _ = strings.Cut(after, " ")
		}
	}
	return remote
}

// readyMonitor polls a Cluster's Ready condition through the hub's API
// until stopped, and keeps what was not True.
type readyMonitor struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	polls    int
	notReady []string
	errs     []string
}

func monitorReady(t *testing.T, h *hub, clusters ...string) *readyMonitor {
	t.Helper()
	client, err := kubernetes.NewForConfig(h.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	m := &readyMonitor{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for {
			for _, name := range clusters {
				m.poll(ctx, client, name)
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return m
}

func (m *readyMonitor) poll(ctx context.Context, client kubernetes.Interface, name string) {
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/flotilla.io/v1alpha1/clusters/" + name).Do(ctx).Raw()
	var c v1alpha1.Cluster
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case ctx.Err() != nil:
	case err != nil:
		m.errs = append(m.errs, name+": "+err.Error())
	default:
		m.polls++
		if readyOf(&c) != metav1.ConditionTrue {
			m.notReady = append(m.notReady, time.Now().Format("15:04:05.000")+" "+name+" "+describe(&c))
		}
	}
}

// stop ends the monitor and fails the test if a cluster was seen not Ready.
func (m *readyMonitor) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.notReady) > 0 {
		t.Errorf("a cluster was not Ready in %d of %d polls: %v", len(m.notReady), m.polls, m.notReady)
	}
	if len(m.errs) > 0 {
		t.Logf("%d polls of the hub failed: %v", len(m.errs), m.errs)
	}
	if m.polls == 0 {
		t.Errorf("the monitor read no Cluster")
	}
}

// readySince is when the cluster's Ready condition last changed.
func readySince(t *testing.T, h *hub, name string) time.Time {
	t.Helper()
	cond := meta.FindStatusCondition(h.cluster(t, name).Status.Conditions, v1alpha1.ClusterConditionReady)
	if cond == nil {
		t.Fatalf("%s has no Ready condition", name)
	}
	return cond.LastTransitionTime.Time
}

// TestBehindNAT: every agent behind the NAT router joins with a token;
// the hub sees only the router's public address and cannot reach the
// edge; the seed example runs; the router's mappings change twice
// mid-session and the sessions survive (QUIC migration, no reconnect)
// with the clusters Ready throughout; then the seed failover scenario.
func TestBehindNAT(t *testing.T) {
	f := startNATFleet(t, 2, nil, failoverFlags...)
	clusters := []string{"member-1", "member-2"}

	t.Run("the hub sees the router and cannot reach the edge", func(t *testing.T) {
		log, err := os.ReadFile(f.hub.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		remotes := regexp.MustCompile(`msg="agent connected" cluster=(\S+) remote=(\S+)`).FindAllStringSubmatch(string(log), -1)
		seen := map[string]bool{}
		for _, r := range remotes {
			seen[r[1]] = true
			if ap, err := netip.ParseAddrPort(r[2]); err != nil || ap.Addr() != netbed.PublicAddrs[0] {
				t.Errorf("the hub saw %s from %s, want the router's %v", r[1], r[2], netbed.PublicAddrs[0])
			}
		}
		for _, name := range clusters {
			if !seen[name] {
				t.Errorf("the hub log has no connection of %s:\n%s", name, log)
			}
		}
		edge := f.edges["member-1"]
		l, err := edge.Listen(net.JoinHostPort(edge.Addr.String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if c, err := f.bed.Cloud.Dial(ctx, "tcp", l.Addr().String()); err == nil || !strings.Contains(err.Error(), "network is unreachable") {
			if c != nil {
				c.Close()
			}
			t.Errorf("from the hub's side to %s: %v, want network unreachable", l.Addr(), err)
		}
	})

	start := time.Now()
	f.apply("seed.yaml", nginxYAML+"---\n"+policyYAML)
	f.waitDeployments(map[string]int32{"member-1": 1, "member-2": 2}, "nginx:1.27")
	t.Logf("behind NAT: apply to Available in both clusters %v", time.Since(start).Round(time.Millisecond))

	t.Run("NAT rebinding keeps the sessions", func(t *testing.T) {
		since := map[string]time.Time{}
		sessions := map[string]int{}
		for _, name := range clusters {
			since[name], sessions[name] = readySince(t, f.hub, name), connects(t, f.agents[name])
		}
		mon := monitorReady(t, f.hub, clusters...)
		replicas := 3
		for round := 1; round <= 2; round++ {
			before := map[string]netbed.Mapping{}
			for _, name := range clusters {
				m, ok, err := f.hubMapping(t.Context(), name)
				if err != nil || !ok {
					t.Fatalf("no router mapping of %s's flow to the hub (%v)", name, err)
				}
				before[name] = m
			}
			rebound := time.Now()
			addr, err := f.bed.Rebind(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// The hub answers on the new mapping once it has validated the
			// path the agent's next packet came from. Both flows are polled
			// together: each time is an upper bound.
			answered := map[string]time.Duration{}
			waitFor(t, 10*time.Second, "every agent answered on a new mapping", func() (bool, string) {
				var waiting []string
				for _, name := range clusters {
					if _, done := answered[name]; done {
						continue
					}
					m, ok, err := f.hubMapping(t.Context(), name)
					if err == nil && ok && m.Replied && m.Public.Addr() == addr {
						answered[name] = time.Since(rebound)
						t.Logf("rebinding %d: %s moved %v → %v, answered on it %v after the NAT changed",
							round, name, before[name].Public, m.Public, answered[name].Round(time.Millisecond))
						continue
					}
					waiting = append(waiting, fmt.Sprintf("%s: %+v %v %v", name, m, ok, err))
				}
				return len(waiting) == 0, strings.Join(waiting, "; ")
			})
			// Work still reaches the agents through the new mappings.
			replicas += 3
			pushed := time.Now()
			f.apply("seed.yaml", strings.Replace(nginxYAML, "replicas: 3", "replicas: "+strconv.Itoa(replicas), 1)+"---\n"+policyYAML)
			f.waitDeployments(map[string]int32{"member-1": int32(replicas / 3), "member-2": int32(2 * replicas / 3)}, "nginx:1.27")
			t.Logf("rebinding %d: scaled to %d and Available on both members %v after the apply", round, replicas, time.Since(pushed).Round(time.Millisecond))
		}
		// A cluster that lost its session would be Unknown within a grace
		// period: watch two past the last change, then judge.
		last := time.Now()
		waitFor(t, 2*testGrace+5*time.Second, "two grace periods after the last rebinding", func() (bool, string) {
			return time.Since(last) > 2*testGrace, ""
		})
		mon.stop(t)
		for _, name := range clusters {
			if got := connects(t, f.agents[name]); got != sessions[name] {
				t.Errorf("%s's agent opened %d sessions during the rebindings, want none (migration)", name, got-sessions[name])
			}
			if got := readySince(t, f.hub, name); !got.Equal(since[name]) {
				t.Errorf("%s's Ready condition changed at %v during the rebindings", name, got)
			}
		}
	})

	t.Run("seed failover", func(t *testing.T) {
		killed := time.Now()
		if err := f.agents["member-1"].Kill(); err != nil {
			t.Fatal(err)
		}
		var noExecuteAt time.Time
		waitFor(t, testGrace+testEvictionTimeout+10*time.Second, "member-1 Unknown with unreachable:NoExecute", func() (bool, string) {
			c := f.hub.cluster(t, "member-1")
			noExecuteAt = taintAdded(c, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute)
			return !noExecuteAt.IsZero() && readyOf(c) == metav1.ConditionUnknown, describe(c)
		})
		var task v1alpha1.GracefulEvictionTask
		waitFor(t, 30*time.Second, "binding evicted from member-1", func() (bool, string) {
			b := f.binding("web", "nginx-deployment")
			if tk := taskFrom(b, "member-1"); tk != nil {
				task = *tk
				return true, ""
			}
			return false, fmt.Sprintf("clusters %v, tasks %v", b.Spec.Clusters, b.Spec.GracefulEvictionTasks)
		})
		if task.Reason != "TaintUntolerated" || task.Producer != "TaintManager" {
			t.Errorf("eviction task %+v", task)
		}
		f.waitDeployments(map[string]int32{"member-2": 9}, "nginx:1.27")
		t.Logf("behind NAT: agent killed → NoExecute %v → evicted %v → member-2 runs all 9 %v after the kill",
			noExecuteAt.Sub(killed).Round(100*time.Millisecond), task.CreationTimestamp.Sub(noExecuteAt), time.Since(killed).Round(100*time.Millisecond))

		if err := f.agents["member-1"].Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, f.hub, "member-1", 30*time.Second)
		waitFor(t, 30*time.Second, "member-1's nginx deleted after its agent came back", func() (bool, string) {
			d := f.deployment("member-1", "web", "nginx")
			return d == nil, deploymentState(d)
		})
	})
}

// TestNATKeepAlive: a router that forgets a UDP mapping after 30 s without
// packets keeps the session of an agent that otherwise says nothing for a
// minute (lease renewals every 60 s, status every 5 min): QUIC keep-alives
// hold the mapping through 45 s of quiet, the session stays, and Work
// still reaches the agent at once after it. A rebinding then delays a push
// until the agent's next keep-alive, on the same session.
func TestNATKeepAlive(t *testing.T) {
	const natTimeout, quietFor = 30 * time.Second, 45 * time.Second
	f := startNATFleetWith(t, 1, natFleetOptions{
		prepare: func(bed *netbed.Bed) {
			if err := bed.SetUDPTimeout(t.Context(), natTimeout); err != nil {
				t.Fatal(err)
			}
		},
		agentArgs: func(*netbed.Bed, int) []string { return []string{"--lease-duration=4m", "--status-interval=5m"} },
		hubFlags:  []string{"--cluster-monitor-grace-period=5m"},
	})
	bed, a, client := f.bed, f.agents["member-1"], f.clients["member-1"]
	log, _ := os.ReadFile(a.LogPath)
	if !strings.Contains(string(log), "renewInterval=1m0s") {
		t.Fatalf("the agent does not renew every minute, so the test would not show keep-alives holding the NAT:\n%s", log)
	}

	first, ok, err := f.hubMapping(t.Context(), "member-1")
	if err != nil || !ok {
		t.Fatalf("no router mapping of the agent's flow to the hub (%v)", err)
	}
	quiet := time.Now()
	lowest := natTimeout
	waitFor(t, 2*quietFor, "a quiet session through a 30 s NAT", func() (bool, string) {
		m, ok, err := f.hubMapping(t.Context(), "member-1")
		if err != nil || !ok || m.Public != first.Public {
			t.Fatalf("after %v the router's mapping is %+v (present %v, %v), want %v kept", time.Since(quiet).Round(time.Second), m, ok, err, first.Public)
		}
		lowest = min(lowest, m.Expires)
		return time.Since(quiet) > quietFor, fmt.Sprintf("mapping %v expires in %v", m.Public, m.Expires)
	})
	t.Logf("a 30 s NAT: the mapping %v stayed for %v; at most %v of its 30 s ran out between packets", first.Public, quietFor, natTimeout-lowest)
	if n := connects(t, a); n != 1 {
		t.Errorf("the agent opened %d sessions, want 1", n)
	}
	pushed := time.Now()
	f.apply("config.yaml", configYAML)
	waitFor(t, 10*time.Second, "the ConfigMap on member-1", func() (bool, string) {
		_, err := client.CoreV1().ConfigMaps("web").Get(t.Context(), "web-config", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	t.Logf("after the quiet time, a ConfigMap applied on the hub reached member-1 in %v", time.Since(pushed).Round(time.Millisecond))

	// The NAT rebinds while the agent is quiet: the hub's next push goes to
	// the dead mapping until the agent's next keep-alive shows it the new
	// path, and then arrives on the same session.
	if _, err := bed.Rebind(t.Context()); err != nil {
		t.Fatal(err)
	}
	pushed = time.Now()
	f.apply("config.yaml", strings.Replace(configYAML, "greeting: hello", "greeting: rebound", 1))
	waitFor(t, 30*time.Second, "the changed ConfigMap on member-1 after the NAT rebound", func() (bool, string) {
		cm, err := client.CoreV1().ConfigMaps("web").Get(t.Context(), "web-config", metav1.GetOptions{})
		return err == nil && cm.Data["greeting"] == "rebound", fmt.Sprint(cm.Data, err)
	})
	t.Logf("a push right after the NAT rebound under a quiet agent arrived in %v", time.Since(pushed).Round(time.Millisecond))
	if n := connects(t, a); n != 1 {
		t.Errorf("the agent opened %d sessions, want 1 (migration)", n)
	}
	if c := f.hub.cluster(t, "member-1"); readyOf(c) != metav1.ConditionTrue {
		t.Errorf("member-1 after the rebinding: %s", describe(c))
	}
}
