package scheduler

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

type scheduleCase struct {
	name string
	in   Input
	want Result
}

func runScheduleCases(t *testing.T, cases []scheduleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustSchedule(t, tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Schedule (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScheduleAffinity(t *testing.T) {
	withAffinity := func(a *v1alpha1.ClusterAffinity) Input {
		return Input{Placement: &v1alpha1.Placement{ClusterAffinity: a}, Replicas: 2, Clusters: fleet()}
	}
	runScheduleCases(t, []scheduleCase{
		{"nil placement takes every cluster", Input{Replicas: 2, Clusters: fleet()},
			Result{Clusters: targets("aws-east", 2, "aws-west", 2, "gcp-eu", 2, "onprem", 2)}},
		{"nil affinity", withAffinity(nil),
			Result{Clusters: targets("aws-east", 2, "aws-west", 2, "gcp-eu", 2, "onprem", 2)}},
		{"names", withAffinity(names("onprem", "gcp-eu", "missing")),
			Result{Clusters: targets("gcp-eu", 2, "onprem", 2)}},
		{"exclude", withAffinity(&v1alpha1.ClusterAffinity{Exclude: []string{"aws-west", "onprem"}}),
			Result{Clusters: targets("aws-east", 2, "gcp-eu", 2)}},
		{"exclude wins over names", withAffinity(&v1alpha1.ClusterAffinity{ClusterNames: []string{"onprem", "gcp-eu"}, Exclude: []string{"onprem"}}),
			Result{Clusters: targets("gcp-eu", 2)}},
		{"labels", withAffinity(&v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}),
			Result{Clusters: targets("aws-east", 2, "gcp-eu", 2, "onprem", 2)}},
		{"label expression", withAffinity(&v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}}),
			Result{Clusters: targets("aws-east", 2, "aws-west", 2, "onprem", 2)}},
		{"empty label selector matches all", withAffinity(&v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{}}),
			Result{Clusters: targets("aws-east", 2, "aws-west", 2, "gcp-eu", 2, "onprem", 2)}},
		{"field provider In", withAffinity(&v1alpha1.ClusterAffinity{FieldSelector: fields(field("provider", corev1.NodeSelectorOpIn, "aws"))}),
			Result{Clusters: targets("aws-east", 2, "aws-west", 2)}},
		{"field region NotIn keeps clusters without a region", withAffinity(&v1alpha1.ClusterAffinity{FieldSelector: fields(field("region", corev1.NodeSelectorOpNotIn, "us-east-1", "us-west-2"))}),
			Result{Clusters: targets("gcp-eu", 2, "onprem", 2)}},
		{"field zone Exists", withAffinity(&v1alpha1.ClusterAffinity{FieldSelector: fields(field("zone", corev1.NodeSelectorOpExists))}),
			Result{Clusters: targets("aws-east", 2, "aws-west", 2, "gcp-eu", 2)}},
		{"field provider DoesNotExist", withAffinity(&v1alpha1.ClusterAffinity{FieldSelector: fields(field("provider", corev1.NodeSelectorOpDoesNotExist))}),
			Result{Clusters: targets("onprem", 2)}},
		{"fields and labels together", withAffinity(&v1alpha1.ClusterAffinity{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
			FieldSelector: fields(field("provider", corev1.NodeSelectorOpIn, "aws", "gcp"), field("zone", corev1.NodeSelectorOpNotIn, "europe-west1-b")),
		}), Result{Clusters: targets("aws-east", 2)}},
	})
}

