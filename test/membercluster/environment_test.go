package membercluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/test/freeport"
)

// TestMemberClusters runs two real clusters through what later tests rely on:
// configured fake nodes, a Deployment applied with server-side apply becoming
// Available, an API server stopped and started again with its data, and a
// teardown that leaves no process or port behind.
func TestMemberClusters(t *testing.T) {
	specs := []ClusterSpec{
		{Name: "alpha"},
		{Name: "beta", Nodes: 2, NodeCPU: "4", NodeMemory: "16Gi", NodePods: "50"},
	}
	env := StartForTest(t, specs...)
	alpha, beta := env.Cluster("alpha"), env.Cluster("beta")

	t.Run("version is stamped", func(t *testing.T) {
		info, err := clientset(t, alpha).Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if info.GitVersion != "v1.37.2" {
			t.Errorf("GitVersion = %q, want v1.37.2", info.GitVersion)
		}
	})

	t.Run("fake nodes have the configured resources", func(t *testing.T) {
		for _, spec := range specs {
			spec = spec.withDefaults()
			nodes, err := clientset(t, env.Cluster(spec.Name)).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != spec.Nodes {
				t.Fatalf("%s: %d nodes, want %d", spec.Name, len(nodes.Items), spec.Nodes)
			}
			want := map[string]string{"cpu": spec.NodeCPU, "memory": spec.NodeMemory, "pods": spec.NodePods}
			for _, node := range nodes.Items {
				got := map[string]string{}
				for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
					q := node.Status.Allocatable[name]
					got[string(name)] = q.String()
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s allocatable (-want +got):\n%s", node.Name, diff)
				}
			}
		}
	})

	t.Run("server-side applied Deployment becomes Available", func(t *testing.T) {
		for _, c := range env.Clusters() {
			applyDeployment(t, c, "web", 3)
		}
		for _, c := range env.Clusters() {
			waitDeploymentAvailable(t, c, "web", 3)
		}
	})

	t.Run("API server stop and start keeps data", func(t *testing.T) {
		client := clientset(t, beta)
		marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker", Namespace: "default"}, Data: map[string]string{"kept": "yes"}}
		if _, err := client.CoreV1().ConfigMaps("default").Create(t.Context(), marker, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := beta.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		_, err := client.CoreV1().ConfigMaps("default").Get(t.Context(), "marker", metav1.GetOptions{})
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("get with API server stopped: err = %v, want connection refused", err)
		}
		if _, err := clientset(t, alpha).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("the other cluster must stay reachable: %v", err)
		}
		if err := beta.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, err := client.CoreV1().ConfigMaps("default").Get(t.Context(), "marker", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(marker.Data, got.Data); diff != "" {
			t.Errorf("ConfigMap data after restart (-want +got):\n%s", diff)
		}
		waitDeploymentAvailable(t, beta, "web", 3)
	})

	t.Run("teardown leaves nothing behind", func(t *testing.T) {
		if pids, _ := env.Resources(); len(pids) != 1+4*len(specs) {
			t.Fatalf("%d processes running before stop, want %d", len(pids), 1+4*len(specs))
		}
		stopLeavesNothing(t, env)
	})
}

// TestAPIServerOnly: with APIServerOnly a cluster is etcd and kube-apiserver
// alone (no other binary needed), with the extra API server flags, and
// teardown leaves nothing behind.
func TestAPIServerOnly(t *testing.T) {
	env, err := Start(t.Context(), Options{
		Dir:           t.TempDir(),
		BinDir:        linkedBinDir(t, apiServerBinaries),
		Clusters:      []ClusterSpec{{Name: "bare"}},
		APIServerOnly: true,
		APIServerArgs: []string{"--anonymous-auth=false"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Stop() })
	bare := env.Cluster("bare")
	client := clientset(t, bare)
	nodes, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Errorf("%d nodes, want none", len(nodes.Items))
	}
	cfg, err := bare.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.CertData, cfg.KeyData = nil, nil
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("anonymous list with --anonymous-auth=false: err = %v, want Unauthorized", err)
	}

	if pids, _ := env.Resources(); len(pids) != 2 {
		t.Fatalf("%d processes running, want etcd and kube-apiserver", len(pids))
	}
	stopLeavesNothing(t, env)
}

