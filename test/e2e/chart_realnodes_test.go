package e2e

import (
	"fmt"
	"math"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// configMapEdge1YAML is a ConfigMap the hub propagates to edge-1.
const configMapEdge1YAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: greeting, namespace: web}
data: {hello: edge}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: greeting-edge-1, namespace: web}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: greeting}]
  placement: {clusterAffinity: {clusterNames: [edge-1]}}
`

// TestAgentChartOnRealNodes installs charts/flotilla-agent with the Helm
// SDK into a cluster of two real nodes exactly as `flotilla-hub token
// create` prints it (plus the image's tag): both replicas run as real
// containers, one leads and joins the hub; deleting the leader's pod
// moves the lead and the cluster stays Ready; an upgrade to a new image
// never holds two sessions; uninstalling leaves nothing of the agent.
func TestAgentChartOnRealNodes(t *testing.T) {
	started := time.Now()
	helmrelease := testbinTool(t, "helmrelease")
	env := startRealNodeClusters(t, membercluster.ClusterSpec{Name: "edge-1", RealNodes: 2})
	c := env.Cluster("edge-1")
	member, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster with 2 real nodes ready in %v", time.Since(started).Round(time.Millisecond))

	// The hub serves agents on the address the pods reach the host at; its
	// API and HTTP stay on the loopback. The chart's agent renews a 40 s
	// lease every 10 s: the hub gets its default grace period.
	dir := t.TempDir()
	h := loopbackHub(t, dir)
	host := c.PodReachableAddr()
	h.quicAddr = net.JoinHostPort(host.String(), strconv.Itoa(freePort(t, freeport.UDP)))
	runHub(t, h, dir, nil, "--cluster-monitor-grace-period=40s", "--agent-address="+h.quicAddr, "--tls-san="+host.String())

	out, err := exec.Command(filepath.Join(binDir, "flotilla-hub"), "token", "create", "--data-dir", h.dataDir, "--cluster", "edge-1", "--ttl", "10m").CombinedOutput()
	if err != nil {
		t.Fatalf("flotilla-hub token create: %v\n%s", err, out)
	}
	install, err := parseHelmInstall(string(out))
	if err != nil {
		t.Fatalf("flotilla-hub token create printed:\n%s\n%v", out, err)
	}
	if !slices.Contains(install.sets, "hub.address="+h.quicAddr) {
		t.Fatalf("the printed command sets %q, want hub.address=%s", install.sets, h.quicAddr)
	}
	helm := func(t *testing.T, verb string, args ...string) {
		t.Helper()
		helmRelease(t, helmrelease, c, install.namespace, install.release, "3m", verb, args...)
	}
	chart := filepath.Join("..", "..", install.chart)
	helm(t, "install", install.args("image.tag="+imageTag)...)
	ns := install.namespace
	selector := "app.kubernetes.io/instance=" + install.release

	t.Run("both replicas run on real nodes, one leads and joins", func(t *testing.T) {
		pods := runningPods(t, member, ns, selector, 2)
		nodes := map[string]bool{}
		for _, p := range pods {
			nodes[p.Spec.NodeName] = true
		}
		if len(nodes) != 2 {
			t.Errorf("the replicas run on nodes %v, want one on each of the 2 real nodes (the chart's anti-affinity)", nodes)
		}
		leaderOf(t, member, ns, pods)
		waitReady(t, h, "edge-1", 90*time.Second)
		t.Logf("edge-1 Ready %v after the test began", time.Since(started).Round(time.Millisecond))
	})

	watch := watchCluster(t, h, "edge-1")
	f := &fleet{t: t, hub: h, env: env, clients: map[string]kubernetes.Interface{"edge-1": member}, dir: t.TempDir()}
	t.Run("a Work applies under the chart's RBAC", func(t *testing.T) {
		f.apply("greeting.yaml", configMapEdge1YAML)
		waitFor(t, 60*time.Second, "the ConfigMap on edge-1", func() (bool, string) {
			cm, err := member.CoreV1().ConfigMaps("web").Get(t.Context(), "greeting", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return cm.Data["hello"] == "edge", fmt.Sprint(cm.Data)
		})
	})

	t.Run("deleting the leader's pod moves the lead; the cluster stays Ready", func(t *testing.T) {
		pods := runningPods(t, member, ns, selector, 2)
		leader := leaderOf(t, member, ns, pods)
		deleted := time.Now()
		if err := member.CoreV1().Pods(ns).Delete(t.Context(), leader, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "another pod leading", func() (bool, string) {
			now := leaseHolderPod(t, member, ns)
			return now != "" && now != leader, "holder pod " + now
		})
		t.Logf("the lead moved %v after deleting pod %s", time.Since(deleted).Round(time.Millisecond), leader)
		renewedAfter(t, h, "edge-1", time.Now())
		if bad, events := watch.finish(); len(bad) > 0 {
			t.Errorf("the hub showed edge-1 not Ready (%d of %d watch events): %v", len(bad), events, bad)
		}
	})

	t.Run("an upgrade to a new image never holds two sessions", func(t *testing.T) {
		replacedBefore := metricValue(t, h, "flotilla_sessions_replaced_total")
		sampler := sampleMetric(t, h, "flotilla_connected_agents")
		helm(t, "upgrade", "--reuse-values", "--set", "image.tag="+nextImageTag, chart)
		pods := runningPods(t, member, ns, selector, 2)
		for _, p := range pods {
			if img := p.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+nextImageTag) {
				t.Errorf("pod %s runs %s after the upgrade", p.Name, img)
			}
		}
		leaderOf(t, member, ns, pods)
		waitReady(t, h, "edge-1", 90*time.Second)
		renewedAfter(t, h, "edge-1", time.Now())
		if most := sampler.stop(); most > 1 {
			t.Errorf("the hub counted %v agents connected at once during the upgrade, want at most 1", most)
		}
		if after := metricValue(t, h, "flotilla_sessions_replaced_total"); after != replacedBefore {
			t.Errorf("flotilla_sessions_replaced_total went %v → %v during the upgrade: two sessions overlapped", replacedBefore, after)
		}
	})

	t.Run("uninstall leaves nothing of the agent", func(t *testing.T) {
		helm(t, "uninstall")
		waitFor(t, 90*time.Second, "nothing of the agent left in "+ns, func() (bool, string) {
			left := agentLeftovers(t, c, ns, install.release)
			return len(left) == 0, strings.Join(left, ", ")
		})
		// The workloads it applied are the user's: they stay.
		if _, err := member.CoreV1().ConfigMaps("web").Get(t.Context(), "greeting", metav1.GetOptions{}); err != nil {
			t.Errorf("the propagated ConfigMap after uninstall: %v, want it kept", err)
		}
	})
	t.Logf("test wall time %v", time.Since(started).Round(time.Millisecond))
	logRealNodeMemory(t, c)
}

