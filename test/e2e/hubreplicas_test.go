package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/api/v1alpha1"

	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/process"
)

// etcdCluster is a real etcd cluster of several members on loopback, as an
// operator runs for hub replicas.
type etcdCluster struct {
	members   []*process.Process
	endpoints []string
}

// startEtcdCluster starts n etcd members that form one cluster.
func startEtcdCluster(t *testing.T, n int) *etcdCluster {
	t.Helper()
	binDir, err := membercluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &etcdCluster{}
	var initial, peers []string
	for i := range n {
		name := "hub-etcd-" + strconv.Itoa(i)
		peer := "http://127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP))
		e.endpoints = append(e.endpoints, "http://127.0.0.1:"+strconv.Itoa(freePort(t, freeport.TCP)))
		peers = append(peers, peer)
		initial = append(initial, name+"="+peer)
	}
	for i := range n {
		name := "hub-etcd-" + strconv.Itoa(i)
		p := &process.Process{Name: name, Binary: filepath.Join(binDir, "etcd"), LogPath: filepath.Join(dir, name+".log"), Args: []string{
			"--name=" + name, "--data-dir=" + filepath.Join(dir, name),
			"--listen-client-urls=" + e.endpoints[i], "--advertise-client-urls=" + e.endpoints[i],
			"--listen-peer-urls=" + peers[i], "--initial-advertise-peer-urls=" + peers[i],
			"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new",
			"--unsafe-no-fsync", "--log-level=warn",
			// A new etcd leader within about a second of the old one's death,
			// well inside the hub's renew deadline.
			"--heartbeat-interval=50", "--election-timeout=500",
		}}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = p.Stop()
			if t.Failed() {
				t.Logf("%s log:\n%s", name, process.TailFile(p.LogPath, 20))
			}
		})
		e.members = append(e.members, p)
	}
	waitFor(t, 30*time.Second, "etcd cluster healthy", func() (bool, string) {
		for _, ep := range e.endpoints {
			code, body := httpGet(ep + "/health")
			if code != http.StatusOK || !strings.Contains(body, `"health":"true"`) {
				return false, ep + ": " + body
			}
		}
		return true, ""
	})
	return e
}

