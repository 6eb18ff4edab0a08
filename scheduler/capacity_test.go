package scheduler

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func TestAvailableReplicas(t *testing.T) {
	nodes := resources("pods", "110", "cpu", "4", "memory", "8Gi")
	requests := func(kv ...string) *v1alpha1.ReplicaRequirements {
		return &v1alpha1.ReplicaRequirements{ResourceRequest: resources(kv...)}
	}
	tests := []struct {
		name    string
		cluster *v1alpha1.Cluster
		req     *v1alpha1.ReplicaRequirements
		want    int64
	}{
		{"no summary", newCluster("a"), requests("cpu", "1"), 0},
		{"no summary, no requirements", newCluster("a"), nil, 0},
		{"nil cluster", nil, nil, 0},
		{"no requirements: free pods", newCluster("a", summary(nodes, resources("pods", "10"))), nil, 100},
		{"empty requirements: free pods", newCluster("a", summary(nodes, resources("pods", "10"))), requests(), 100},
		{"nothing allocated", newCluster("a", summary(nodes, nil)), nil, 110},
		// 4000m − 1500m = 2500m, 5 of 500m.
		{"cpu limits", newCluster("a", summary(nodes, resources("cpu", "1500m", "pods", "3"))), requests("cpu", "500m"), 5},
		{"cpu rounds down", newCluster("a", summary(nodes, resources("cpu", "1500m"))), requests("cpu", "600m"), 4},
		// 6Gi free, 1.5Gi each.
		{"memory limits", newCluster("a", summary(nodes, resources("cpu", "1", "memory", "2Gi"))), requests("cpu", "100m", "memory", "1536Mi"), 4},
		{"memory in bytes", newCluster("a", summary(resources("pods", "10", "memory", "1000"), nil)), requests("memory", "300"), 3},
		{"pods limit", newCluster("a", summary(nodes, resources("pods", "107"))), requests("cpu", "1m", "memory", "1Ki"), 3},
		{"the smallest of all", newCluster("a", summary(nodes, resources("pods", "100", "cpu", "3", "memory", "4Gi"))),
			requests("cpu", "200m", "memory", "1Gi"), 4},
		{"resource not listed", newCluster("a", summary(nodes, nil)), requests("cpu", "1", "nvidia.com/gpu", "1"), 0},
		{"extended resource", newCluster("a", summary(resources("pods", "110", "nvidia.com/gpu", "8"), resources("nvidia.com/gpu", "3"))),
			requests("nvidia.com/gpu", "2"), 2},
		{"pods not listed", newCluster("a", summary(resources("cpu", "4"), nil)), requests("cpu", "1"), 0},
		{"zero request ignored", newCluster("a", summary(nodes, resources("pods", "10"))), requests("cpu", "0", "nvidia.com/gpu", "0"), 100},
		{"pods request ignored", newCluster("a", summary(nodes, resources("pods", "10"))), requests("pods", "5"), 100},
		{"allocated above allocatable", newCluster("a", summary(nodes, resources("cpu", "5"))), requests("cpu", "100m"), 0},
		{"pods over-allocated", newCluster("a", summary(nodes, resources("pods", "200"))), nil, 0},
		{"negative allocatable", newCluster("a", summary(resources("pods", "-3"), nil)), nil, 0},
		// 1e30 cores would overflow millicores: saturated, pods decide.
		{"huge cpu", newCluster("a", summary(resources("pods", "7", "cpu", "1e30"), nil)), requests("cpu", "1"), 7},
		{"huge request", newCluster("a", summary(resources("pods", "7", "cpu", "1e30", "memory", "1e30"), nil)), requests("memory", "1e25"), 7},
		{"request above all", newCluster("a", summary(nodes, nil)), requests("memory", "1e30"), 0},
		{"huge free, small request", newCluster("a", summary(resources("pods", "1e30", "cpu", "1e30"), nil)), requests("cpu", "1"), math.MaxInt64},
		{"huge free and request, exact", newCluster("a", summary(resources("pods", "1e30", "cpu", "1e30"), resources("cpu", "1e29"))), requests("cpu", "3e26"), 3000},
		{"huge milli free", newCluster("a", summary(resources("pods", "1e30", "cpu", "1e17"), nil)), requests("cpu", "250m"), 4e17},
		{"fractional free", newCluster("a", summary(resources("pods", "90", "cpu", "2.5"), resources("cpu", "0.3"))), requests("cpu", "0.2"), 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *v1alpha1.Cluster
			if tt.cluster != nil {
				before = tt.cluster.DeepCopy()
			}
			if got := AvailableReplicas(tt.cluster, tt.req); got != tt.want {
				t.Errorf("AvailableReplicas = %d, want %d", got, tt.want)
			}
			if !equality.Semantic.DeepEqual(before, tt.cluster) {
				t.Error("AvailableReplicas changed the cluster")
			}
		})
	}
}
