package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/webapp"
)

// webYAML is the web server as a Deployment of 2 replicas, one on each of
// real-a and real-b, on their real nodes.
var webYAML = webapp.DeploymentYAML("web", "hello", 2) + `---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: hello, namespace: web}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: hello}]
  placement:
    clusterAffinity: {clusterNames: [real-a, real-b]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [real-a]}, weight: 1}
          - {targetCluster: {clusterNames: [real-b]}, weight: 1}
`

// TestRealWorkloadFailsOver: a web server Deployment runs as real
// containers on two clusters with real nodes and answers in both; real-a's
// agent dies; real-a goes Unknown, its replica moves to real-b, and the new
// copy answers requests while real-a's old copy still does (nothing could
// purge it); when the agent returns, real-a's orphaned copy is removed.
// It reports the time from the kill to the first answer of the new copy.
func TestRealWorkloadFailsOver(t *testing.T) {
	started := time.Now()
	env := startRealNodeClusters(t,
		membercluster.ClusterSpec{Name: "real-a", RealNodes: 1},
		membercluster.ClusterSpec{Name: "real-b", RealNodes: 1})
	h := startHub(t, failoverFlags...)
	f := &fleet{t: t, hub: h, env: env, agents: map[string]*agent{}, clients: map[string]kubernetes.Interface{}, dir: t.TempDir()}
	for _, c := range env.Clusters() {
		f.agents[c.Name] = startAgent(t, h, c)
		client, err := c.Clientset()
		if err != nil {
			t.Fatal(err)
		}
		f.clients[c.Name] = client
	}
	for _, c := range env.Clusters() {
		waitReady(t, h, c.Name, 30*time.Second)
	}
	t.Logf("2 clusters of 1 real node each, hub and agents ready in %v", time.Since(started).Round(time.Millisecond))

	f.apply("hello.yaml", webYAML)
	before := map[string][]corev1.Pod{}
	for _, cluster := range []string{"real-a", "real-b"} {
		before[cluster] = answeringPods(t, f.clients[cluster], cluster, 1)
	}
	old := before["real-a"][0]

	killed := time.Now()
	if err := f.agents["real-a"].Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, testGrace+10*time.Second, "real-a Unknown", func() (bool, string) {
		c := h.cluster(t, "real-a")
		return readyOf(c) == metav1.ConditionUnknown, describe(c)
	})
	unknown := time.Since(killed)
	var answer string
	var answered time.Duration
	waitFor(t, 3*time.Minute, "a new copy of hello answering on real-b", func() (bool, string) {
		pods, err := f.clients["real-b"].CoreV1().Pods("web").List(t.Context(), metav1.ListOptions{LabelSelector: "app=hello"})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		for _, p := range pods.Items {
			if p.Name == before["real-b"][0].Name || p.Status.PodIP == "" {
				states = append(states, p.Name+" "+string(p.Status.Phase))
				continue
			}
			body, err := webapp.Ask(p.Status.PodIP, askTimeout)
			if err == nil {
				answer, answered = body, time.Since(killed)
				return true, ""
			}
			states = append(states, fmt.Sprintf("%s at %s: %v", p.Name, p.Status.PodIP, err))
		}
		return false, strings.Join(states, "; ")
	})
	t.Logf("real-a's agent killed → Unknown %v → first answer of the new copy on real-b %v: %q",
		unknown.Round(100*time.Millisecond), answered.Round(100*time.Millisecond), strings.TrimSpace(answer))
	if want := "on " + before["real-b"][0].Spec.NodeName; !strings.Contains(answer, want) {
		t.Errorf("the new copy answered %q, want it %s", answer, want)
	}
	// Nothing could reach real-a's copy: it still serves.
	if body, err := webapp.Ask(old.Status.PodIP, askTimeout); err != nil {
		t.Errorf("real-a's old copy %s after the failover: %v, want it still answering", old.Name, err)
	} else if !strings.Contains(body, old.Name) {
		t.Errorf("real-a's old copy answered %q", body)
	}
	f.waitDeploymentsOf("web", "hello", map[string]int32{"real-b": 2}, "")

	if err := f.agents["real-a"].Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, h, "real-a", 30*time.Second)
	waitFor(t, 60*time.Second, "real-a's orphaned copy removed, its container stopped", func() (bool, string) {
		d := f.deployment("real-a", "web", "hello")
		pods, err := f.clients["real-a"].CoreV1().Pods("web").List(t.Context(), metav1.ListOptions{LabelSelector: "app=hello"})
		if err != nil {
			return false, err.Error()
		}
		_, err = webapp.Ask(old.Status.PodIP, askTimeout)
		return d == nil && len(pods.Items) == 0 && err != nil, fmt.Sprintf("deployment %s, %d pods, old copy answers: %v", deploymentState(d), len(pods.Items), err == nil)
	})
	t.Logf("test wall time %v", time.Since(started).Round(time.Millisecond))
}

// answeringPods waits until want pods of app=hello in namespace web of a
// cluster run and each answers GET / with its own name, and returns them.
func answeringPods(t *testing.T, client kubernetes.Interface, cluster string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d copies of hello answering on %s", want, cluster), func() (bool, string) {
		list, err := client.CoreV1().Pods("web").List(t.Context(), metav1.ListOptions{LabelSelector: "app=hello"})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		var states []string
		answering := 0
		for _, p := range pods {
			if p.Status.PodIP == "" {
				states = append(states, p.Name+" "+string(p.Status.Phase)+" "+containerStates(&p))
				continue
			}
			body, err := webapp.Ask(p.Status.PodIP, askTimeout)
			if err == nil && strings.Contains(body, p.Name) {
				answering++
			}
			states = append(states, fmt.Sprintf("%s at %s: %q %v", p.Name, p.Status.PodIP, body, err))
		}
		return answering == want && len(pods) == want, strings.Join(states, "; ")
	})
	return pods
}

// askTimeout bounds one request to a pod.
const askTimeout = 2 * time.Second