func TestScheduleTaints(t *testing.T) {
	unreachable := tainted(v1alpha1.TaintClusterUnreachable, "", corev1.TaintEffectNoExecute)
	cordoned := tainted(v1alpha1.TaintClusterUnschedulable, "", corev1.TaintEffectNoSchedule)
	fleet := func() []*v1alpha1.Cluster {
		return []*v1alpha1.Cluster{
			newCluster("a"),
			newCluster("b", unreachable),
			newCluster("c", cordoned),
			newCluster("d", tainted("example.com/slow", "yes", corev1.TaintEffectPreferNoSchedule)),
			newCluster("e", tainted("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
			newCluster("f", tainted("example.com/degraded", "", v1alpha1.TaintEffectPreferNoExecute)),
		}
	}
	tolerating := func(ts ...corev1.Toleration) Input {
		return Input{Placement: &v1alpha1.Placement{ClusterTolerations: ts}, Replicas: 1, Clusters: fleet()}
	}
	runScheduleCases(t, []scheduleCase{
		{"untolerated NoSchedule, NoExecute and PreferNoExecute are filtered, PreferNoSchedule is not", tolerating(),
			Result{Clusters: targets("a", 1, "d", 1)}},
		{"tolerated by key", tolerating(toleration(v1alpha1.TaintClusterUnreachable, corev1.TolerationOpExists, corev1.TaintEffectNoExecute)),
			Result{Clusters: targets("a", 1, "b", 1, "d", 1)}},
		{"tolerated by key and value", tolerating(corev1.Toleration{Key: "dedicated", Value: "gpu"}),
			Result{Clusters: targets("a", 1, "d", 1, "e", 1)}},
		{"wrong value", tolerating(corev1.Toleration{Key: "dedicated", Value: "fpga"}),
			Result{Clusters: targets("a", 1, "d", 1)}},
		{"wrong effect", tolerating(toleration(v1alpha1.TaintClusterUnreachable, corev1.TolerationOpExists, corev1.TaintEffectNoSchedule)),
			Result{Clusters: targets("a", 1, "d", 1)}},
		{"empty key with Exists tolerates everything", tolerating(toleration("", corev1.TolerationOpExists, "")),
			Result{Clusters: targets("a", 1, "b", 1, "c", 1, "d", 1, "e", 1, "f", 1)}},
		{"PreferNoExecute tolerated", tolerating(toleration("example.com/degraded", corev1.TolerationOpExists, v1alpha1.TaintEffectPreferNoExecute)),
			Result{Clusters: targets("a", 1, "d", 1, "f", 1)}},
		{"a NoExecute toleration does not tolerate PreferNoExecute", tolerating(toleration("example.com/degraded", corev1.TolerationOpExists, corev1.TaintEffectNoExecute)),
			Result{Clusters: targets("a", 1, "d", 1)}},
		{"a binding on a PreferNoExecute cluster stays there", Input{Replicas: 1, Clusters: fleet(), Previous: targets("f", 1)},
			Result{Clusters: targets("a", 1, "d", 1, "f", 1)}},
		{"karmada key tolerates the flotilla taint", tolerating(
			toleration("cluster.karmada.io/unreachable", corev1.TolerationOpExists, corev1.TaintEffectNoExecute),
			toleration("cluster.karmada.io/unschedulable", corev1.TolerationOpExists, "")),
			Result{Clusters: targets("a", 1, "b", 1, "c", 1, "d", 1)}},
		{"already placed clusters pass the taint filter", Input{Replicas: 1, Clusters: fleet(), Previous: targets("b", 1, "e", 1)},
			Result{Clusters: targets("a", 1, "b", 1, "d", 1, "e", 1)}},
		{"already placed clusters still need the affinity", Input{
			Placement: &v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"b"}}},
			Replicas:  1, Clusters: fleet(), Previous: targets("b", 1)},
			Result{Clusters: targets("a", 1, "d", 1)}},
	})
}