// runningPods waits until exactly want pods match selector in ns, all
// Running and Ready, none terminating, and returns them.
func runningPods(t *testing.T, client kubernetes.Interface, ns, selector string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, 3*time.Minute, fmt.Sprintf("%d pods %s running and ready", want, selector), func() (bool, string) {
		list, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		var states []string
		ready := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podutils.IsPodReady(&p) {
				ready++
			}
			states = append(states, fmt.Sprintf("%s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, containerStates(&p)))
		}
		return ready == want && len(pods) == want, strings.Join(states, "; ")
	})
	return pods
}

// leaseHolderPod is the pod named by the agent's leader Lease in ns (the
// holder identity is <pod>_<suffix>), or "".
func leaseHolderPod(t *testing.T, client kubernetes.Interface, ns string) string {
	t.Helper()
	leases, err := client.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(leases.Items) != 1 || leases.Items[0].Spec.HolderIdentity == nil {
		return ""
	}
	pod, _, _ := strings.Cut(*leases.Items[0].Spec.HolderIdentity, "_")
	return pod
}

// leaderOf waits until one of pods holds the agent's leader Lease and
// returns its name.
func leaderOf(t *testing.T, client kubernetes.Interface, ns string, pods []corev1.Pod) string {
	t.Helper()
	var leader string
	waitFor(t, 60*time.Second, "one of the replicas leading", func() (bool, string) {
		leader = leaseHolderPod(t, client, ns)
		return slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == leader }), "holder pod " + leader
	})
	return leader
}

