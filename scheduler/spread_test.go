package scheduler

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// regional returns a cluster in region with room for n replicas.
func regional(name, region string, n int, opts ...clusterOption) *v1alpha1.Cluster {
	return newCluster(name, append([]clusterOption{located("", region, ""), roomFor(n)}, opts...)...)
}

// regions is eu (room 5+5), us (room 20), ap (room 8+8) and a cluster
// without a region, deliberately not sorted.
func regions() []*v1alpha1.Cluster {
	return []*v1alpha1.Cluster{
		regional("us-1", "us", 20),
		regional("eu-2", "eu", 5),
		regional("ap-1", "ap", 8),
		regional("none", "", 50),
		regional("eu-1", "eu", 5),
		regional("ap-2", "ap", 8),
	}
}

func byRegion(minGroups, maxGroups int) v1alpha1.SpreadConstraint {
	return v1alpha1.SpreadConstraint{SpreadByField: v1alpha1.SpreadByFieldRegion, MinGroups: minGroups, MaxGroups: maxGroups}
}

func byCluster(minGroups, maxGroups int) v1alpha1.SpreadConstraint {
	return v1alpha1.SpreadConstraint{SpreadByField: v1alpha1.SpreadByFieldCluster, MinGroups: minGroups, MaxGroups: maxGroups}
}

func spreadInput(replicas int32, s *v1alpha1.ReplicaSchedulingStrategy, clusters []*v1alpha1.Cluster, cs ...v1alpha1.SpreadConstraint) Input {
	return Input{Placement: &v1alpha1.Placement{SpreadConstraints: cs, ReplicaScheduling: s}, Replicas: replicas, Clusters: clusters}
}