func TestTolerates(t *testing.T) {
	notReady := corev1.Taint{Key: v1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name       string
		toleration corev1.Toleration
		taint      corev1.Taint
		want       bool
	}{
		{"same key, Exists", toleration(v1alpha1.TaintClusterNotReady, corev1.TolerationOpExists, ""), notReady, true},
		{"karmada key", toleration("cluster.karmada.io/not-ready", corev1.TolerationOpExists, corev1.TaintEffectNoExecute), notReady, true},
		{"karmada key, other suffix", toleration("cluster.karmada.io/unreachable", corev1.TolerationOpExists, ""), notReady, false},
		{"karmada key, wrong effect", toleration("cluster.karmada.io/not-ready", corev1.TolerationOpExists, corev1.TaintEffectNoSchedule), notReady, false},
		{"karmada key, Equal with value", corev1.Toleration{Key: "cluster.karmada.io/not-ready", Value: "x"},
			corev1.Taint{Key: v1alpha1.TaintClusterNotReady, Value: "x", Effect: corev1.TaintEffectNoSchedule}, true},
		{"mapping is one way", toleration("cluster.flotilla.io/not-ready", corev1.TolerationOpExists, ""),
			corev1.Taint{Key: "cluster.karmada.io/not-ready", Effect: corev1.TaintEffectNoSchedule}, false},
		{"other prefixes are not mapped", toleration("node.kubernetes.io/not-ready", corev1.TolerationOpExists, ""), notReady, false},
		{"Lt is not enabled", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpLt, Value: "5"},
			corev1.Taint{Key: "k", Value: "3", Effect: corev1.TaintEffectNoSchedule}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tolerates([]corev1.Toleration{tt.toleration}, &tt.taint); got != tt.want {
				t.Errorf("Tolerates(%+v, %+v) = %v, want %v", tt.toleration, tt.taint, got, tt.want)
			}
		})
	}
	if Tolerates(nil, &notReady) {
		t.Error("no tolerations tolerate a taint")
	}
}

func TestScheduleDivision(t *testing.T) {
	ab := func() []*v1alpha1.Cluster { return plainClusters("b", "a") }
	abc := func() []*v1alpha1.Cluster { return plainClusters("c", "a", "b") }
	split := func(replicas int32, s *v1alpha1.ReplicaSchedulingStrategy, clusters []*v1alpha1.Cluster) Input {
		return Input{Placement: &v1alpha1.Placement{ReplicaScheduling: s}, Replicas: replicas, Clusters: clusters}
	}
	oneToTwo := divided(weightOf(1, "a"), weightOf(2, "b"))
	runScheduleCases(t, []scheduleCase{
		{"Duplicated", split(3, &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDuplicated}, abc()),
			Result{Clusters: targets("a", 3, "b", 3, "c", 3)}},
		{"empty type is Duplicated", split(3, &v1alpha1.ReplicaSchedulingStrategy{}, ab()),
			Result{Clusters: targets("a", 3, "b", 3)}},
		{"1:2 with 3", split(3, oneToTwo, ab()), Result{Clusters: targets("a", 1, "b", 2)}},
		{"1:2 with 9", split(9, oneToTwo, ab()), Result{Clusters: targets("a", 3, "b", 6)}},
		{"1:2 with 4", split(4, oneToTwo, ab()), Result{Clusters: targets("a", 1, "b", 3)}},
		{"1:2 with 1", split(1, oneToTwo, ab()), Result{Clusters: targets("b", 1)}},
		{"empty preference is Weighted", split(3, &v1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided,
			WeightPreference:      &v1alpha1.ClusterPreferences{StaticWeightList: []v1alpha1.StaticClusterWeight{weightOf(1, "a"), weightOf(2, "b")}}}, ab()),
			Result{Clusters: targets("a", 1, "b", 2)}},
		{"weight 0 drops the cluster", split(6, divided(weightOf(1, "a", "b"), weightOf(0, "c")), abc()),
			Result{Clusters: targets("a", 3, "b", 3)}},
		{"a cluster no rule matches gets nothing", split(6, divided(weightOf(1, "a", "b")), abc()),
			Result{Clusters: targets("a", 3, "b", 3)}},
		// Weights 1:1:3. The 7th and 8th replicas tie at quotient 1/3 (a and
		// b on their 2nd, c on its 5th): fewer replicas so far wins.
		{"the largest matching weight counts", split(8, divided(weightOf(1, "a", "b", "c"), weightOf(3, "c"), weightOf(0, "c")), abc()),
			Result{Clusters: targets("a", 2, "b", 2, "c", 4)}},
		{"all weights 0: equal", split(7, divided(weightOf(0, "a", "b", "c")), abc()),
			Result{Clusters: targets("a", 3, "b", 2, "c", 2)}},
		{"no rule matches: equal", split(6, divided(weightOf(5, "elsewhere")), abc()),
			Result{Clusters: targets("a", 2, "b", 2, "c", 2)}},
		{"no weight list: equal", split(4, divided(), abc()),
			Result{Clusters: targets("a", 2, "b", 1, "c", 1)}},
		{"fewer replicas than clusters", split(2, divided(), abc()),
			Result{Clusters: targets("a", 1, "b", 1)}},
		{"rules by labels and fields", split(6, divided(
			v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}, Weight: 1},
			v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{FieldSelector: fields(field("provider", corev1.NodeSelectorOpIn, "gcp"))}, Weight: 3},
		), fleet()), Result{Clusters: targets("aws-east", 1, "gcp-eu", 4, "onprem", 1)}},
		{"replicas 0 Divided", split(0, oneToTwo, abc()),
			Result{Clusters: targets("a", 0, "b", 0, "c", 0)}},
		{"replicas 0 Duplicated", split(0, nil, ab()),
			Result{Clusters: targets("a", 0, "b", 0)}},
		{"replicas 0 Aggregated", split(0, &v1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceAggregated}, ab()),
			Result{Clusters: targets("a", 0, "b", 0)}},
	})
}

