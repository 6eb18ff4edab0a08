package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/procstat"
	"github.com/flotilla-io/flotilla/test/webapp"
)

// imageTag tags the project images the tests build; nothing pulls them.
// The same agent image is also tagged nextImageTag, a "new version" for
// upgrades.
const imageTag, nextImageTag = "e2e", "e2e-next"

// projectImages packs the flotilla-agent image as `make images` does
// (the static binary TestMain built, packed by the testbin's images tool)
// once per test binary, and returns its tarballs, one per tag.
var projectImages = sync.OnceValues(func() ([]string, error) {
	var tarballs []string
	for _, tag := range []string{imageTag, nextImageTag} {
		tarball, err := packImage("flotilla-agent", tag)
		if err != nil {
			return nil, err
		}
		tarballs = append(tarballs, tarball)
	}
	return tarballs, nil
})

// packImage packs binDir's binary into the image
// ghcr.io/flotilla-io/binary:tag and returns the tarball's path.
func packImage(binary, tag string) (string, error) {
	tarball := filepath.Join(binDir, "images", binary+"-"+tag+".tar")
	pack := exec.Command(filepath.Join(os.Getenv(membercluster.BinDirEnv), "images"), "--binary", filepath.Join(binDir, binary),
		"--repository", "ghcr.io/flotilla-io/"+binary, "--tag", tag, "--out", tarball)
	if out, err := pack.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pack %s:%s: %w\n%s", binary, tag, err, out)
	}
	return tarball, nil
}

// projectImage is the reference of a project image projectImages built.
func projectImage(name string) string { return "ghcr.io/flotilla-io/" + name + ":" + imageTag }

// startRealNodeClusters starts member clusters whose specs ask for real
// nodes, with the project's images and the testbin's web server image
// (package webapp) loaded into each.
func startRealNodeClusters(t *testing.T, specs ...membercluster.ClusterSpec) *membercluster.Environment {
	t.Helper()
	testbinTool(t, "images")
	tarballs, err := projectImages()
	if err != nil {
		t.Fatal(err)
	}
	web := testbinTool(t, webapp.Tarball)
	return membercluster.StartOptionsForTest(t, membercluster.Options{Clusters: specs, Images: append(tarballs, web)})
}

// TestRealNodePodReachesAPIServer: on a cluster with one real node, the
// agent image runs as a real container with a pod IP, and, configured in
// the cluster only by its service account (in-cluster configuration
// through the `kubernetes` Service and kube-proxy), it takes its leader
// election Lease in the member API server.
func TestRealNodePodReachesAPIServer(t *testing.T) {
	started := time.Now()
	env := startRealNodeClusters(t, membercluster.ClusterSpec{Name: "real-1", Nodes: 1, RealNodes: 1})
	c := env.Cluster("real-1")
	t.Logf("cluster with 1 real node and 1 KWOK node ready in %v", time.Since(started).Round(time.Millisecond))
	client, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "flotilla-system", "agent"
	grantClusterAdmin(t, client, ns, name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			ServiceAccountName: name,
			NodeSelector:       map[string]string{membercluster.NodeTypeLabel: membercluster.RealNodeType},
			Containers: []corev1.Container{{
				Name:            "agent",
				Image:           projectImage("flotilla-agent"),
				ImagePullPolicy: corev1.PullNever,
				// Nothing answers at --hub: with a bootstrap token and no
				// certificate yet the agent keeps retrying the join (without
				// one it would exit at once, wanting the hub's CA), and
				// leader election needs only the member API server.
				Args: []string{"--hub=127.0.0.1:9", "--cluster-name=real-1", "--cert-secret=flotilla-agent-certs",
					"--bootstrap-token=abcdef.0123456789abcdef", "--hub-ca-hash=sha256:" + strings.Repeat("0", 64),
					"--leader-elect", "--system-namespace=" + ns, "--http-addr="},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podStarted := time.Now()
	t.Cleanup(func() { logContainerOnFailure(t, client, ns, name, "agent") })
	waitFor(t, 2*time.Minute, "the agent pod running with an IP", func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", fmt.Sprintf("phase %s, IP %q, %s", p.Status.Phase, p.Status.PodIP, containerStates(p))
	})
	t.Logf("pod running %v after its creation", time.Since(podStarted).Round(time.Millisecond))
	// Held and renewed by one holder: an agent that took the Lease and
	// exited (releasing it) would pass a look at the holder alone.
	var holder string
	var acquired time.Time
	waitFor(t, time.Minute, "the agent's leader Lease held and renewed by the pod", func() (bool, string) {
		lease, err := client.CoordinationV1().Leases(ns).Get(t.Context(), "flotilla-agent", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		now := ""
		if lease.Spec.HolderIdentity != nil {
			now = *lease.Spec.HolderIdentity
		}
		if now != holder || !strings.HasPrefix(now, name) || lease.Spec.AcquireTime == nil || lease.Spec.RenewTime == nil {
			holder = now
			return false, "holder " + now
		}
		acquired = lease.Spec.AcquireTime.Time
		return lease.Spec.RenewTime.After(lease.Spec.AcquireTime.Time), "holder " + now + ", not renewed yet"
	})
	t.Logf("Lease taken %v after the pod's creation and renewed since; test wall time so far %v", acquired.Sub(podStarted).Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	logRealNodeMemory(t, c)
}

// grantClusterAdmin makes namespace ns and a service account name in it
// bound to cluster-admin.
func grantClusterAdmin(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := t.Context()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// containerStates says briefly how each container of p is, for waits.
func containerStates(p *corev1.Pod) string {
	var states []string
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			states = append(states, s.Name+": waiting, "+s.State.Waiting.Reason+" "+s.State.Waiting.Message)
		case s.State.Terminated != nil:
			states = append(states, s.Name+": terminated, "+s.State.Terminated.Reason)
		default:
			states = append(states, fmt.Sprintf("%s: running (restarts %d)", s.Name, s.RestartCount))
		}
	}
	return strings.Join(states, "; ")
}

// logRealNodeMemory logs what each real node's kubelet, containerd and
// kube-proxy hold in memory (RSS), the cost of a real node over a KWOK one.
func logRealNodeMemory(t *testing.T, c *membercluster.Cluster) {
	t.Helper()
	for _, n := range c.RealNodes() {
		var total float64
		var parts []string
		for _, pid := range n.Pids {
			rss, _, err := procstat.Memory(pid)
			if err != nil {
				t.Logf("node %s: pid %d: %v", n.Name, pid, err)
				continue
			}
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			parts = append(parts, fmt.Sprintf("%s %.0f MiB", strings.TrimSpace(string(comm)), rss))
			total += rss
		}
		t.Logf("real node %s: %.0f MiB RSS (%s)", n.Name, total, strings.Join(parts, ", "))
	}
}

// logContainerOnFailure logs the end of a container's log (the API server
// fetches it from the real node's kubelet) when the test has failed.
func logContainerOnFailure(t *testing.T, client kubernetes.Interface, ns, pod, container string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	tail := int64(40)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		t.Logf("log of %s/%s container %s: %v", ns, pod, container, err)
		return
	}
	t.Logf("last lines of %s/%s container %s:\n%s", ns, pod, container, out)
}
