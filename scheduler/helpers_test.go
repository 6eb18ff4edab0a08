package scheduler

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

type clusterOption func(*v1alpha1.Cluster)

func newCluster(name string, opts ...clusterOption) *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// labeled sets labels given as key, value, key, value...
func labeled(kv ...string) clusterOption {
	return func(c *v1alpha1.Cluster) {
		c.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			c.Labels[kv[i]] = kv[i+1]
		}
	}
}

func located(provider, region, zone string) clusterOption {
	return func(c *v1alpha1.Cluster) {
		c.Spec.Provider, c.Spec.Region, c.Spec.Zone = provider, region, zone
	}
}

func tainted(key, value string, effect corev1.TaintEffect) clusterOption {
	return func(c *v1alpha1.Cluster) {
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// plainClusters are clusters with nothing but a name.
func plainClusters(names ...string) []*v1alpha1.Cluster {
	cs := make([]*v1alpha1.Cluster, len(names))
	for i, n := range names {
		cs[i] = newCluster(n)
	}
	return cs
}

// fleet is a small, varied set of clusters, deliberately not sorted.
func fleet() []*v1alpha1.Cluster {
	return []*v1alpha1.Cluster{
		newCluster("gcp-eu", located("gcp", "europe-west1", "europe-west1-b"), labeled("env", "prod", "tier", "gold")),
		newCluster("aws-east", located("aws", "us-east-1", "us-east-1a"), labeled("env", "prod")),
		newCluster("onprem", labeled("env", "prod")),
		newCluster("aws-west", located("aws", "us-west-2", "us-west-2b"), labeled("env", "dev")),
	}
}

// targets builds a result from name, replicas pairs.
func targets(pairs ...any) []v1alpha1.TargetCluster {
	var ts []v1alpha1.TargetCluster
	for i := 0; i+1 < len(pairs); i += 2 {
		ts = append(ts, v1alpha1.TargetCluster{Name: pairs[i].(string), Replicas: int32(pairs[i+1].(int))})
	}
	return ts
}

func names(ns ...string) *v1alpha1.ClusterAffinity {
	return &v1alpha1.ClusterAffinity{ClusterNames: ns}
}

func fields(reqs ...corev1.NodeSelectorRequirement) *v1alpha1.FieldSelector {
	return &v1alpha1.FieldSelector{MatchExpressions: reqs}
}

func field(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func divided(rules ...v1alpha1.StaticClusterWeight) *v1alpha1.ReplicaSchedulingStrategy {
	s := &v1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
	}
	if rules != nil {
		s.WeightPreference = &v1alpha1.ClusterPreferences{StaticWeightList: rules}
	}
	return s
}

func weightOf(w int64, clusterNames ...string) v1alpha1.StaticClusterWeight {
	return v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: clusterNames}, Weight: w}
}

func toleration(key string, op corev1.TolerationOperator, effect corev1.TaintEffect) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: op, Effect: effect}
}

func mustSchedule(t *testing.T, in Input) Result {
	t.Helper()
	got, err := Schedule(in)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	return got
}

// resources builds a ResourceList from name, quantity pairs.
func resources(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// summary sets the cluster's resource summary.
func summary(allocatable, allocated corev1.ResourceList) clusterOption {
	return func(c *v1alpha1.Cluster) {
		c.Status.ResourceSummary = &v1alpha1.ResourceSummary{Allocatable: allocatable, Allocated: allocated}
	}
}

// roomFor gives the cluster room for n more replicas that request nothing
// but a pod.
func roomFor(n int) clusterOption {
	return summary(resources("pods", strconv.Itoa(n+10)), resources("pods", "10"))
}

// roomy returns clusters with room for the given replicas: name, n pairs.
func roomy(pairs ...any) []*v1alpha1.Cluster {
	var cs []*v1alpha1.Cluster
	for i := 0; i+1 < len(pairs); i += 2 {
		cs = append(cs, newCluster(pairs[i].(string), roomFor(pairs[i+1].(int))))
	}
	return cs
}

func dynamicWeight() *v1alpha1.ReplicaSchedulingStrategy {
	return &v1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference:          &v1alpha1.ClusterPreferences{DynamicWeight: v1alpha1.DynamicWeightByAvailableReplicas},
	}
}

func aggregated() *v1alpha1.ReplicaSchedulingStrategy {
	return &v1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceAggregated,
	}
}