func TestScheduleAffinities(t *testing.T) {
	terms := func(ts ...v1alpha1.ClusterAffinityTerm) Input {
		clusters := fleet()
		clusters[1].Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoSchedule}} // aws-east
		return Input{Placement: &v1alpha1.Placement{ClusterAffinities: ts}, Replicas: 1, Clusters: clusters}
	}
	with := func(in Input, f func(*Input)) Input { f(&in); return in }
	term := func(name string, a *v1alpha1.ClusterAffinity) v1alpha1.ClusterAffinityTerm {
		return v1alpha1.ClusterAffinityTerm{AffinityName: name, ClusterAffinity: *a}
	}
	runScheduleCases(t, []scheduleCase{
		{"first group fits", terms(term("primary", names("gcp-eu")), term("backup", names("onprem"))),
			Result{Clusters: targets("gcp-eu", 1), AffinityName: "primary"}},
		{"first group matches only a tainted cluster", terms(term("primary", names("aws-east")), term("backup", names("onprem", "gcp-eu"))),
			Result{Clusters: targets("gcp-eu", 1, "onprem", 1), AffinityName: "backup"}},
		{"a group whose clusters lack room falls through to the next", Input{
			Placement: &v1alpha1.Placement{
				ClusterAffinities: []v1alpha1.ClusterAffinityTerm{term("primary", names("small")), term("backup", names("big"))},
				ReplicaScheduling: dynamicWeight(),
			},
			Replicas: 5, Clusters: roomy("small", 2, "big", 10),
		}, Result{Clusters: targets("big", 5), AffinityName: "backup"}},
		{"a group whose spread fails falls through to the next", Input{
			Placement: &v1alpha1.Placement{
				ClusterAffinities: []v1alpha1.ClusterAffinityTerm{term("primary", names("gcp-eu")), term("backup", names("aws-west", "gcp-eu", "onprem"))},
				SpreadConstraints: []v1alpha1.SpreadConstraint{{SpreadByField: v1alpha1.SpreadByFieldCluster, MinGroups: 2}},
			},
			Replicas: 1, Clusters: fleet(),
		}, Result{Clusters: targets("aws-west", 1, "gcp-eu", 1, "onprem", 1), AffinityName: "backup"}},
		{"starts at the observed group: a recovered primary is not taken back", with(terms(term("primary", names("gcp-eu")), term("backup", names("onprem"))), func(in *Input) {
			in.ObservedAffinity, in.Previous = "backup", targets("onprem", 1)
		}), Result{Clusters: targets("onprem", 1), AffinityName: "backup"}},
		{"Fresh starts at the first group", with(terms(term("primary", names("gcp-eu")), term("backup", names("onprem"))), func(in *Input) {
			in.ObservedAffinity, in.Previous, in.Fresh = "backup", targets("onprem", 1), true
		}), Result{Clusters: targets("gcp-eu", 1), AffinityName: "primary"}},
		{"wraps around to earlier groups when the observed one and later fail", with(terms(term("primary", names("gcp-eu")), term("backup", names("aws-east"))), func(in *Input) {
			in.ObservedAffinity = "backup"
		}), Result{Clusters: targets("gcp-eu", 1), AffinityName: "primary"}},
		{"an unknown observed group starts at the first", with(terms(term("primary", names("gcp-eu")), term("backup", names("onprem"))), func(in *Input) {
			in.ObservedAffinity = "gone"
		}), Result{Clusters: targets("gcp-eu", 1), AffinityName: "primary"}},
		{"falls through several groups", terms(term("a", names("missing")), term("b", names("aws-east")), term("c", &v1alpha1.ClusterAffinity{})),
			Result{Clusters: targets("aws-west", 1, "gcp-eu", 1, "onprem", 1), AffinityName: "c"}},
	})

	_, err := Schedule(terms(term("a", names("missing")), term("b", names("aws-east"))))
	var ue *UnschedulableError
	if !errors.As(err, &ue) {
		t.Fatalf("no group fits: got %v, want an UnschedulableError", err)
	}
	want := "0/4 clusters are available: 1 cluster(s) had untolerated taint {cluster.flotilla.io/not-ready: }, 3 cluster(s) did not match the placement's cluster affinity."
	if ue.Message != want {
		t.Errorf("no group fits: message %q, want the last group's %q", ue.Message, want)
	}
}