func TestScheduleSpread(t *testing.T) {
	with := func(in Input, f func(*Input)) Input { f(&in); return in }
	teams := func() []*v1alpha1.Cluster {
		return []*v1alpha1.Cluster{
			newCluster("a", labeled("team", "red"), roomFor(1)),
			newCluster("b", labeled("team", "blue"), roomFor(9)),
			newCluster("c", labeled("team", "red"), roomFor(9)),
			newCluster("d", labeled("other", "x"), roomFor(90)),
		}
	}
	runScheduleCases(t, []scheduleCase{
		{"no limit takes every group, drops clusters without a region", spreadInput(2, nil, regions(), byRegion(1, 0)),
			Result{Clusters: targets("ap-1", 2, "ap-2", 2, "eu-1", 2, "eu-2", 2, "us-1", 2)}},
		{"most capacity first", spreadInput(2, nil, regions(), byRegion(1, 1)),
			Result{Clusters: targets("us-1", 2)}},
		{"maxGroups 2: the two with most capacity", spreadInput(2, nil, regions(), byRegion(2, 2)),
			Result{Clusters: targets("ap-1", 2, "ap-2", 2, "us-1", 2)}},
		{"locality beats capacity", with(spreadInput(2, nil, regions(), byRegion(1, 1)), func(in *Input) {
			in.Previous = targets("eu-2", 2)
		}), Result{Clusters: targets("eu-1", 2, "eu-2", 2)}},
		{"a previous cluster with 0 replicas has no locality", with(spreadInput(2, nil, regions(), byRegion(1, 1)), func(in *Input) {
			in.Previous = targets("eu-2", 0)
		}), Result{Clusters: targets("us-1", 2)}},
		{"more placed clusters, higher group score", with(spreadInput(2, nil, regions(), byRegion(1, 1)), func(in *Input) {
			in.Previous = targets("us-1", 1, "ap-1", 1, "ap-2", 1)
		}), Result{Clusters: targets("ap-1", 2, "ap-2", 2)}},
		{"equal score and capacity: by name", spreadInput(2, nil, []*v1alpha1.Cluster{
			regional("z", "zz", 4), regional("y", "yy", 4), regional("x", "xx", 4),
		}, byRegion(2, 2)), Result{Clusters: targets("x", 2, "y", 2)}},
		{"without replicas capacity is not counted: by name", spreadInput(0, nil, regions(), byRegion(1, 1)),
			Result{Clusters: targets("ap-1", 0, "ap-2", 0)}},
		{"capacity counts the workload's requirements", with(spreadInput(2, nil, []*v1alpha1.Cluster{
			newCluster("small-many", located("", "r1", ""), summary(resources("pods", "100", "cpu", "1"), nil)),
			newCluster("big-few", located("", "r2", ""), summary(resources("pods", "10", "cpu", "64"), nil)),
		}, byRegion(1, 1)), func(in *Input) {
			in.Requirements = &v1alpha1.ReplicaRequirements{ResourceRequest: resources("cpu", "1")}
		}), Result{Clusters: targets("big-few", 2)}},
		{"spread by cluster, maxGroups 2 over 4", spreadInput(3, nil, roomy("a", 1, "b", 4, "c", 3, "d", 4), byCluster(1, 2)),
			Result{Clusters: targets("b", 3, "d", 3)}},
		{"spread by cluster keeps a placed cluster", with(spreadInput(3, nil, roomy("a", 1, "b", 4, "c", 3, "d", 4), byCluster(1, 2)), func(in *Input) {
			in.Previous = targets("a", 3)
		}), Result{Clusters: targets("a", 3, "b", 3)}},
		{"spread by label, clusters without it dropped", spreadInput(1, nil, teams(),
			v1alpha1.SpreadConstraint{SpreadByLabel: "team", MinGroups: 1, MaxGroups: 1}),
			Result{Clusters: targets("a", 1, "c", 1)}},
		{"spread by provider", spreadInput(1, nil, fleet(), v1alpha1.SpreadConstraint{SpreadByField: v1alpha1.SpreadByFieldProvider, MinGroups: 2}),
			Result{Clusters: targets("aws-east", 1, "aws-west", 1, "gcp-eu", 1)}},
		{"spread by zone", spreadInput(1, nil, fleet(), v1alpha1.SpreadConstraint{SpreadByField: v1alpha1.SpreadByFieldZone, MaxGroups: 2}),
			Result{Clusters: targets("aws-east", 1, "gcp-eu", 1)}}, // europe-west1-b, us-east-1a
		{"region then cluster", spreadInput(2, nil, regions(), byRegion(2, 2), byCluster(1, 2)),
			Result{Clusters: targets("ap-1", 2, "us-1", 2)}},
		// us-1, ap-1, ap-2 by capacity, then us (20) over ap (16).
		{"cluster then region", spreadInput(2, nil, regions(), byCluster(3, 3), byRegion(1, 1)),
			Result{Clusters: targets("us-1", 2)}},
		{"cluster then region, locality", with(spreadInput(2, nil, regions(), byCluster(3, 3), byRegion(1, 1)), func(in *Input) {
			in.Previous = targets("eu-1", 1)
		}), Result{Clusters: targets("eu-1", 2)}},
		{"Divided static over the chosen groups", spreadInput(6, divided(), regions(), byRegion(2, 2)),
			Result{Clusters: targets("ap-1", 2, "ap-2", 2, "us-1", 2)}},
		{"Divided dynamic over the chosen groups", spreadInput(12, dynamicWeight(), regions(), byRegion(1, 1)),
			Result{Clusters: targets("us-1", 12)}},
		{"Aggregated over the chosen groups", spreadInput(12, aggregated(), regions(), byRegion(2, 2)),
			Result{Clusters: targets("us-1", 12)}},
		{"an untolerated PreferNoSchedule taint ranks a group last among equals", spreadInput(2, nil, []*v1alpha1.Cluster{
			regional("x", "xx", 4, tainted("slow", "", corev1.TaintEffectPreferNoSchedule)), regional("y", "yy", 4), regional("z", "zz", 4),
		}, byRegion(2, 2)), Result{Clusters: targets("y", 2, "z", 2)}},
		{"a tolerated PreferNoSchedule taint does not count", with(spreadInput(2, nil, []*v1alpha1.Cluster{
			regional("x", "xx", 4, tainted("slow", "", corev1.TaintEffectPreferNoSchedule)), regional("y", "yy", 4), regional("z", "zz", 4),
		}, byRegion(2, 2)), func(in *Input) {
			in.Placement.ClusterTolerations = []corev1.Toleration{toleration("slow", corev1.TolerationOpExists, "")}
		}), Result{Clusters: targets("x", 2, "y", 2)}},
		{"PreferNoSchedule does not outweigh locality", with(spreadInput(2, nil, []*v1alpha1.Cluster{
			regional("x", "xx", 4, tainted("slow", "", corev1.TaintEffectPreferNoSchedule)), regional("y", "yy", 4), regional("z", "zz", 4),
		}, byRegion(1, 1)), func(in *Input) {
			in.Previous = targets("x", 2)
		}), Result{Clusters: targets("x", 2)}},
		{"evicted cluster is no candidate, nor its locality", with(spreadInput(2, nil, regions(), byRegion(1, 1)), func(in *Input) {
			in.Previous, in.Evicted = targets("eu-2", 2), []string{"eu-2"}
		}), Result{Clusters: targets("us-1", 2)}},
		{"evicted cluster left out of a Divided result", with(spreadInput(4, dynamicWeight(), regions(), byRegion(1, 1)), func(in *Input) {
			in.Previous, in.Evicted = targets("eu-2", 2, "eu-1", 2), []string{"eu-2"}
		}), Result{Clusters: targets("eu-1", 4)}},
		{"evicted without spread", with(Input{Replicas: 2, Clusters: plainClusters("a", "b"), Previous: targets("a", 2, "b", 2)}, func(in *Input) {
			in.Evicted = []string{"a", "unknown"}
		}), Result{Clusters: targets("b", 2)}},
	})
}

