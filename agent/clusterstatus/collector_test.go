package clusterstatus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

// testPod is a pod bound to node a.
func testPod(namespace, name string, phase corev1.PodPhase, cpu, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{container(requests("cpu", cpu, "memory", memory))}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// runCapacity starts the node and pod watches on client until the test
// ends, and returns once the watches of the resources named (default:
// nodes and pods) have started. Each change of a sum sends on the returned
// channel (dropped if one is pending), for tests to wait on.
func runCapacity(t *testing.T, client kubernetes.Interface, watched ...string) (*Capacity, <-chan struct{}) {
	t.Helper()
	caps := NewCapacity(client)
	changes := make(chan struct{}, 1)
	notify := func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	caps.nodes.onChange, caps.pods.onChange = notify, notify
	if len(watched) == 0 {
		watched = []string{"nodes", "pods"}
	}
	watching := watchesStarted(client, watched...)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		caps.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// A fake clientset's watch sees only the changes made after it
	// started: a test that changes objects before would lose them.
	select {
	case <-watching:
	case <-time.After(waitTimeout):
		t.Fatalf("the watches of %v did not start within %v", watched, waitTimeout)
	}
	return caps, changes
}

// watchesStarted returns a channel closed once a fake clientset has served
// a watch of each resource; for any other client it is closed already.
func watchesStarted(client kubernetes.Interface, resources ...string) <-chan struct{} {
	started := make(chan struct{})
	fc, ok := client.(*fake.Clientset)
	if !ok {
		close(started)
		return started
	}
	var mu sync.Mutex
	waiting := map[string]bool{}
	for _, r := range resources {
		waiting[r] = true
	}
	fc.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := fc.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if waiting[action.GetResource().Resource] {
			delete(waiting, action.GetResource().Resource)
			if len(waiting) == 0 {
				close(started)
			}
		}
		return true, w, nil
	})
	return started
}

// waitCapacity waits until the sums satisfy ok.
func waitCapacity(t *testing.T, caps *Capacity, changes <-chan struct{}, what string, ok func(capacitySnapshot) bool) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for !ok(caps.snapshot()) {
		select {
		case <-changes:
		case <-timeout:
			t.Fatalf("the capacity sums did not reach %s within %v: %+v", what, waitTimeout, caps.snapshot())
		}
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
	caps, changes := runCapacity(t, client)
	c := NewCollector(client, caps, health.probe, clk, discard)

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
	checkStatus(t, "healthy", healthy, c.Collect(t.Context()))

	// While the API server is down, the last numbers stay, whatever
	// happens to the objects meanwhile.
	health.err = errors.New("GET /readyz: connection refused")
	clk.Step(10 * time.Second)
	if err := client.CoreV1().Nodes().Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	down := *healthy
	down.ObservedAt, down.APIServerHealthy, down.HealthMessage = t0.Add(10*time.Second), false, health.err.Error()
	checkStatus(t, "unreachable", &down, c.Collect(t.Context()))

	health.err = nil
	clk.Step(10 * time.Second)
	waitCapacity(t, caps, changes, "two nodes", func(s capacitySnapshot) bool { return s.nodesTotal == 2 })
	back := *healthy
	back.ObservedAt, back.NodesTotal, back.NodesReady = t0.Add(20*time.Second), 2, 1
	back.Allocatable = map[string]string{"cpu": "16", "memory": "64Gi", "pods": "220"}
	checkStatus(t, "back", &back, c.Collect(t.Context()))
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
	client := fake.NewClientset()
	caps, _ := runCapacity(t, client)
	c := NewCollector(client, caps, health.probe, clocktesting.NewFakeClock(time.Now()), discard)
	if got := len(c.Collect(t.Context()).HealthMessage); got > maxHealthMessage {
		t.Errorf("health message is %d bytes, want at most %d", got, maxHealthMessage)
	}
}

// TestStatusCollectorWithoutPodAccess: an agent that may not list pods
// still reports its nodes, and its API server as healthy.
func TestStatusCollectorWithoutPodAccess(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	client := fake.NewClientset(testNode("a", true, "8", "32Gi", "110"),
		testPod("default", "web", corev1.PodRunning, "1", "1Gi"))
	forbidden := errors.New(`pods is forbidden: User "system:serviceaccount:flotilla:agent" cannot list resource "pods"`)
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, forbidden
	})
	caps, changes := runCapacity(t, client, "nodes") // the pod list is refused
	waitCapacity(t, caps, changes, "the nodes", func(s capacitySnapshot) bool { return s.nodesSynced })
	c := NewCollector(client, caps, healthy, clk, discard)
	c.timeout = 10 * time.Millisecond // the pods never sync
	got := c.Collect(t.Context())
	if !got.APIServerHealthy || got.NodesTotal != 1 || got.Allocatable["cpu"] != "8" {
		t.Errorf("status = %+v, want healthy with 1 node of 8 CPUs", got)
	}
	if got.Allocated != nil {
		t.Errorf("allocated = %v without any pod list, want none", got.Allocated)
	}
}

// TestStatusCollectorFollowsChanges: the reports follow nodes and pods as
// they change, without a list call after the first.
func TestStatusCollectorFollowsChanges(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	client := fake.NewClientset(testNode("a", true, "8", "32Gi", "110"),
		testPod("default", "web", corev1.PodRunning, "1", "1Gi"))
	caps, changes := runCapacity(t, client)
	c := NewCollector(client, caps, healthy, clk, discard)
	if got := c.Collect(t.Context()).Allocated; got["cpu"] != "1" || got["pods"] != "1" {
		t.Fatalf("allocated %v, want 1 CPU for 1 pod", got)
	}
	lists := 0
	client.PrependReactor("list", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists++
		return false, nil, nil
	})
	ctx := t.Context()
	if _, err := client.CoreV1().Pods("default").Create(ctx, testPod("default", "api", corev1.PodPending, "500m", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := testPod("default", "web", corev1.PodSucceeded, "1", "1Gi")
	if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, testNode("a", false, "8", "32Gi", "110"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCapacity(t, caps, changes, "the changes", func(s capacitySnapshot) bool {
		return s.nodesReady == 0 && s.allocated.Cpu().String() == "500m"
	})
	got := c.Collect(ctx)
	want := map[string]any{"ready": int32(0), "allocated": map[string]string{"cpu": "500m", "memory": "1Gi", "pods": "1"}, "lists": 0}
	if diff := cmp.Diff(want, map[string]any{"ready": got.NodesReady, "allocated": got.Allocated, "lists": lists}); diff != "" {
		t.Errorf("status after the changes (-want +got):\n%s", diff)
	}
}