func TestScheduleUnschedulable(t *testing.T) {
	unreachable := tainted(v1alpha1.TaintClusterUnreachable, "", corev1.TaintEffectNoExecute)
	tests := []struct {
		name string
		in   Input
		want *UnschedulableError
	}{
		{"taints and affinity", Input{
			Placement: &v1alpha1.Placement{ClusterAffinity: names("a")},
			Clusters:  []*v1alpha1.Cluster{newCluster("c"), newCluster("a", unreachable), newCluster("b")},
		}, &UnschedulableError{
			Reason:        v1alpha1.ReasonNoClusterFit,
			Message:       "0/3 clusters are available: 1 cluster(s) had untolerated taint {cluster.flotilla.io/unreachable: }, 2 cluster(s) did not match the placement's cluster affinity.",
			FilterReasons: map[string]string{"a": "had untolerated taint {cluster.flotilla.io/unreachable: }", "b": reasonAffinity, "c": reasonAffinity},
		}},
		{"taint with a value, ties listed by text", Input{
			Clusters: []*v1alpha1.Cluster{newCluster("a", tainted("dedicated", "gpu", corev1.TaintEffectNoSchedule)), newCluster("b", unreachable)},
		}, &UnschedulableError{
			Reason:  v1alpha1.ReasonNoClusterFit,
			Message: "0/2 clusters are available: 1 cluster(s) had untolerated taint {cluster.flotilla.io/unreachable: }, 1 cluster(s) had untolerated taint {dedicated: gpu}.",
			FilterReasons: map[string]string{
				"a": "had untolerated taint {dedicated: gpu}",
				"b": "had untolerated taint {cluster.flotilla.io/unreachable: }",
			},
		}},
		{"no clusters at all", Input{Replicas: 3}, &UnschedulableError{
			Reason: v1alpha1.ReasonNoClusterFit, Message: "0/0 clusters are available.", FilterReasons: map[string]string{},
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
			if err.Error() != tt.want.Message {
				t.Errorf("Error() = %q, want %q", err.Error(), tt.want.Message)
			}
		})
	}
}

