package clusterstatus

import (
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/test/membercluster"
)

// TestCapacityWithAPIServer runs the watches as the agent does (protobuf,
// the API server's watch-list and field selector) against a real API
// server, and compares the sums with a list-based sum over what the API
// server lists, as objects are created, bound, finished and deleted.
func TestCapacityWithAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real API server")
	}
	env, err := membercluster.Start(t.Context(), membercluster.Options{Dir: t.TempDir(), APIServerOnly: true,
		Clusters: membercluster.Specs(1), Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("start API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop API server: %v", err)
		}
	})
	rc, err := clientcmd.BuildConfigFromFlags("", env.Clusters()[0].Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	watchClient, err := NewWatchClient(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Without a controller-manager, pods need their service account made.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*corev1.Node{node("a", true, "cpu", "8", "memory", "32Gi", "pods", "110"), node("b", false, "cpu", "4", "memory", "16Gi", "pods", "110")} {
		created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = n.Status
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createPod(t, client, pod("web", "a", corev1.PodRunning, "cpu", "500m", "memory", "1Gi"))
	createPod(t, client, pod("queued", "", corev1.PodPending, "cpu", "2"))

	caps, changes := runCapacity(t, watchClient)
	check := func(when string) {
		t.Helper()
		want := listedSummary(t, client)
		waitCapacity(t, caps, changes, when, func(s capacitySnapshot) bool {
			return s.nodesSynced && s.podsSynced && cmp.Equal(want, snapshotSummary(s))
		})
	}
	check("the first list")

	createPod(t, client, pod("job", "b", corev1.PodRunning, "cpu", "1", "memory", "2Gi"))
	check("a new pod")
	setPhase(t, client, "job", corev1.PodSucceeded)
	check("a finished pod")
	if err := client.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("a deleted pod")
	if err := client.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("a deleted node")
}

func createPod(t *testing.T, client kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Name, p.Spec.Containers[i].Image = "app", "registry.example/app:1"
	}
	created, err := client.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != "" {
		created.Status.Phase = p.Status.Phase
		if _, err := client.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func setPhase(t *testing.T, client kubernetes.Interface, name string, phase corev1.PodPhase) {
	t.Helper()
	p, err := client.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = phase
	if _, err := client.CoreV1().Pods("default").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// listedSummary is the list-based sum over what the API server lists now.
func listedSummary(t *testing.T, client kubernetes.Interface) map[string]any {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ns []*corev1.Node
	for i := range nodes.Items {
		ns = append(ns, &nodes.Items[i])
	}
	var ps []*corev1.Pod
	for i := range pods.Items {
		ps = append(ps, &pods.Items[i])
	}
	return listSummary(ns, ps)
}