func TestScheduleSpreadUnschedulable(t *testing.T) {
	evictedOnly := spreadInput(2, nil, regions(), byRegion(2, 0))
	evictedOnly.Placement.ClusterAffinity = names("eu-1", "eu-2", "us-1")
	evictedOnly.Previous, evictedOnly.Evicted = targets("us-1", 2), []string{"us-1"}
	tests := []struct {
		name string
		in   Input
		want *UnschedulableError
	}{
		{"minGroups not met", spreadInput(2, nil, regions(), byRegion(4, 0)), &UnschedulableError{
			Reason: v1alpha1.ReasonNoClusterFit, Message: "spread by region needs at least 4 groups, 3 available (ap, eu, us)",
			FilterReasons: map[string]string{},
		}},
		{"an evicted cluster takes its group away", evictedOnly, &UnschedulableError{
			Reason: v1alpha1.ReasonNoClusterFit, Message: "spread by region needs at least 2 groups, 1 available (eu)",
			FilterReasons: map[string]string{"us-1": reasonEvicted, "ap-1": reasonAffinity, "ap-2": reasonAffinity, "none": reasonAffinity},
		}},
		{"no cluster has the label", spreadInput(2, nil, regions(), v1alpha1.SpreadConstraint{SpreadByLabel: "team"}), &UnschedulableError{
			Reason: v1alpha1.ReasonNoClusterFit, Message: "spread by label team needs at least 1 groups, 0 available ()",
			FilterReasons: map[string]string{},
		}},
		{"second constraint not met", spreadInput(2, nil, regions(), byRegion(1, 1), byCluster(2, 0)), &UnschedulableError{
			Reason: v1alpha1.ReasonNoClusterFit, Message: "spread by cluster needs at least 2 groups, 1 available (us-1)",
			FilterReasons: map[string]string{},
		}},
		{"evicted is a filter reason", Input{Replicas: 1, Clusters: plainClusters("a"), Previous: targets("a", 1), Evicted: []string{"a"}}, &UnschedulableError{
			Reason: v1alpha1.ReasonNoClusterFit, Message: "0/1 clusters are available: 1 cluster(s) is being evicted from this binding.",
			FilterReasons: map[string]string{"a": reasonEvicted},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Schedule(tt.in)
			var got *UnschedulableError
			if !errors.As(err, &got) {
				t.Fatalf("Schedule: %v, want an UnschedulableError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("UnschedulableError (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScheduleSpreadInvalid(t *testing.T) {
	tests := []struct {
		name    string
		c       v1alpha1.SpreadConstraint
		wantErr string
	}{
		{"neither", v1alpha1.SpreadConstraint{MinGroups: 1}, "placement.spreadConstraints[0]: one of spreadByField and spreadByLabel is required"},
		{"both", v1alpha1.SpreadConstraint{SpreadByField: "region", SpreadByLabel: "x"}, "exclusive"},
		{"unknown field", v1alpha1.SpreadConstraint{SpreadByField: "continent"}, `spreadByField "continent": unknown`},
		{"negative", byRegion(-1, 0), "must not be negative"},
		{"max below min", byRegion(3, 2), "maxGroups 2: less than minGroups 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No cluster: the placement is checked first.
			_, err := Schedule(spreadInput(1, nil, nil, tt.c))
			if ue := (*UnschedulableError)(nil); err == nil || errors.As(err, &ue) {
				t.Fatalf("Schedule: %v, want a plain error", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestScheduleSpreadDeterministic(t *testing.T) {
	var clusters []*v1alpha1.Cluster
	for i := range 40 {
		// Many ties: 8 regions of 5 clusters, equal room per region.
		region := string(rune('a' + i%8))
		clusters = append(clusters, regional(region+"-"+string(rune('a'+i/8)), region, 3+i%2))
	}
	in := spreadInput(17, dynamicWeight(), clusters, byRegion(2, 3), byCluster(2, 7))
	in.Previous = targets("c-a", 2, "h-b", 1)
	want := mustSchedule(t, in)
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		shuffled := append([]*v1alpha1.Cluster(nil), clusters...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		in.Clusters = shuffled
		if diff := cmp.Diff(want, mustSchedule(t, in)); diff != "" {
			t.Fatalf("result depends on cluster order (-first +now):\n%s", diff)
		}
	}
}