func TestScheduleInvalid(t *testing.T) {
	withPlacement := func(p v1alpha1.Placement) Input {
		return Input{Placement: &p, Replicas: 3, Clusters: plainClusters("a", "b")}
	}
	divide := func(pref, dynamic string) Input {
		return withPlacement(v1alpha1.Placement{ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: pref,
			WeightPreference:          &v1alpha1.ClusterPreferences{DynamicWeight: dynamic},
		}})
	}
	badLabels := &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}}
	tests := []struct {
		name    string
		in      Input
		wantErr string
	}{
		{"invalid label selector", withPlacement(v1alpha1.Placement{ClusterAffinity: badLabels}), `placement.clusterAffinity: labelSelector: "Near" is not a valid label selector operator`},
		{"unknown field key", withPlacement(v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{FieldSelector: fields(field("continent", corev1.NodeSelectorOpIn, "eu"))}}),
			`placement.clusterAffinity: fieldSelector.matchExpressions[0]: key "continent": unknown, want provider, region or zone`},
		{"unsupported field operator", withPlacement(v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{FieldSelector: fields(field("zone", corev1.NodeSelectorOpGt, "1"))}}),
			`operator "Gt": unsupported`},
		{"In without values", withPlacement(v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{FieldSelector: fields(field("zone", corev1.NodeSelectorOpIn))}}),
			"operator In needs values"},
		{"Exists with values", withPlacement(v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{FieldSelector: fields(field("zone", corev1.NodeSelectorOpExists, "x"))}}),
			"operator Exists takes no values"},
		{"invalid selector in an affinity group", withPlacement(v1alpha1.Placement{ClusterAffinities: []v1alpha1.ClusterAffinityTerm{
			{AffinityName: "first", ClusterAffinity: v1alpha1.ClusterAffinity{}}, {AffinityName: "second", ClusterAffinity: *badLabels}}}),
			"placement.clusterAffinities[1] (second): labelSelector:"},
		{"clusterAffinity and clusterAffinities", withPlacement(v1alpha1.Placement{ClusterAffinity: names("a"), ClusterAffinities: []v1alpha1.ClusterAffinityTerm{{AffinityName: "x"}}}),
			"clusterAffinity and clusterAffinities are exclusive"},
		{"invalid selector in a weight rule", withPlacement(v1alpha1.Placement{ReplicaScheduling: divided(v1alpha1.StaticClusterWeight{TargetCluster: *badLabels, Weight: 1})}),
			"placement.replicaScheduling: weightPreference.staticWeightList[0].targetCluster: labelSelector:"},
		{"negative weight", withPlacement(v1alpha1.Placement{ReplicaScheduling: divided(weightOf(-1, "a"))}),
			"staticWeightList[0].weight -1: must not be negative"},
		{"unknown type", withPlacement(v1alpha1.Placement{ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: "Tripled"}}),
			`replicaSchedulingType "Tripled": unknown`},
		{"unknown preference", divide("Scattered", ""), `replicaDivisionPreference "Scattered": unknown`},
		{"unknown dynamic weight", divide(v1alpha1.ReplicaDivisionPreferenceWeighted, "Vibes"), `dynamicWeight "Vibes": unknown`},
		{"negative replicas", Input{Replicas: -1, Clusters: plainClusters("a")}, "replicas -1: must not be negative"},
		{"duplicate cluster", Input{Replicas: 1, Clusters: plainClusters("a", "b", "a")}, `cluster "a" is listed twice`},
		{"nil cluster", Input{Replicas: 1, Clusters: []*v1alpha1.Cluster{newCluster("a"), nil}}, "clusters[1] is nil"},
		// The placement is checked before clusters are: no cluster would
		// fit, but the broken policy is what needs fixing.
		{"invalid placement and no cluster", Input{Placement: &v1alpha1.Placement{ClusterAffinity: badLabels}}, "labelSelector:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Schedule(tt.in)
			if err == nil {
				t.Fatalf("Schedule = %+v, want an error containing %q", got, tt.wantErr)
			}
			if ue := (*UnschedulableError)(nil); errors.As(err, &ue) {
				t.Fatalf("Schedule: got UnschedulableError %q, want a plain error", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Schedule: error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestScheduleDeterministic(t *testing.T) {
	clusters := fleet()
	for i := range 20 {
		clusters = append(clusters, newCluster(string(rune('k'+i)), labeled("env", []string{"prod", "dev"}[i%2])))
	}
	in := Input{
		Placement: &v1alpha1.Placement{ReplicaScheduling: divided(
			v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}, Weight: 3},
			weightOf(2, "aws-west", "l", "n"),
		)},
		Replicas: 37,
		Clusters: clusters,
	}
	want := mustSchedule(t, in)
	r := rand.New(rand.NewPCG(11, 12))
	for range 50 {
		r.Shuffle(len(clusters), func(i, j int) { clusters[i], clusters[j] = clusters[j], clusters[i] })
		if diff := cmp.Diff(want, mustSchedule(t, in)); diff != "" {
			t.Fatalf("result depends on cluster order (-first +shuffled):\n%s", diff)
		}
	}
}

func TestScheduleLeavesInputAlone(t *testing.T) {
	clusters := fleet()
	clusters[0].Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}}
	in := Input{
		Placement: &v1alpha1.Placement{
			ClusterAffinity:   &v1alpha1.ClusterAffinity{Exclude: []string{"onprem"}},
			ReplicaScheduling: divided(weightOf(1, "aws-east"), weightOf(2, "aws-west")),
		},
		Replicas: 5,
		Previous: targets("gcp-eu", 5),
		Clusters: clusters,
	}
	before := make([]*v1alpha1.Cluster, len(clusters))
	for i, c := range clusters {
		before[i] = c.DeepCopy()
	}
	placement, previous := in.Placement.DeepCopy(), append([]v1alpha1.TargetCluster(nil), in.Previous...)
	mustSchedule(t, in)
	if diff := cmp.Diff(before, in.Clusters); diff != "" {
		t.Errorf("clusters changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(placement, in.Placement); diff != "" {
		t.Errorf("placement changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(previous, in.Previous); diff != "" {
		t.Errorf("previous changed (-before +after):\n%s", diff)
	}
}

func TestFilter(t *testing.T) {
	clusters := []*v1alpha1.Cluster{
		newCluster("c", tainted(v1alpha1.TaintClusterNotReady, "", corev1.TaintEffectNoSchedule)),
		newCluster("b"),
		newCluster("a", tainted(v1alpha1.TaintClusterNotReady, "", corev1.TaintEffectNoSchedule)),
		newCluster("d"),
	}
	fit, reasons, err := Filter(&v1alpha1.ClusterAffinity{Exclude: []string{"d"}}, nil, clusters, targets("a", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range fit {
		got = append(got, c.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("Filter fit (-want +got):\n%s", diff)
	}
	wantReasons := map[string]string{"c": "had untolerated taint {cluster.flotilla.io/not-ready: }", "d": reasonAffinity}
	if diff := cmp.Diff(wantReasons, reasons); diff != "" {
		t.Errorf("Filter reasons (-want +got):\n%s", diff)
	}
	if _, _, err := Filter(&v1alpha1.ClusterAffinity{FieldSelector: fields(field("color", corev1.NodeSelectorOpExists))}, nil, clusters, nil, nil); err == nil {
		t.Error("Filter with an unknown field key: no error")
	}
}

func TestScheduleSkipsClustersThatDoNotServeTheKind(t *testing.T) {
	apps := []v1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []v1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}}}
	core := []v1alpha1.APIEnablement{{GroupVersion: "v1", Resources: []v1alpha1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}}}}
	serving := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "serving"}, Status: v1alpha1.ClusterStatus{APIEnablements: apps}}
	lacking := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "lacking"}, Status: v1alpha1.ClusterStatus{APIEnablements: core}}
	unknown := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "unknown"}}
	got, err := Schedule(Input{Replicas: 2, APIVersion: "apps/v1", Kind: "Deployment", Clusters: []*v1alpha1.Cluster{serving, lacking, unknown}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "serving", Replicas: 2}, {Name: "unknown", Replicas: 2}}, got.Clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	_, err = Schedule(Input{Replicas: 2, APIVersion: "apps/v1", Kind: "Deployment", Clusters: []*v1alpha1.Cluster{lacking}})
	var ue *UnschedulableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Message, "did not serve apps/v1 Deployment") {
		t.Errorf("only a cluster without the kind: %v", err)
	}
}