// renewedAfter waits for a renewal of the cluster's lease on the hub after
// since: the agent's session is up.
func renewedAfter(t *testing.T, h *hub, cluster string, since time.Time) {
	t.Helper()
	waitFor(t, 30*time.Second, "a lease renewal of "+cluster, func() (bool, string) {
		l := h.lease(t, cluster)
		if l == nil || l.Spec.RenewTime == nil {
			return false, "no lease"
		}
		return l.Spec.RenewTime.After(since), l.Spec.RenewTime.String()
	})
}

// agentLeftovers lists what of the agent is left in the member cluster
// after its release is uninstalled: any object of the kinds a release or
// its agent makes in ns, but the namespace's own defaults (ServiceAccount
// default, ConfigMap kube-root-ca.crt), and cluster-wide RBAC of the
// release.
func agentLeftovers(t *testing.T, c *membercluster.Cluster, ns, release string) []string {
	t.Helper()
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	expected := map[string]bool{"serviceaccounts/default": true, "configmaps/kube-root-ca.crt": true}
	namespaced := []schema.GroupVersionResource{
		{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "serviceaccounts"}, {Version: "v1", Resource: "services"},
		{Group: "apps", Version: "v1", Resource: "deployments"}, {Group: "apps", Version: "v1", Resource: "replicasets"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, {Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
	clusterWide := []schema.GroupVersionResource{
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	}
	var left []string
	list := func(r dynamic.ResourceInterface, gvr schema.GroupVersionResource, opts metav1.ListOptions) {
		l, err := r.List(t.Context(), opts)
		if err != nil {
			left = append(left, gvr.Resource+": "+err.Error())
			return
		}
		for _, o := range l.Items {
			if id := gvr.Resource + "/" + o.GetName(); !expected[id] {
				left = append(left, id)
			}
		}
	}
	for _, gvr := range namespaced {
		list(client.Resource(gvr).Namespace(ns), gvr, metav1.ListOptions{})
	}
	for _, gvr := range clusterWide {
		list(client.Resource(gvr), gvr, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	}
	return left
}

// metricSampler reads one unlabelled metric of the hub every 100 ms until
// stopped, and keeps the highest value it saw.
type metricSampler struct {
	stopped chan struct{}
	highest chan float64
}

func sampleMetric(t *testing.T, h *hub, name string) *metricSampler {
	t.Helper()
	s := &metricSampler{stopped: make(chan struct{}), highest: make(chan float64, 1)}
	go func() {
		most := math.Inf(-1)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, ok := scrapeSeries("http://"+h.httpAddr+"/metrics", name); ok {
				most = max(most, v)
			}
			select {
			case <-s.stopped:
				s.highest <- most
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// stop ends the sampling and returns the highest value seen (-Inf if
// none); later calls return -Inf.
func (s *metricSampler) stop() float64 {
	select {
	case <-s.stopped:
		return math.Inf(-1)
	default:
	}
	close(s.stopped)
	return <-s.highest
}

// helmRelease runs the testbin's helmrelease tool (the Helm SDK): verb
// (install, upgrade, uninstall) of release in namespace of cluster c,
// waiting up to timeout for its resources, and logs how long it took.
func helmRelease(t *testing.T, tool string, c *membercluster.Cluster, namespace, release, timeout, verb string, args ...string) {
	t.Helper()
	args = append([]string{verb, "--kubeconfig", c.Kubeconfig, "--namespace", namespace, "--name", release, "--wait", "--timeout", timeout}, args...)
	begun := time.Now()
	out, err := exec.Command(tool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s %s: %v\n%s", verb, release, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("helm %s %s took %v: %s", verb, release, time.Since(begun).Round(time.Millisecond), lines[len(lines)-1])
}

// args are helmrelease's install arguments for the printed command, with
// the values in extra set after its own.
func (i helmInstall) args(extra ...string) []string {
	var args []string
	for _, s := range append(slices.Clone(i.sets), extra...) {
		args = append(args, "--set", s)
	}
	if i.createNamespace {
		args = append(args, "--create-namespace")
	}
	return append(args, filepath.Join("..", "..", i.chart))
}
