package scheduler

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// benchFleet is 1,000 clusters over 3 providers and 6 regions, each with
// room for a few to a few dozen replicas of benchRequirements; one in ten
// is tainted unreachable.
func benchFleet() []*v1alpha1.Cluster {
	var clusters []*v1alpha1.Cluster
	for i := range 1000 {
		c := newCluster(fmt.Sprintf("member-%04d", (i*7919)%1000), // not in name order
			located([]string{"aws", "gcp", "azure"}[i%3], fmt.Sprintf("region-%d", i%6), ""),
			labeled("env", []string{"prod", "dev"}[i%2], "team", fmt.Sprintf("t%d", i%10)))
		c.Status.ResourceSummary = &v1alpha1.ResourceSummary{
			Allocatable: resources("pods", "1100", "cpu", fmt.Sprint(16+i%48), "memory", fmt.Sprintf("%dGi", 64+i%128)),
			Allocated:   resources("pods", fmt.Sprint(i%1000), "cpu", fmt.Sprintf("%dm", 8000+(i*37)%8000), "memory", "32Gi"),
		}
		if i%10 == 0 {
			c.Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}}
		}
		clusters = append(clusters, c)
	}
	return clusters
}

func BenchmarkSchedule(b *testing.B) {
	clusters := benchFleet()
	var hundred []string
	for i := range 100 {
		hundred = append(hundred, fmt.Sprintf("member-%04d", i*10+1))
	}
	prod := v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}
	placements := map[string]*v1alpha1.Placement{
		"Divided": {
			ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"member-0003"}},
			ReplicaScheduling: divided(
				v1alpha1.StaticClusterWeight{TargetCluster: prod, Weight: 3},
				v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{FieldSelector: fields(field("provider", corev1.NodeSelectorOpIn, "aws", "gcp"))}, Weight: 2},
				v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: hundred}, Weight: 5},
			),
		},
		"Divided/dynamic": {
			ClusterAffinity:   &v1alpha1.ClusterAffinity{Exclude: []string{"member-0003"}},
			ReplicaScheduling: dynamicWeight(),
		},
		"Aggregated": {ReplicaScheduling: aggregated()},
		"Duplicated": {
			ClusterAffinity:    &prod,
			ClusterTolerations: []corev1.Toleration{{Key: "cluster.karmada.io/unreachable", Operator: corev1.TolerationOpExists}},
		},
	}
	requirements := &v1alpha1.ReplicaRequirements{ResourceRequest: resources("cpu", "500m", "memory", "1Gi")}
	for _, name := range []string{"Divided", "Divided/dynamic", "Aggregated", "Duplicated"} {
		b.Run(name, func(b *testing.B) {
			in := Input{Placement: placements[name], Replicas: 5000, Clusters: clusters, Requirements: requirements}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Schedule(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
