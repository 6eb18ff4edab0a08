package membercluster

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestRealNodes starts a cluster with a real node beside a KWOK node: the
// node registers Ready with its label, a pod on it runs with an address of
// the node's pod range, the `kubernetes` Service points at the API server's
// address on the nodes' bridge, and Stop leaves no process, namespace,
// bridge, cgroup, mount or state folder behind.
func TestRealNodes(t *testing.T) {
	env, err := Start(t.Context(), Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "real", Nodes: 1, RealNodes: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c := env.Cluster("real")
	client := clientset(t, c)
	nodes := c.RealNodes()
	if len(nodes) != 1 || len(nodes[0].Pids) != 3 {
		t.Fatalf("RealNodes() = %+v, want one node with 3 daemons", nodes)
	}
	node, err := client.CoreV1().Nodes().Get(t.Context(), nodes[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Labels[NodeTypeLabel]; got != RealNodeType {
		t.Errorf("node %s label %s = %q, want %q", node.Name, NodeTypeLabel, got, RealNodeType)
	}

	t.Run("a pod runs on the real node", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{NodeTypeLabel: RealNodeType},
				Containers:   []corev1.Container{{Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever}},
			},
		}
		if _, err := client.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := waitPodRunning(t, c, "default", "sleeper")
		ip, err := netip.ParseAddr(got.Status.PodIP)
		if err != nil || !c.net.podSubnet(1).Contains(ip) {
			t.Errorf("pod IP %q, want one in %s", got.Status.PodIP, c.net.podSubnet(1))
		}
	})

	t.Run("the kubernetes Service points at the bridge", func(t *testing.T) {
		slice, err := client.DiscoveryV1().EndpointSlices("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ep := range slice.Endpoints {
			got = append(got, ep.Addresses...)
		}
		if diff := cmp.Diff([]string{c.net.hostAddr().String()}, got); diff != "" {
			t.Errorf("kubernetes EndpointSlice addresses (-want +got):\n%s", diff)
		}
	})

	t.Run("teardown leaves nothing behind", func(t *testing.T) {
		id := c.net.id
		stopLeavesNothing(t, env)
		for _, dir := range []string{"/run/netns", realStateRoot, filepath.Join(cgroupRoot, "memory"), filepath.Join(cgroupRoot, "cpu")} {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), id) {
					t.Errorf("%s/%s left behind", dir, e.Name())
				}
			}
		}
		if _, err := os.Stat("/sys/class/net/" + c.net.bridge); err == nil {
			t.Errorf("bridge %s left behind", c.net.bridge)
		}
		_ = eachMount(func(mountPoint, _ string) {
			if strings.Contains(mountPoint, id) {
				t.Errorf("mount %s left behind", mountPoint)
			}
		})
	})
}

// waitPodRunning waits until the pod runs with an IP and returns it.
func waitPodRunning(t *testing.T, c *Cluster, namespace, name string) *corev1.Pod {
	t.Helper()
	client := clientset(t, c)
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), readyPollPeriod, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not running: %v; status %+v", namespace, name, err, pod.Status)
	}
	return pod
}
