package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/test/membercluster"
)

// hubImage packs the flotilla-hub image as `make images` does (the
// static binary TestMain built) once per test binary and returns its
// tarball.
var hubImage = sync.OnceValues(func() (string, error) { return packImage("flotilla-hub", imageTag) })

// The hub's release as an operator installs it on a small cluster without
// a cloud load balancer: agents dial a fixed NodePort (UDP for QUIC, TCP
// for the WebSocket fallback), the data on a local volume.
const (
	hubRelease      = "flotilla-hub"
	hubNamespace    = "flotilla-hub"
	hubPod          = "flotilla-hub-0"
	hubPVC          = "data-" + hubPod
	hubNodePort     = 30743
	localClass      = "local-disk"
	hubVolume       = "flotilla-hub-data"
	hubPVCapacity   = "10Gi" // the chart's persistence.size
	hubDataOwnerGID = 65532  // the chart's fsGroup
)

// TestHubChartOnRealNodes installs charts/flotilla-hub with the Helm SDK
// into a cluster with one real node as an operator would without a cloud
// load balancer: its data on a `local` PersistentVolume (a folder of the
// node, a StorageClass without a provisioner that waits for the first
// consumer), agents on a NodePort, the chart's defaults otherwise
// (non-root, read-only root, probes). The hub runs as a real container and
// turns Ready, its data lands in the node's folder, its API answers through
// its Service from the node; the join command made in its pod installs
// charts/flotilla-agent into a second cluster with a real node, whose agent
// joins across the two clusters' networks through the NodePort. The hub's
// pod deleted, the StatefulSet brings it back on the same volume and CA,
// and the member cluster is Ready again; helm uninstall keeps the volume
// claim, the volume and the data.
func TestHubChartOnRealNodes(t *testing.T) {
	started := time.Now()
	helmrelease := testbinTool(t, "helmrelease")
	kubectlBin := testbinTool(t, "kubectl")
	testbinTool(t, "images")
	agentTarballs, err := projectImages()
	if err != nil {
		t.Fatal(err)
	}
	hubTarball, err := hubImage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("images built in %v", time.Since(started).Round(time.Millisecond))
	env := membercluster.StartOptionsForTest(t, membercluster.Options{
		Clusters: []membercluster.ClusterSpec{{Name: "mgmt", RealNodes: 1}, {Name: "edge-1", RealNodes: 1}},
		Images:   []string{hubTarball, agentTarballs[0]},
	})
	mgmt, edge := env.Cluster("mgmt"), env.Cluster("edge-1")
	if err := membercluster.RouteRealNodes(mgmt, edge); err != nil {
		t.Fatal(err)
	}
	mgmtClient, err := mgmt.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	edgeClient, err := edge.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("two clusters with a real node each ready %v after the test began", time.Since(started).Round(time.Millisecond))

	node := mgmt.RealNodes()[0].Name
	nodeIP := nodeInternalIP(t, mgmtClient, node)
	disk, err := mgmt.RealNodeDir(node, hubVolume)
	if err != nil {
		t.Fatal(err)
	}
	createLocalVolume(t, mgmtClient, node, disk)
	agentAddr := net.JoinHostPort(nodeIP, strconv.Itoa(hubNodePort))
	helm := func(t *testing.T, c *membercluster.Cluster, ns, release, verb string, args ...string) {
		t.Helper()
		helmRelease(t, helmrelease, c, ns, release, "5m", verb, args...)
	}
	t.Cleanup(func() { logContainerOnFailure(t, mgmtClient, hubNamespace, hubPod, "hub") })
	helm(t, mgmt, hubNamespace, hubRelease, "install", "--create-namespace",
		"--set", "image.tag="+imageTag,
		"--set", "persistence.storageClass="+localClass,
		"--set", "agentService.type=NodePort",
		"--set", "agentService.nodePort="+strconv.Itoa(hubNodePort),
		"--set", "agentService.websocketNodePort="+strconv.Itoa(hubNodePort),
		"--set", "hub.agentAddress="+agentAddr,
		filepath.Join("..", "..", "charts", "flotilla-hub"))
	selector := "app.kubernetes.io/instance=" + hubRelease
	var hubKubeconfig string
	kubeconfigDir := t.TempDir()

	t.Run("the hub runs on the real node, its data on the local volume", func(t *testing.T) {
		pods := runningPods(t, mgmtClient, hubNamespace, selector, 1)
		if pods[0].Spec.NodeName != node {
			t.Errorf("the hub runs on %s, want the real node %s", pods[0].Spec.NodeName, node)
		}
		checkHubVolume(t, mgmtClient, disk)
		t.Logf("hub Ready %v after the test began", time.Since(started).Round(time.Millisecond))
	})

	t.Run("its API answers through its Service from the node", func(t *testing.T) {
		hubKubeconfig = serviceKubeconfig(t, mgmtClient, disk, kubeconfigDir)
		out := hubKubectl(t, mgmt, node, kubectlBin, hubKubeconfig, "get", "--raw", "/readyz")
		if strings.TrimSpace(out) != "ok" {
			t.Errorf("the hub API's /readyz: %q", out)
		}
		hubKubectl(t, mgmt, node, kubectlBin, hubKubeconfig, "get", "clusters")
	})
	if hubKubeconfig == "" {
		t.FailNow()
	}

	t.Run("an agent in another cluster joins through the NodePort", func(t *testing.T) {
		// As the chart's NOTES say: the hub's admin kubeconfig names its
		// loopback, so the token is made in its pod.
		out := mustKubectl(t, mgmt.Kubeconfig, "-n", hubNamespace, "exec", hubPod, "--",
			"flotilla-hub", "token", "create", "--data-dir", hubDataDir, "--cluster", "edge-1", "--ttl", "10m")
		install, err := parseHelmInstall(out)
		if err != nil {
			t.Fatalf("flotilla-hub token create printed:\n%s\n%v", out, err)
		}
		if !slices.Contains(install.sets, "hub.address="+agentAddr) {
			t.Fatalf("the printed command sets %q, want hub.address=%s", install.sets, agentAddr)
		}
		helm(t, edge, install.namespace, install.release, "install", install.args("image.tag="+imageTag)...)
		runningPods(t, edgeClient, install.namespace, "app.kubernetes.io/instance="+install.release, 2)
		waitHubClusterReady(t, mgmt, node, kubectlBin, hubKubeconfig, "edge-1", time.Time{})
		t.Logf("edge-1 Ready on the hub %v after the test began", time.Since(started).Round(time.Millisecond))
	})

	t.Run("the hub's pod deleted comes back on the same volume and CA", func(t *testing.T) {
		ca := readFile(t, filepath.Join(disk, "pki", "ca.crt"))
		old, err := mgmtClient.CoreV1().Pods(hubNamespace).Get(t.Context(), hubPod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		logPodPeakMemory(t, old)
		deleted := time.Now()
		if err := mgmtClient.CoreV1().Pods(hubNamespace).Delete(t.Context(), hubPod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The hub stops within seconds of SIGTERM; one that does not exit
		// holds its pod for the chart's 90 s grace period, and no new pod
		// comes before that.
		waitFor(t, 45*time.Second, "a new hub pod (the old one gone after SIGTERM)", func() (bool, string) {
			p, err := mgmtClient.CoreV1().Pods(hubNamespace).Get(t.Context(), hubPod, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.UID != old.UID, "uid " + string(p.UID)
		})
		// The StatefulSet makes the new pod once the old one is gone.
		t.Logf("the old hub pod gone, a new one made %v after the delete", time.Since(deleted).Round(time.Millisecond))
		runningPods(t, mgmtClient, hubNamespace, selector, 1)
		t.Logf("the new hub pod Ready %v after the delete", time.Since(deleted).Round(time.Millisecond))
		checkHubVolume(t, mgmtClient, disk)
		if now := readFile(t, filepath.Join(disk, "pki", "ca.crt")); now != ca {
			t.Error("the hub made a new CA: its agents no longer trust it")
		}
		waitHubClusterReady(t, mgmt, node, kubectlBin, hubKubeconfig, "edge-1", deleted)
		t.Logf("edge-1 Ready and renewing on the new hub pod %v after the delete", time.Since(deleted).Round(time.Millisecond))
	})

	t.Run("helm uninstall keeps the claim, the volume and the data", func(t *testing.T) {
		if p, err := mgmtClient.CoreV1().Pods(hubNamespace).Get(t.Context(), hubPod, metav1.GetOptions{}); err == nil {
			logPodPeakMemory(t, p)
		}
		helm(t, mgmt, hubNamespace, hubRelease, "uninstall")
		waitFor(t, 2*time.Minute, "the hub's StatefulSet and pod gone", func() (bool, string) {
			pods, err := mgmtClient.CoreV1().Pods(hubNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, err.Error()
			}
			_, err = mgmtClient.AppsV1().StatefulSets(hubNamespace).Get(t.Context(), hubRelease, metav1.GetOptions{})
			return len(pods.Items) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d pods, StatefulSet: %v", len(pods.Items), err)
		})
		// A StatefulSet's claims are not the release's, and its default
		// persistentVolumeClaimRetentionPolicy (whenDeleted: Retain) keeps
		// them: the claim stays Bound to the volume, the data on the node.
		checkHubVolume(t, mgmtClient, disk)
	})
	t.Logf("test wall time %v", time.Since(started).Round(time.Millisecond))
	logRealNodeMemory(t, mgmt)
	logRealNodeMemory(t, edge)
}

// nodeInternalIP is the InternalIP address of node.
func nodeInternalIP(t *testing.T, client kubernetes.Interface, node string) string {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP: %+v", node, n.Status.Addresses)
	return ""
}

// createLocalVolume makes a StorageClass without a provisioner that binds
// at the first consumer's scheduling, and a `local` PersistentVolume of
// it on dir, a folder of node, kept when released.
func createLocalVolume(t *testing.T, client kubernetes.Interface, node, dir string) {
	t.Helper()
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: localClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &wait,
	}
	if _, err := client.StorageV1().StorageClasses().Create(t.Context(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: hubVolume},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(hubPVCapacity)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              localClass,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkHubVolume: the hub's claim is Bound to the local volume, and the
// hub's CA and admin kubeconfig are in its folder on the node, made by the
// hub's user or group (the chart's fsGroup).
func checkHubVolume(t *testing.T, client kubernetes.Interface, dir string) {
	t.Helper()
	pvc, err := client.CoreV1().PersistentVolumeClaims(hubNamespace).Get(t.Context(), hubPVC, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub's volume claim: %v", err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != hubVolume {
		t.Errorf("claim %s is %s on volume %q, want Bound to %s", hubPVC, pvc.Status.Phase, pvc.Spec.VolumeName, hubVolume)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(t.Context(), hubVolume, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != hubPVC {
		t.Errorf("volume %s is %s, claimed by %+v; want Bound to %s", hubVolume, pv.Status.Phase, pv.Spec.ClaimRef, hubPVC)
	}
	for _, f := range []string{"pki/ca.crt", "admin.kubeconfig"} {
		info, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("the hub's %s on the node's folder: %v", f, err)
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Gid != hubDataOwnerGID {
			t.Errorf("%s belongs to %d:%d, want group %d", f, st.Uid, st.Gid, hubDataOwnerGID)
		}
	}
}

// serviceKubeconfig is the hub's admin kubeconfig, read from its folder on
// the node, for the hub's API Service's ClusterIP (its certificate names
// the Service, not the address).
func serviceKubeconfig(t *testing.T, client kubernetes.Interface, dir, out string) string {
	t.Helper()
	svc, err := client.CoreV1().Services(hubNamespace).Get(t.Context(), hubRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
		c.TLSServerName = hubRelease + "." + hubNamespace + ".svc"
	}
	path := filepath.Join(out, "hub.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// nodeKubectl runs kubectl on node of c (through the node's kube-proxy).
func nodeKubectl(t *testing.T, c *membercluster.Cluster, node, kubectlBin, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd, err := c.RealNodeCommand(t.Context(), node, kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "10s"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func hubKubectl(t *testing.T, c *membercluster.Cluster, node, kubectlBin, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := nodeKubectl(t, c, node, kubectlBin, kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl %s on %s: %v\n%s", strings.Join(args, " "), node, err, out)
	}
	return out
}

// waitHubClusterReady waits until the hub shows cluster Ready with a lease
// renewed after since.
func waitHubClusterReady(t *testing.T, c *membercluster.Cluster, node, kubectlBin, kubeconfig, cluster string, since time.Time) {
	t.Helper()
	waitFor(t, 2*time.Minute, cluster+" Ready on the chart's hub", func() (bool, string) {
		ready, err := nodeKubectl(t, c, node, kubectlBin, kubeconfig, "get", "cluster", cluster, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil || ready != "True" {
			return false, "Ready " + ready
		}
		renewed, err := nodeKubectl(t, c, node, kubectlBin, kubeconfig, "-n", "flotilla-cluster-lease", "get", "lease", cluster, "-o", "jsonpath={.spec.renewTime}")
		if err != nil {
			return false, renewed
		}
		at, err := time.Parse(time.RFC3339Nano, renewed)
		return err == nil && at.After(since), "renewed " + renewed
	})
}

// logPodPeakMemory logs the most memory pod's cgroup has held (cgroup v1
// memory.max_usage_in_bytes, under its real node's cgroup root), or why
// it cannot.
func logPodPeakMemory(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory/*/kubepods*/*/pod"+string(pod.UID), "memory.max_usage_in_bytes"))
	if len(files) != 1 {
		t.Logf("pod %s: no single memory cgroup (%q)", pod.Name, files)
		return
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Logf("pod %s: %v", pod.Name, err)
		return
	}
	peak, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Logf("pod %s: %v", pod.Name, err)
		return
	}
	t.Logf("pod %s: peak memory %.0f MiB (its cgroup's max_usage_in_bytes: page cache included)", pod.Name, peak/(1<<20))
}
