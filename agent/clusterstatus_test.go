package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

func testPod(namespace, name string, phase corev1.PodPhase, cpu, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{container(requests("cpu", cpu, "memory", memory))}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// switchableProbe is a health probe whose answer the test sets.
type switchableProbe struct{ err error }

func (p *switchableProbe) probe(context.Context) error { return p.err }

func TestStatusCollector(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	client := fake.NewClientset([]runtime.Object{
		testNode("a", true, "8", "32Gi", "110"),
		testNode("b", true, "8", "32Gi", "110"),
		testNode("c", false, "8", "32Gi", "110"),
		testPod("default", "web", corev1.PodRunning, "500m", "1Gi"),
		testPod("kube-system", "dns", corev1.PodPending, "250m", "70Mi"),
		testPod("default", "job", corev1.PodSucceeded, "4", "8Gi"),
		testPod("default", "crashed", corev1.PodFailed, "4", "8Gi"),
	}...)
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments/scale", Kind: "Scale"}, {Name: "deployments", Kind: "Deployment"}, {Name: "daemonsets", Kind: "DaemonSet"},
	}}}
	health := &switchableProbe{}
	c := newStatusCollector(client, health.probe, clk, discard)

	healthy := &protocol.ClusterStatus{
		ObservedAt:        t0,
		KubernetesVersion: "v1.37.2",
		APIServerHealthy:  true,
		HealthMessage:     "ok",
		NodesTotal:        3,
		NodesReady:        2,
		Allocatable:       map[string]string{"cpu": "24", "memory": "96Gi", "pods": "330"},
		Allocated:         map[string]string{"cpu": "750m", "memory": "1094Mi", "pods": "2"},
		// Sorted, without subresources.
		ServedAPIs: &protocol.ServedAPIs{Items: []protocol.APIEnablement{{GroupVersion: "apps/v1",
			Resources: []protocol.APIResource{{Name: "daemonsets", Kind: "DaemonSet"}, {Name: "deployments", Kind: "Deployment"}}}}},
	}
	checkStatus(t, "healthy", healthy, c.collect(t.Context()))

	// While the API server is down, the last numbers stay, whatever
	// happens to the objects meanwhile.
	health.err = errors.New("GET /readyz: connection refused")
	clk.Step(10 * time.Second)
	if err := client.CoreV1().Nodes().Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	down := *healthy
	down.ObservedAt, down.APIServerHealthy, down.HealthMessage = t0.Add(10*time.Second), false, health.err.Error()
	checkStatus(t, "unreachable", &down, c.collect(t.Context()))

	health.err = nil
	clk.Step(10 * time.Second)
	back := *healthy
	back.ObservedAt, back.NodesTotal, back.NodesReady = t0.Add(20*time.Second), 2, 1
	back.Allocatable = map[string]string{"cpu": "16", "memory": "64Gi", "pods": "220"}
	checkStatus(t, "back", &back, c.collect(t.Context()))
}

func checkStatus(t *testing.T, when string, want, got *protocol.ClusterStatus) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: status (-want +got):\n%s", when, diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("%s: status does not validate: %v", when, err)
	}
}

func TestStatusCollectorTruncatesHealthMessage(t *testing.T) {
	long := make([]byte, 3*maxHealthMessage)
	for i := range long {
		long[i] = 'x'
	}
	health := &switchableProbe{err: errors.New(string(long))}
	c := newStatusCollector(fake.NewClientset(), health.probe, clocktesting.NewFakeClock(time.Now()), discard)
	if got := len(c.collect(t.Context()).HealthMessage); got > maxHealthMessage {
		t.Errorf("health message is %d bytes, want at most %d", got, maxHealthMessage)
	}
}

func TestStatusCollectorKeepsNumbersWhenAListFails(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	client := fake.NewClientset(testNode("a", true, "8", "32Gi", "110"),
		testPod("default", "web", corev1.PodRunning, "1", "1Gi"))
	c := newStatusCollector(client, healthy, clk, discard)
	first := c.collect(t.Context())

	forbidden := errors.New(`pods is forbidden: User "system:serviceaccount:flotilla:agent" cannot list resource "pods"`)
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, forbidden
	})
	if err := client.CoreV1().Pods("default").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := c.collect(t.Context())
	if diff := cmp.Diff(first.Allocated, second.Allocated); diff != "" {
		t.Errorf("allocated after a failed pod list (-before +after):\n%s", diff)
	}
	if !second.APIServerHealthy {
		t.Error("a failed list made the API server unhealthy; the probe said it is fine")
	}
}
