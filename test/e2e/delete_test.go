package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/process"
)

// TestDeleteCluster deletes a member cluster running the seed example's
// nginx with kubectl: the Cluster is held by its finalizer and tainted
// terminating:NoExecute, the workload moves to the other cluster, then
// the Cluster goes with its lease, and its agent is refused.
func TestDeleteCluster(t *testing.T) {
	f := startFleet(t, 2, failoverFlags...)
	f.apply("seed.yaml", nginxYAML+"---\n"+policyYAML)
	f.waitDeployments(map[string]int32{"member-1": 1, "member-2": 2}, "nginx:1.27")
	if c := f.hub.cluster(t, "member-1"); c == nil || !strings.Contains(strings.Join(c.Finalizers, ","), v1alpha1.ClusterFinalizer) {
		t.Fatalf("member-1 has no %s finalizer: %v", v1alpha1.ClusterFinalizer, c)
	}

	mustKubectl(t, f.hub.kubeconfig(), "delete", "cluster", "member-1", "--wait=false")
	waitFor(t, 30*time.Second, "member-1 tainted terminating:NoExecute", func() (bool, string) {
		c := f.hub.cluster(t, "member-1")
		return c != nil && hasTaint(c, v1alpha1.TaintClusterTerminating, corev1.TaintEffectNoExecute), describe(c)
	})
	f.waitDeployments(map[string]int32{"member-2": 3}, "nginx:1.27")
	waitFor(t, 60*time.Second, "the Cluster member-1 gone", func() (bool, string) {
		c := f.hub.cluster(t, "member-1")
		if c == nil {
			return true, ""
		}
		b := f.binding("web", "nginx-deployment")
		return false, fmt.Sprintf("%s; clusters %v, tasks %v", describe(c), b.Spec.Clusters, b.Spec.EvictingClusters())
	})
	if l := f.hub.lease(t, "member-1"); l != nil {
		t.Errorf("member-1's lease is still there")
	}
	b := f.binding("web", "nginx-deployment")
	if len(b.Spec.Clusters) != 1 || b.Spec.Clusters[0].Name != "member-2" || len(b.Spec.GracefulEvictionTasks) != 0 {
		t.Errorf("binding after member-1 went: clusters %v, tasks %v", b.Spec.Clusters, b.Spec.GracefulEvictionTasks)
	}
	waitFor(t, 30*time.Second, "member-1's agent refused", func() (bool, string) {
		log, _ := os.ReadFile(f.agents["member-1"].LogPath)
		return strings.Contains(string(log), "its certificates are revoked") || strings.Contains(string(log), "not registered"),
			process.TailFile(f.agents["member-1"].LogPath, 5)
	})
}