// stopLeavesNothing stops env and checks that none of its processes and
// ports are left.
func stopLeavesNothing(t *testing.T, env *Environment) {
	t.Helper()
	pids, ports := env.Resources()
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (kill 0: %v)", pid, err)
		}
	}
	for _, port := range ports {
		if freeport.TCPInUse(port) {
			t.Errorf("port %d still in use after Stop", port)
		}
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no dir", Options{Clusters: Specs(1)}, "Dir is empty"},
		{"no clusters", Options{Dir: t.TempDir()}, "no clusters"},
		{"bad name", Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "Not_A_Label"}}}, `clusters[0].name "Not_A_Label"`},
		{"duplicate", Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "a"}, {Name: "a"}}}, "duplicate"},
		{"negative nodes", Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "a", Nodes: -1}}}, "nodes -1"},
		{"bad cpu", Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "a", NodeCPU: "lots"}}}, `nodeCPU "lots"`},
		{"zero memory", Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "a", NodeMemory: "0"}}}, "positive"},
		{"missing binaries", Options{Dir: t.TempDir(), BinDir: t.TempDir(), Clusters: Specs(1)}, "make testbin"},
		{"missing API server binaries", Options{Dir: t.TempDir(), BinDir: t.TempDir(), Clusters: Specs(1), APIServerOnly: true}, "make testbin"},
		{"too many real nodes", Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "a", RealNodes: maxRealNodes + 1}}}, "realNodes 17: want at most 16"},
		{"no nodes at all", Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "a", Nodes: -1, RealNodes: 1}}}, "want at least 1 node"},
		{"real nodes without kubelet", Options{Dir: t.TempDir(), BinDir: linkedBinDir(t, allBinaries), Clusters: []ClusterSpec{{Name: "a", RealNodes: 1}}}, "kubelet in the testbin"},
		{"real nodes with a missing image", Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "a", RealNodes: 1}}, Images: []string{"/nonexistent/app.tar"}}, "image tarball /nonexistent/app.tar"},
		{"node status period under a second", Options{Dir: t.TempDir(), Clusters: Specs(1), NodeStatusPeriod: time.Millisecond}, "NodeStatusPeriod 1ms"},
		{"stages without a heartbeat", Options{Dir: t.TempDir(), BinDir: binDirWithStages(t, "---\nkind: Stage\nmetadata: {name: other}\n"), Clusters: Specs(1), NodeStatusPeriod: time.Minute}, "no stage named node-heartbeat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := Start(t.Context(), tt.opts)
			if err == nil {
				env.Stop()
				t.Fatal("Start succeeded, want error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

// TestKubeletLikeHeartbeat: with NodeStatusPeriod, KWOK accepts the
// rewritten stages and renews each node's Lease, as a kubelet does.
func TestKubeletLikeHeartbeat(t *testing.T) {
	env, err := Start(t.Context(), Options{Dir: t.TempDir(), Clusters: []ClusterSpec{{Name: "leased", Nodes: 1}}, NodeStatusPeriod: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Stop() })
	client := clientset(t, env.Cluster("leased"))
	nodes, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes: %v, %v", nodes, err)
	}
	name := nodes.Items[0].Name
	var first time.Time
	// KWOK renews every quarter of the 40 s duration.
	err = wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil {
			return false, nil
		}
		if first.IsZero() {
			first = lease.Spec.RenewTime.Time
			return false, nil
		}
		return lease.Spec.RenewTime.After(first), nil
	})
	if err != nil {
		t.Fatalf("node %s's Lease in %s not renewed (first renewal seen: %v): %v", name, corev1.NamespaceNodeLease, first, err)
	}
}

// binDirWithStages links the test binaries into a new folder with stages
// as its KWOK stage file.
func binDirWithStages(t *testing.T, stages string) string {
	t.Helper()
	dir := linkedBinDir(t, slices.DeleteFunc(slices.Clone(allBinaries), func(name string) bool { return name == stagesFile }))
	if err := os.WriteFile(filepath.Join(dir, stagesFile), []byte(stages), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// linkedBinDir links the named test binaries into a new folder.
func linkedBinDir(t *testing.T, names []string) string {
	t.Helper()
	found, err := FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range names {
		if err := os.Symlink(filepath.Join(found, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func clientset(t *testing.T, c *Cluster) *kubernetes.Clientset {
	t.Helper()
	client, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return client
}

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// applyDeployment server-side applies a small Deployment through the dynamic
// client, the way the agent applies Work.
func applyDeployment(t *testing.T, c *Cluster, name string, replicas int64) {
	t.Helper()
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]any{"app": name}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "web", "image": "registry.k8s.io/pause:3.10",
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}},
				}}},
			},
		},
	}}
	_, err = client.Resource(deploymentsGVR).Namespace("default").Apply(t.Context(), name, obj, metav1.ApplyOptions{FieldManager: "flotilla-test", Force: true})
	if err != nil {
		t.Fatalf("apply deployment %s to %s: %v", name, c.Name, err)
	}
}

func waitDeploymentAvailable(t *testing.T, c *Cluster, name string, replicas int32) {
	t.Helper()
	client := clientset(t, c)
	var last *appsv1.Deployment
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, err
		}
		if err != nil {
			return false, nil // the API server may be coming back
		}
		last = d
		return d.Status.AvailableReplicas == replicas && deploymentCondition(d, appsv1.DeploymentAvailable) == corev1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("deployment %s on %s not Available: %v; last status: %+v", name, c.Name, err, statusOf(last))
	}
}

func deploymentCondition(d *appsv1.Deployment, kind appsv1.DeploymentConditionType) corev1.ConditionStatus {
	for _, cond := range d.Status.Conditions {
		if cond.Type == kind {
			return cond.Status
		}
	}
	return corev1.ConditionUnknown
}

func statusOf(d *appsv1.Deployment) any {
	if d == nil {
		return nil
	}
	return d.Status
}