// leader returns the index of the etcd cluster's leader, asking each
// member's status through etcd's JSON gateway.
func (e *etcdCluster) leader(t *testing.T) int {
	t.Helper()
	var leaderID string
	ids := make([]string, len(e.endpoints))
	for i, ep := range e.endpoints {
		resp, err := http.Post(ep+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader string `json:"leader"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("etcd status of %s: %v", ep, err)
		}
		ids[i], leaderID = st.Header.MemberID, st.Leader
	}
	for i, id := range ids {
		if id == leaderID {
			return i
		}
	}
	t.Fatalf("no member is the leader %s of %v", leaderID, ids)
	return 0
}

// httpGet returns the status and body of GET url (0 when it fails).
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body)
}

// Election timings short enough for a test: a standby takes over within
// about 3 s of the leader's last renewal.
var electionFlags = []string{"--leader-elect", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms"}

// startReplica starts a hub replica named id on the etcd cluster.
func startReplica(t *testing.T, e *etcdCluster, id string, flags ...string) *hub {
	t.Helper()
	dir := t.TempDir()
	h := loopbackHub(t, dir)
	args := append([]string{"--hub-id=" + id, "--etcd-endpoints=" + strings.Join(e.endpoints, ","), "--websocket-addr=off"}, electionFlags...)
	runHub(t, h, dir, nil, append(args, flags...)...)
	return h
}

// leads says whether the replica leads: only the leader serves
// /debug/stats (a standby answers 503, naming the leader).
func (h *hub) leads() (bool, string) {
	code, body := httpGet("http://" + h.httpAddr + "/debug/stats")
	return code == http.StatusOK, body
}

// startReplicas starts a three-member etcd cluster and two hub replicas
// on it with flags, gossiping with each other, and waits until the first
// leads.
func startReplicas(t *testing.T, flags ...string) (etcd *etcdCluster, first, second *hub) {
	t.Helper()
	r := startGossipingReplicas(t, flags...)
	return r.etcd, r.first, r.second
}

// gossipingReplicas are two hub replicas and what it takes to restart one.
type gossipingReplicas struct {
	etcd          *etcdCluster
	first, second *hub
	// flagsA and flagsB start e2e-hub-a and e2e-hub-b again.
	flagsA, flagsB []string
}

// startGossipingReplicas is startReplicas, keeping each replica's flags.
func startGossipingReplicas(t *testing.T, flags ...string) *gossipingReplicas {
	t.Helper()
	r := &gossipingReplicas{etcd: startEtcdCluster(t, 3)}
	gossipA := "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCPAndUDP))
	gossipB := "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCPAndUDP))
	gossip := func(addr, join string) []string {
		return append([]string{"--gossip-addr=" + addr, "--gossip-join=" + join, "--gossip-interval=" + testGossipInterval.String()}, flags...)
	}
	r.flagsA, r.flagsB = gossip(gossipA, gossipB), gossip(gossipB, gossipA)
	r.first = startReplica(t, r.etcd, "e2e-hub-a", r.flagsA...)
	waitFor(t, 30*time.Second, "the first replica leads", r.first.leads)
	r.second = startReplica(t, r.etcd, "e2e-hub-b", r.flagsB...)
	return r
}

// testGossipInterval is how often the leader sends its session table.
const testGossipInterval = 250 * time.Millisecond

// startReplicasAgent runs an agent for member that knows both replicas,
// first tried first.
func startReplicasAgent(t *testing.T, first, second *hub, member *membercluster.Cluster) *agent {
	t.Helper()
	certDir := first.issueCert(t, member.Name)
	return runAgent(t, member.Name, filepath.Join(filepath.Dir(certDir), "agent-"+member.Name+".log"),
		"--hub="+first.quicAddr+","+second.quicAddr, "--transport=quic", "--cluster-name="+member.Name, "--kubeconfig="+member.Kubeconfig,
		"--cert-dir="+certDir, "--lease-duration="+testLeaseDuration.String(), "--status-interval=500ms")
}

// TestHubReplicas: two hub replicas on a three-member etcd cluster share
// one CA and elect one leader, which alone serves agents; the other stands
// by (its /readyz says so) and serves the API. SIGKILL of the leader: the
// standby takes over, the agent (given both addresses) reconnects to it
// within 10 s, and its cluster is never seen other than Ready.
func TestHubReplicas(t *testing.T) {
	_, first, second := startReplicas(t)
	if ok, body := second.leads(); ok || !strings.Contains(body, "stands by") {
		t.Errorf("the second replica's /debug/stats: %v, %q; want a standby", ok, body)
	}
	// It serves agents too, so it is ready.
	waitFor(t, 20*time.Second, "the standby's /readyz passes", func() (bool, string) {
		code, body := httpGet("http://" + second.httpAddr + "/readyz?verbose")
		return code == http.StatusOK, body
	})
	t.Run("the replicas share the CA and keys", func(t *testing.T) {
		for _, f := range []string{"pki/ca.crt", "pki/ca.key", "pki/stateless-reset.key", "apiserver/service-account.key"} {
			a, errA := os.ReadFile(filepath.Join(first.dataDir, f))
			b, errB := os.ReadFile(filepath.Join(second.dataDir, f))
			if errA != nil || errB != nil || !bytes.Equal(a, b) {
				t.Errorf("%s differs between the replicas (%v, %v)", f, errA, errB)
			}
		}
	})

	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	member := env.Clusters()[0]
	startReplicasAgent(t, first, second, member)
	// The standby's API serves the same objects: watch from there.
	waitReady(t, second, member.Name, 60*time.Second)
	if got := second.cluster(t, member.Name).Status.Agent.ConnectedTo; got != "e2e-hub-a" {
		t.Fatalf("connected to %q, want the leader e2e-hub-a", got)
	}

	monitor := monitorReady(t, second, member.Name)
	killed := time.Now()
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the standby leads", second.leads)
	took := time.Since(killed)
	waitConnectedTo(t, second, "e2e-hub-b", member.Name)
	moved := time.Since(killed)
	t.Logf("after the SIGKILL of the leader: the standby led after %v, the agent was connected to it after %v", took.Round(time.Millisecond), moved.Round(time.Millisecond))
	if moved > 10*time.Second {
		t.Errorf("the agent reconnected %v after the leader died, want within 10s", moved)
	}
	// Past a full grace period on the new leader: still Ready throughout.
	deadline := time.Now().Add(testGrace + 2*time.Second)
	waitFor(t, testGrace+5*time.Second, "a grace period on the new leader", func() (bool, string) {
		return time.Now().After(deadline), fmt.Sprint(time.Until(deadline))
	})
	monitor.stop(t)
	waitReady(t, second, member.Name, 5*time.Second)
}

// TestHubTakeoverDetectsADeadAgentOnTime: the agent of member-2 dies 2 s
// before the leader (both SIGKILLed). The leader's last session table
// says member-2's agent had stopped renewing, so the replica taking over
// marks it Unknown at its last renewal plus the grace period, as the
// leader would have, not a restart grace after the takeover; member-1,
// whose agent was renewing, keeps the restart grace and stays Ready.
func TestHubTakeoverDetectsADeadAgentOnTime(t *testing.T) {
	const grace = 12 * time.Second
	_, first, second := startReplicas(t, "--cluster-monitor-grace-period="+grace.String())
	env := membercluster.StartForTest(t, membercluster.Specs(2)...)
	var agents []*agent
	for _, member := range env.Clusters() {
		agents = append(agents, startReplicasAgent(t, first, second, member))
	}
	alive, dead := env.Clusters()[0].Name, env.Clusters()[1].Name
	for _, name := range []string{alive, dead} {
		waitReady(t, second, name, 60*time.Second)
	}
	waitConnectedTo(t, second, "e2e-hub-a", alive, dead)
	monitor := monitorReady(t, second, alive)

	killed := time.Now()
	if err := agents[1].Kill(); err != nil {
		t.Fatal(err)
	}
	// The scenario: the leader dies 2 s after the agent, after tables
	// showing it no longer renewing (two renewal intervals of 500 ms).
	leaderDies := killed.Add(2 * time.Second)
	waitFor(t, 5*time.Second, "2 s after the agent died", func() (bool, string) {
		return time.Now().After(leaderDies), fmt.Sprint(time.Until(leaderDies))
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the standby leads", second.leads)
	took := time.Since(killed)
	var unknownAt time.Duration
	waitFor(t, 40*time.Second, dead+" Unknown", func() (bool, string) {
		c := second.cluster(t, dead)
		unknownAt = time.Since(killed)
		return readyOf(c) == metav1.ConditionUnknown, describe(c)
	})
	// Its last renewal came at most one renewal interval (500 ms) before
	// the kill; the poll, the store flush (200 ms) and the API add a
	// little. Without the table it would be the takeover + the grace +
	// the lease duration: about 19 s after the kill.
	restartGrace := took + grace + testLeaseDuration
	t.Logf("agent killed; leader killed 2 s later; the standby led after %v; %s Unknown after %v (on time: %v, with the restart grace: about %v)",
		took.Round(time.Millisecond), dead, unknownAt.Round(time.Millisecond), grace, restartGrace.Round(time.Millisecond))
	if unknownAt < grace-time.Second || unknownAt > grace+1500*time.Millisecond {
		t.Errorf("%s went Unknown %v after its agent died, want about %v (its last renewal + the grace period)", dead, unknownAt, grace)
	}
	// member-1 has the restart grace and renews to the new leader.
	waitConnectedTo(t, second, "e2e-hub-b", alive)
	deadline := time.Now().Add(testLeaseDuration)
	waitFor(t, 10*time.Second, "a lease duration more", func() (bool, string) {
		return time.Now().After(deadline), fmt.Sprint(time.Until(deadline))
	})
	monitor.stop(t)
}

// TestHubEtcdLeaderDies: a hub on a three-member etcd cluster, with the
// default leader election timings, while ConfigMaps are created through
// its API one after another: SIGKILL of etcd's leader loses no
// acknowledged write, the hub keeps leading and the cluster stays Ready.
func TestHubEtcdLeaderDies(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	h := startReplica(t, etcd, "e2e-hub-a", "--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s")
	waitFor(t, 30*time.Second, "the replica leads", h.leads)
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	member := env.Clusters()[0]
	startAgent(t, h, member)
	waitReady(t, h, member.Name, 60*time.Second)

	monitor := monitorReady(t, h, member.Name)
	// The etcd leader: its death also costs an election.
	written, failed := writeUnderKill(t, h, etcd.members[etcd.leader(t)])
	monitor.stop(t)
	if ok, body := h.leads(); !ok {
		t.Errorf("the hub stopped leading: %s", body)
	}
	client, err := kubernetes.NewForConfig(h.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	list, err := client.CoreV1().ConfigMaps("load").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, cm := range list.Items {
		stored[cm.Name] = true
	}
	var lost []string
	for _, name := range written {
		if !stored[name] {
			lost = append(lost, name)
		}
	}
	t.Logf("%d writes acknowledged, %d failed while the etcd leader died; %d lost", len(written), failed, len(lost))
	if len(lost) > 0 {
		t.Errorf("acknowledged writes lost: %v", lost)
	}
}

// writeUnderKill creates ConfigMaps through h's API one after another for
// two seconds, SIGKILLs member, and goes on for five more; it returns the
// names whose creation the API acknowledged and how many failed.
func writeUnderKill(t *testing.T, h *hub, member *process.Process) (written []string, failed int) {
	var slowest time.Duration
	defer func() { t.Logf("the slowest write took %v", slowest.Round(time.Millisecond)) }()
	t.Helper()
	client, err := kubernetes.NewForConfig(h.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "load"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	killed := false
	for i := 0; time.Since(start) < 7*time.Second; i++ {
		if !killed && time.Since(start) > 2*time.Second {
			if err := member.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
		name := fmt.Sprintf("load-%05d", i)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		began := time.Now()
		_, err := client.CoreV1().ConfigMaps("load").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": name}}, metav1.CreateOptions{})
		cancel()
		if took := time.Since(began); took > time.Second {
			t.Logf("write %s took %v, %v after the kill: %v", name, took.Round(time.Millisecond), began.Sub(start.Add(2*time.Second)).Round(time.Millisecond), err)
		}
		slowest = max(slowest, time.Since(began))
		if err != nil {
			failed++
			continue
		}
		written = append(written, name)
	}
	return written, failed
}

// waitConnectedTo waits until the clusters' sessions are with replica id.
func waitConnectedTo(t *testing.T, h *hub, id string, clusters ...string) {
	t.Helper()
	for _, name := range clusters {
		waitFor(t, 20*time.Second, name+" connected to "+id, func() (bool, string) {
			c := h.cluster(t, name)
			if c.Status.Agent == nil {
				return false, describe(c) + ", never connected"
			}
			return c.Status.Agent.ConnectedTo == id, describe(c) + " connected to " + c.Status.Agent.ConnectedTo
		})
	}
}

// heldGrace is how long an eviction task of the held workload lasts: its
// replacement never becomes healthy (no node matches its selector), so
// the task ends only when this grace period expires.
const heldGrace = 12 * time.Second

// TestHubLeaderDiesMidEviction: the seed placement (1:2 on member-1 and
// member-2) of a workload whose replacement never becomes healthy;
// member-1's agent dies, the leader evicts, and is SIGKILLed while the
// eviction task waits. The new leader finishes the eviction exactly once:
// one task from member-1 ever, ended when its grace period expired, and
// the placement moved once.
func TestHubLeaderDiesMidEviction(t *testing.T) {
	_, first, second := startReplicas(t, append(failoverFlags, "--graceful-eviction-timeout="+heldGrace.String())...)
	env := membercluster.StartForTest(t, membercluster.Specs(2)...)
	f := &fleet{t: t, env: env, hub: second, agents: map[string]*agent{}, clients: map[string]kubernetes.Interface{}, dir: t.TempDir()}
	for _, c := range env.Clusters() {
		f.agents[c.Name] = startReplicasAgent(t, first, second, c)
		client, err := c.Clientset()
		if err != nil {
			t.Fatal(err)
		}
		f.clients[c.Name] = client
		waitReady(t, second, c.Name, 60*time.Second)
	}
	held := strings.Replace(variantYAML("held", ""), "    spec:\n      containers:", "    spec:\n      nodeSelector: {flotilla.io/e2e-no-such-node: \"true\"}\n      containers:", 1)
	f.apply("held.yaml", held)
	waitHeld(f, map[string]int32{"member-1": 1, "member-2": 2})

	// Every task from member-1 the binding ever shows, by creation time.
	tasks := map[string]bool{}
	var tasksMu sync.Mutex
	watchCtx, stopWatching := context.WithCancel(t.Context())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		client, err := kubernetes.NewForConfig(second.restConfig(t))
		if err != nil {
			return
		}
		ticker := time.NewTicker(50 * time.Millisecond)
		defer ticker.Stop()
		for {
			var b v1alpha1.ResourceBinding
			raw, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/flotilla.io/v1alpha1/namespaces/web/resourcebindings/held-deployment").Do(watchCtx).Raw()
			if err == nil && json.Unmarshal(raw, &b) == nil {
				if tk := taskFrom(&b, "member-1"); tk != nil {
					tasksMu.Lock()
					tasks[tk.CreationTimestamp.UTC().Format(time.RFC3339Nano)] = true
					tasksMu.Unlock()
				}
			}
			select {
			case <-watchCtx.Done():
				return
			case <-ticker.C:
			}
		}
	}()

	if err := f.agents["member-1"].Kill(); err != nil {
		t.Fatal(err)
	}
	var task v1alpha1.GracefulEvictionTask
	waitFor(t, testGrace+testEvictionTimeout+testToleration+20*time.Second, "held evicted from member-1", func() (bool, string) {
		b := f.binding("web", "held-deployment")
		if tk := taskFrom(b, "member-1"); tk != nil {
			task = *tk
			return true, ""
		}
		return false, fmt.Sprintf("clusters %v, tasks %v", b.Spec.Clusters, b.Spec.GracefulEvictionTasks)
	})
	killed := time.Now()
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		t.Logf("the task lasted %v (grace %v)", time.Since(task.CreationTimestamp.Time).Round(100*time.Millisecond), heldGrace)
	}()
	t.Logf("leader killed %v after the eviction task was made", killed.Sub(task.CreationTimestamp.Time).Round(100*time.Millisecond))
	waitFor(t, 20*time.Second, "the standby leads", second.leads)
	waitConnectedTo(t, second, "e2e-hub-b", "member-2")

	waitHeld(f, map[string]int32{"member-2": 3})
	waitFor(t, heldGrace+30*time.Second, "the eviction task ended", func() (bool, string) {
		b := f.binding("web", "held-deployment")
		return len(b.Spec.GracefulEvictionTasks) == 0, fmt.Sprintf("tasks %v", b.Spec.EvictingClusters())
	})
	ended := time.Now()
	if lasted := ended.Sub(task.CreationTimestamp.Time); lasted < heldGrace-time.Second {
		t.Errorf("the task ended %v after it was made, before its %v grace period (its replacement is never healthy)", lasted, heldGrace)
	}
	b := f.binding("web", "held-deployment")
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, b.Spec.Clusters); diff != "" {
		t.Errorf("placement after the eviction (-want +got):\n%s", diff)
	}
	if n := eventCount(t, second, "ResourceBinding", "web", "held-deployment", "EvictionTaskEnded"); n != 1 {
		t.Errorf("%d EvictionTaskEnded events, want 1", n)
	}
	if n := eventCount(t, second, "ResourceBinding", "web", "held-deployment", "Evicted"); n > 1 {
		t.Errorf("%d Evicted events, want at most 1 (the killed leader may not have stored its own)", n)
	}
	stopWatching()
	<-watched
	tasksMu.Lock()
	defer tasksMu.Unlock()
	if len(tasks) != 1 {
		t.Errorf("eviction tasks from member-1 created at %v, want exactly one", tasks)
	}
}

// waitHeld waits until each cluster of want holds the held Deployment with
// the wanted replicas (never available: no node matches its pods).
func waitHeld(f *fleet, want map[string]int32) {
	f.t.Helper()
	waitFor(f.t, 60*time.Second, fmt.Sprintf("web/held %v", want), func() (bool, string) {
		var states []string
		ok := true
		for cluster, replicas := range want {
			d := f.deployment(cluster, "web", "held")
			states = append(states, cluster+": "+deploymentState(d))
			ok = ok && d != nil && *d.Spec.Replicas == replicas
		}
		return ok, strings.Join(states, "; ")
	})
}

// TestHubStandbyServesAgents: every replica serves agents; a standby
// relays what its agents say to the leader over the gossip group.
//   - member-1's agent tries the standby first and stays there: the
//     leader shows it connected to the standby, Ready, with its node
//     counts, and its Works arrive through the standby.
//   - SIGKILL of the leader: the standby leads and member-1's session
//     stays as it was (same connectedAt); member-2 moves to it; neither
//     is ever seen other than Ready.
//   - The killed replica comes back as a standby and member-3's agent,
//     which tries it first, is served there. SIGKILL of that standby:
//     member-3 reconnects to the leader within 10 s and is never Unknown
//     (the leader gives a lost replica's clusters a grace to reconnect).
func TestHubStandbyServesAgents(t *testing.T) {
	r := startGossipingReplicas(t)
	first, second := r.first, r.second
	env := membercluster.StartForTest(t, membercluster.Specs(3)...)
	members := env.Clusters()
	f := &fleet{t: t, env: env, hub: first, agents: map[string]*agent{}, clients: map[string]kubernetes.Interface{}, dir: t.TempDir()}
	for _, c := range members {
		client, err := c.Clientset()
		if err != nil {
			t.Fatal(err)
		}
		f.clients[c.Name] = client
	}
	f.agents["member-1"] = startReplicasAgent(t, second, first, members[0])
	f.agents["member-2"] = startReplicasAgent(t, first, second, members[1])
	for _, name := range []string{"member-1", "member-2"} {
		waitReady(t, first, name, 60*time.Second)
	}
	waitConnectedTo(t, first, "e2e-hub-b", "member-1")
	waitConnectedTo(t, first, "e2e-hub-a", "member-2")
	waitFor(t, 10*time.Second, "the leader's metrics show member-1's session relayed", func() (bool, string) {
		body := first.metrics(t)
		return strings.Contains(body, "\nflotilla_hub_relayed_sessions 1\n") && !strings.Contains(body, "\nflotilla_hub_relay_batches_received_total 0\n"), body
	})
	waitFor(t, 20*time.Second, "member-1's node counts relayed", func() (bool, string) {
		c := first.cluster(t, "member-1")
		return c.Status.NodeSummary != nil && c.Status.NodeSummary.TotalNum > 0, describe(c)
	})
	held := strings.Replace(variantYAML("held", ""), "    spec:\n      containers:", "    spec:\n      nodeSelector: {flotilla.io/e2e-no-such-node: \"true\"}\n      containers:", 1)
	f.apply("held.yaml", held)
	waitHeld(f, map[string]int32{"member-1": 1, "member-2": 2})

	t.Run("one session per cluster across the replicas", func(t *testing.T) {
		rogueTLS := loadClientTLS(t, first.issueCert(t, "rogue"), "127.0.0.1")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		onStandby := dialRogue(t, t, second.quicAddr, rogueTLS, "rogue")
		go onStandby.keepRenewing(ctx)
		waitConnectedTo(t, first, "e2e-hub-b", "rogue")
		// A newer session on the leader ends the standby's (the leader
		// tells it over the gossip group)...
		onLeader := dialRogue(t, t, first.quicAddr, rogueTLS, "rogue")
		go onLeader.keepRenewing(ctx)
		waitFor(t, 10*time.Second, "the standby's session ended", func() (bool, string) {
			reason := onStandby.endReason()
			return strings.Contains(reason, "one session per cluster"), reason
		})
		waitConnectedTo(t, first, "e2e-hub-a", "rogue")
		// ...and a newer one on the standby ends the leader's own.
		again := dialRogue(t, t, second.quicAddr, rogueTLS, "rogue")
		go again.keepRenewing(ctx)
		waitFor(t, 10*time.Second, "the leader's session ended", func() (bool, string) {
			reason := onLeader.endReason()
			return strings.Contains(reason, "one session per cluster"), reason
		})
		waitConnectedTo(t, first, "e2e-hub-b", "rogue")
		if reason := again.endReason(); reason != "" {
			t.Errorf("the newest session ended: %s", reason)
		}
	})

	t.Run("the leader dies: the standby's sessions stay", func(t *testing.T) {
		before := second.cluster(t, "member-1").Status.Agent.ConnectedAt
		monitor := monitorReady(t, second, "member-1", "member-2")
		killed := time.Now()
		if err := first.Kill(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the standby leads", second.leads)
		led := time.Now()
		t.Logf("the standby led %v after the SIGKILL of the leader", led.Sub(killed).Round(time.Millisecond))
		waitConnectedTo(t, second, "e2e-hub-b", "member-2")
		// The new leader's registry took member-1's session: its renewals
		// reach the lease.
		waitFor(t, 15*time.Second, "a renewal of member-1 stored after the takeover", func() (bool, string) {
			l := second.lease(t, "member-1")
			return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(led), fmt.Sprint("renewed ", l.Spec.RenewTime)
		})
		if after := second.cluster(t, "member-1").Status.Agent.ConnectedAt; after == nil || before == nil || !after.Equal(before) {
			t.Errorf("member-1's session: connected at %v before the takeover, %v after; want the same session", before, after)
		}
		deadline := time.Now().Add(testGrace + 2*time.Second)
		waitFor(t, testGrace+5*time.Second, "a grace period on the new leader", func() (bool, string) {
			return time.Now().After(deadline), fmt.Sprint(time.Until(deadline))
		})
		monitor.stop(t)
	})

	t.Run("a standby serving an agent dies: the agent moves and its cluster stays Ready", func(t *testing.T) {
		first = startReplica(t, r.etcd, "e2e-hub-a", r.flagsA...)
		waitFor(t, 30*time.Second, "the restarted replica serves agents", func() (bool, string) {
			code, body := httpGet("http://" + first.httpAddr + "/readyz?verbose")
			return code == http.StatusOK, body
		})
		f.agents["member-3"] = startReplicasAgent(t, first, second, members[2])
		waitReady(t, second, "member-3", 60*time.Second)
		waitConnectedTo(t, second, "e2e-hub-a", "member-3")
		monitor := monitorReady(t, second, "member-1", "member-2", "member-3")
		killed := time.Now()
		if err := first.Kill(); err != nil {
			t.Fatal(err)
		}
		waitConnectedTo(t, second, "e2e-hub-b", "member-3")
		moved := time.Since(killed)
		t.Logf("member-3 was connected to the leader %v after the SIGKILL of its replica", moved.Round(time.Millisecond))
		if moved > 10*time.Second {
			t.Errorf("member-3 reconnected %v after its replica died, want within 10s", moved)
		}
		// The leader noticed the replica's silence and gave member-3 the
		// reconnect grace (recorded as a disconnect).
		if body := second.metrics(t); !strings.Contains(body, "\nflotilla_hub_replicas_lost_total ") || strings.Contains(body, "\nflotilla_hub_replicas_lost_total 0\n") {
			t.Errorf("the leader's metrics count no lost replica:\n%s", grepMetrics(body, "flotilla_hub_replicas_lost_total"))
		}
		waitFor(t, 10*time.Second, "an AgentDisconnected event on member-3 (the leader noticed its replica was lost)", func() (bool, string) {
			n := eventCount(t, second, "Cluster", "default", "member-3", "AgentDisconnected")
			return n >= 1, fmt.Sprint(n, " events")
		})
		deadline := time.Now().Add(testGrace + 2*time.Second)
		waitFor(t, testGrace+5*time.Second, "a grace period more", func() (bool, string) {
			return time.Now().After(deadline), fmt.Sprint(time.Until(deadline))
		})
		monitor.stop(t)
		waitHeld(f, map[string]int32{"member-1": 1, "member-2": 2})
	})

	t.Run("the leader stops on SIGTERM", func(t *testing.T) {
		stopping := time.Now()
		if err := syscall.Kill(second.Pid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-second.Exited():
			t.Logf("the leader stopped %v after SIGTERM", time.Since(stopping).Round(time.Millisecond))
		case <-time.After(20 * time.Second):
			t.Fatal("the leader did not stop within 20 s of SIGTERM")
		}
	})
}
