package scheduler

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// benchFleet is 1,000 clusters over 3 providers and the given number of
// regions, each with room for a few to a few dozen replicas of
// benchRequirements; one in ten is tainted unreachable.
func benchFleet(regions int) []*v1alpha1.Cluster {
	var clusters []*v1alpha1.Cluster
	for i := range 1000 {
		c := newCluster(fmt.Sprintf("member-%04d", (i*7919)%1000), // not in name order
			located([]string{"aws", "gcp", "azure"}[i%3], fmt.Sprintf("region-%02d", i%regions), ""),
			labeled("env", []string{"prod", "dev"}[i%2], "team", fmt.Sprintf("t%d", i%10)))
		c.Status.ResourceSummary = &v1alpha1.ResourceSummary{
			Allocatable: resources("pods", "1100", "cpu", fmt.Sprint(16+i%48), "memory", fmt.Sprintf("%dGi", 64+i%128)),
			Allocated:   resources("pods", fmt.Sprint(i%1000), "cpu", fmt.Sprintf("%dm", 8000+(i*37)%8000), "memory", "32Gi"),
		}
		c.Status.APIEnablements = benchAPIs
		if i%10 == 0 {
			c.Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}}
		}
		clusters = append(clusters, c)
	}
	return clusters
}

// benchAPIs is what a member cluster serves, as its agent reports it: 30
// group versions of 8 kinds each; apps/v1 Deployment is the last.
var benchAPIs = func() []v1alpha1.APIEnablement {
	var apis []v1alpha1.APIEnablement
	for g := range 30 {
		gv := v1alpha1.APIEnablement{GroupVersion: fmt.Sprintf("group%02d.example.com/v1", g)}
		if g == 29 {
			gv.GroupVersion = "apps/v1"
		}
		for k := range 8 {
			kind := fmt.Sprintf("Kind%d", k)
			if g == 29 && k == 7 {
				kind = "Deployment"
			}
			gv.Resources = append(gv.Resources, v1alpha1.APIResource{Name: strings.ToLower(kind) + "s", Kind: kind})
		}
		apis = append(apis, gv)
	}
	return apis
}()

func BenchmarkSchedule(b *testing.B) {
	clusters := benchFleet(6)
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

// BenchmarkScheduleBindings schedules 10,000 Deployment bindings over
// 1,000 clusters in 20 regions, cycling through four placements
// (Duplicated on prod, static weights, dynamic weights, and a spread over
// 2 to 4 regions with dynamic weights), with replicas from 1 to 64 and,
// for one binding in three, a previous result to keep: "alone" as each
// schedule on its own, "fleet" with one Fleet shared by all, as the hub
// does. It reports bindings scheduled per second and allocations per
// schedule.
func BenchmarkScheduleBindings(b *testing.B) {
	const bindings = 10000
	clusters := benchFleet(20)
	prod := v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}
	placements := []*v1alpha1.Placement{
		{ClusterAffinity: &prod},
		{ReplicaScheduling: divided(
			v1alpha1.StaticClusterWeight{TargetCluster: prod, Weight: 3},
			v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{FieldSelector: fields(field("provider", corev1.NodeSelectorOpIn, "aws"))}, Weight: 1},
		)},
		{ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"member-0003"}}, ReplicaScheduling: dynamicWeight()},
		{SpreadConstraints: []v1alpha1.SpreadConstraint{byRegion(2, 4)}, ReplicaScheduling: dynamicWeight()},
	}
	requirements := &v1alpha1.ReplicaRequirements{ResourceRequest: resources("cpu", "500m", "memory", "1Gi")}
	ins := make([]Input, bindings)
	for i := range ins {
		ins[i] = Input{Placement: placements[i%len(placements)], Replicas: int32(1 + i%64), Clusters: clusters, Requirements: requirements,
			APIVersion: "apps/v1", Kind: "Deployment"}
		if i%3 == 0 {
			ins[i].Previous = targets(fmt.Sprintf("member-%04d", i%1000), 1, fmt.Sprintf("member-%04d", (i*31)%1000), 1)
		}
	}
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "alone", true: "fleet"}[shared]
		b.Run(name, func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			for b.Loop() {
				var fleet *Fleet
				if shared {
					// Built once per pass, as the hub builds one per change
					// of its clusters.
					var err error
					if fleet, err = NewFleet(clusters); err != nil {
						b.Fatal(err)
					}
				}
				for i := range ins {
					in := ins[i]
					in.Fleet = fleet
					if _, err := Schedule(in); err != nil {
						b.Fatalf("binding %d: %v", i, err)
					}
				}
			}
			runtime.ReadMemStats(&after)
			schedules := float64(b.N) * bindings
			b.ReportMetric(schedules/b.Elapsed().Seconds(), "bindings/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/schedules, "allocs/schedule")
		})
	}
}
