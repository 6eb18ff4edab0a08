package taintpolicy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

var (
	t0       = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now      = metav1.NewTime(t0)
	minute   = metav1.NewTime(t0.Add(-time.Minute))
	readyIn  = []v1alpha1.MatchCondition{{ConditionType: "Ready", Operator: v1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{"True"}}}
	readyOut = []v1alpha1.MatchCondition{{ConditionType: "Ready", Operator: v1alpha1.MatchConditionOpNotIn, StatusValues: []metav1.ConditionStatus{"True"}}}
)

// Karmada's TestConditionMatches, plus a condition type the cluster does
// not have and an operator that is neither In nor NotIn.
func TestConditionsMatch(t *testing.T) {
	match := func(typ string, op v1alpha1.MatchConditionOperator, values ...metav1.ConditionStatus) v1alpha1.MatchCondition {
		return v1alpha1.MatchCondition{ConditionType: typ, Operator: op, StatusValues: values}
	}
	in, notIn := v1alpha1.MatchConditionOpIn, v1alpha1.MatchConditionOpNotIn
	tests := []struct {
		name       string
		conditions []metav1.Condition
		match      []v1alpha1.MatchCondition
		want       bool
	}{
		{"empty match conditions", []metav1.Condition{{Type: "Ready", Status: "True"}}, nil, false},
		{"match: operator is In", []metav1.Condition{{Type: "Ready", Status: "True"}}, []v1alpha1.MatchCondition{match("Ready", in, "True")}, true},
		{"don't match: operator is In", []metav1.Condition{{Type: "Ready", Status: "False"}}, []v1alpha1.MatchCondition{match("Ready", in, "True")}, false},
		{"match: operator is NotIn", []metav1.Condition{{Type: "Ready", Status: "False"}}, []v1alpha1.MatchCondition{match("Ready", notIn, "True", "Unknown")}, true},
		{"don't match: operator is NotIn", []metav1.Condition{{Type: "Ready", Status: "False"}}, []v1alpha1.MatchCondition{match("Ready", notIn, "False")}, false},
		{"match: multiple conditions",
			[]metav1.Condition{{Type: "Ready", Status: "Unknown"}, {Type: "NetworkReady", Status: "False"}, {Type: "StorageReady", Status: "True"}},
			[]v1alpha1.MatchCondition{match("Ready", in, "False", "Unknown"), match("NetworkReady", notIn, "True")}, true},
		{"don't match: multiple conditions",
			[]metav1.Condition{{Type: "Ready", Status: "True"}, {Type: "NetworkReady", Status: "False"}, {Type: "StorageReady", Status: "True"}},
			[]v1alpha1.MatchCondition{match("Ready", in, "False", "Unknown"), match("NetworkReady", notIn, "True")}, false},
		{"missing condition type matches not In", []metav1.Condition{{Type: "Ready", Status: "True"}}, []v1alpha1.MatchCondition{match("NodesReady", in, "False")}, false},
		{"missing condition type matches not NotIn", []metav1.Condition{{Type: "Ready", Status: "True"}}, []v1alpha1.MatchCondition{match("NodesReady", notIn, "True")}, false},
		{"no conditions at all", nil, []v1alpha1.MatchCondition{match("Ready", notIn, "True")}, false},
		{"unknown operator", []metav1.Condition{{Type: "Ready", Status: "True"}}, []v1alpha1.MatchCondition{match("Ready", "Exists", "True")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ConditionsMatch(tt.conditions, tt.match); got != tt.want {
				t.Errorf("ConditionsMatch = %v, want %v", got, tt.want)
			}
		})
	}
}

func policy(name string, created time.Time, add, remove []v1alpha1.MatchCondition, taints ...v1alpha1.PolicyTaint) *v1alpha1.ClusterTaintPolicy {
	return &v1alpha1.ClusterTaintPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: v1alpha1.ClusterTaintPolicySpec{AddOnConditions: add, RemoveOnConditions: remove, Taints: taints}}
}

func cluster(ready metav1.ConditionStatus, taints ...corev1.Taint) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member-1", Labels: map[string]string{"site": "edge"}},
		Spec:   v1alpha1.ClusterSpec{Taints: taints},
		Status: v1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: ready}}}}
}

func pt(key, value string, effect corev1.TaintEffect) v1alpha1.PolicyTaint {
	return v1alpha1.PolicyTaint{Key: key, Value: value, Effect: effect}
}

func taint(key, value string, effect corev1.TaintEffect, added *metav1.Time) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect, TimeAdded: added}
}

// Karmada's TestAddTaintsOnCluster and TestRemoveTaintsOnCluster, through
// a policy whose conditions match, and Flotilla's additions: ordering,
// targets, conditions that do not match, the hub's taints and owners.
func TestApply(t *testing.T) {
	const noSched, noExec, prefer = corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule
	tests := []struct {
		name        string
		cluster     *v1alpha1.Cluster
		policies    []*v1alpha1.ClusterTaintPolicy
		opts        Options
		wantTaints  []corev1.Taint
		wantChanges []Change
		wantOwners  map[string]string
		wantHub     []Change
	}{
		{
			name:        "add new taint",
			cluster:     cluster("False"),
			policies:    []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, nil, pt("key1", "value1", noSched))},
			wantTaints:  []corev1.Taint{taint("key1", "value1", noSched, &now)},
			wantChanges: []Change{{Policy: "p", Taint: taint("key1", "value1", noSched, &now)}},
			wantOwners:  map[string]string{"key1:NoSchedule": "p"},
		},
		{
			name:       "add the existing taint, don't update TimeAdded",
			cluster:    cluster("False", taint("key1", "value1", noSched, &minute)),
			policies:   []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, nil, pt("key1", "value1", noSched))},
			wantTaints: []corev1.Taint{taint("key1", "value1", noSched, &minute)},
			wantOwners: map[string]string{},
		},
		{
			name:       "an existing key and effect with another value is left as it is",
			cluster:    cluster("False", taint("key1", "other", noSched, &minute)),
			policies:   []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, nil, pt("key1", "value1", noSched))},
			wantTaints: []corev1.Taint{taint("key1", "other", noSched, &minute)},
			wantOwners: map[string]string{},
		},
		{
			name:       "add multi taints",
			cluster:    cluster("False", taint("key2", "value2", prefer, &minute)),
			policies:   []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, nil, pt("key1", "value1", noSched), pt("key3", "value3", noExec))},
			wantTaints: []corev1.Taint{taint("key2", "value2", prefer, &minute), taint("key1", "value1", noSched, &now), taint("key3", "value3", noExec, &now)},
			wantChanges: []Change{{Policy: "p", Taint: taint("key1", "value1", noSched, &now)},
				{Policy: "p", Taint: taint("key3", "value3", noExec, &now)}},
			wantOwners: map[string]string{"key1:NoSchedule": "p", "key3:NoExecute": "p"},
		},
		{
			name:        "remove a taint",
			cluster:     cluster("True", taint("key1", "", noSched, &minute)),
			policies:    []*v1alpha1.ClusterTaintPolicy{policy("p", t0, nil, readyIn, pt("key1", "", noSched))},
			wantTaints:  []corev1.Taint{},
			wantChanges: []Change{{Policy: "p", Taint: taint("key1", "", noSched, &minute), Removed: true}},
			wantOwners:  map[string]string{},
		},
		{
			name:       "remove multiple matched taints",
			cluster:    cluster("True", taint("key1", "", noSched, &minute), taint("key2", "", noExec, &now)),
			policies:   []*v1alpha1.ClusterTaintPolicy{policy("p", t0, nil, readyIn, pt("key1", "", noSched), pt("key2", "", noExec))},
			wantTaints: []corev1.Taint{},
			wantChanges: []Change{{Policy: "p", Taint: taint("key1", "", noSched, &minute), Removed: true},
				{Policy: "p", Taint: taint("key2", "", noExec, &now), Removed: true}},
			wantOwners: map[string]string{},
		},
		{
			name:       "no matched taints",
			cluster:    cluster("True", taint("key1", "", noSched, &minute)),
			policies:   []*v1alpha1.ClusterTaintPolicy{policy("p", t0, nil, readyIn, pt("key2", "", noExec))},
			wantTaints: []corev1.Taint{taint("key1", "", noSched, &minute)},
			wantOwners: map[string]string{},
		},
		{
			name:        "remove matches by key and effect, whatever the value",
			cluster:     cluster("True", taint("key1", "set-by-hand", noSched, &minute)),
			policies:    []*v1alpha1.ClusterTaintPolicy{policy("p", t0, nil, readyIn, pt("key1", "v", noSched))},
			wantTaints:  []corev1.Taint{},
			wantChanges: []Change{{Policy: "p", Taint: taint("key1", "set-by-hand", noSched, &minute), Removed: true}},
			wantOwners:  map[string]string{},
		},
		{
			name:       "conditions that do not match change nothing",
			cluster:    cluster("True", taint("key1", "", noSched, &minute)),
			policies:   []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, readyOut, pt("key1", "", noSched), pt("key2", "", noSched))},
			wantTaints: []corev1.Taint{taint("key1", "", noSched, &minute)},
			wantOwners: map[string]string{},
		},
		{
			name:    "the older policy first: a later one removes what an earlier one added, nothing to write",
			cluster: cluster("False"),
			policies: []*v1alpha1.ClusterTaintPolicy{
				policy("later", t0, nil, readyOut, pt("key1", "", noSched)),
				policy("earlier", t0.Add(-time.Hour), readyOut, nil, pt("key1", "", noSched)),
			},
			wantTaints: nil,
			wantOwners: map[string]string{},
		},
		{
			name:    "the older policy first: a later one adds back what an earlier one removed",
			cluster: cluster("False", taint("key1", "old", noSched, &minute)),
			policies: []*v1alpha1.ClusterTaintPolicy{
				policy("b-adds", t0, readyOut, nil, pt("key1", "new", noSched)),
				policy("a-removes", t0, nil, readyOut, pt("key1", "", noSched)),
			},
			wantTaints: []corev1.Taint{taint("key1", "new", noSched, &now)},
			wantChanges: []Change{{Policy: "b-adds", Taint: taint("key1", "new", noSched, &now)},
				{Policy: "a-removes", Taint: taint("key1", "old", noSched, &minute), Removed: true}},
			wantOwners: map[string]string{"key1:NoSchedule": "b-adds"},
		},
		{
			name:    "targetClusters: only matching clusters",
			cluster: cluster("False"),
			policies: []*v1alpha1.ClusterTaintPolicy{
				withTarget(policy("elsewhere", t0, readyOut, nil, pt("key1", "", noSched)), &v1alpha1.ClusterAffinity{ClusterNames: []string{"member-2"}}),
				withTarget(policy("edge", t0, readyOut, nil, pt("key2", "", noSched)), &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"site": "edge"}}}),
				withTarget(policy("excluded", t0, readyOut, nil, pt("key3", "", noSched)), &v1alpha1.ClusterAffinity{Exclude: []string{"member-1"}}),
			},
			wantTaints:  []corev1.Taint{taint("key2", "", noSched, &now)},
			wantChanges: []Change{{Policy: "edge", Taint: taint("key2", "", noSched, &now)}},
			wantOwners:  map[string]string{"key2:NoSchedule": "edge"},
		},
		{
			name:        "Karmada's keys are written as Flotilla's",
			cluster:     cluster("False"),
			policies:    []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, nil, pt("cluster.karmada.io/not-ready", "", noExec))},
			wantTaints:  []corev1.Taint{taint(v1alpha1.TaintClusterNotReady, "", noExec, &now)},
			wantChanges: []Change{{Policy: "p", Taint: taint(v1alpha1.TaintClusterNotReady, "", noExec, &now)}},
			wantOwners:  map[string]string{"cluster.flotilla.io/not-ready:NoExecute": "p"},
		},
		{
			name:        "the hub's NoExecute taint is not a policy's while the hub sets it",
			cluster:     cluster("False"),
			opts:        Options{HubNoExecute: true},
			policies:    []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, nil, pt("cluster.karmada.io/not-ready", "", noExec), pt("key1", "", noSched))},
			wantTaints:  []corev1.Taint{taint("key1", "", noSched, &now)},
			wantChanges: []Change{{Policy: "p", Taint: taint("key1", "", noSched, &now)}},
			wantOwners:  map[string]string{"key1:NoSchedule": "p"},
			wantHub:     []Change{{Policy: "p", Taint: taint(v1alpha1.TaintClusterNotReady, "", noExec, nil)}},
		},
		{
			name:       "nor the hub's NoSchedule and terminating taints, ever",
			cluster:    cluster("True", taint(v1alpha1.TaintClusterNotReady, "", noSched, &minute), taint(v1alpha1.TaintClusterTerminating, "", noExec, &minute)),
			policies:   []*v1alpha1.ClusterTaintPolicy{policy("p", t0, nil, readyIn, pt(v1alpha1.TaintClusterNotReady, "", noSched), pt(v1alpha1.TaintClusterTerminating, "", noExec))},
			wantTaints: []corev1.Taint{taint(v1alpha1.TaintClusterNotReady, "", noSched, &minute), taint(v1alpha1.TaintClusterTerminating, "", noExec, &minute)},
			wantOwners: map[string]string{},
			wantHub: []Change{{Policy: "p", Taint: taint(v1alpha1.TaintClusterNotReady, "", noSched, nil), Removed: true},
				{Policy: "p", Taint: taint(v1alpha1.TaintClusterTerminating, "", noExec, nil), Removed: true}},
		},
		{
			name:        "owners of taints gone are forgotten, others kept",
			cluster:     withOwners(cluster("False", taint("key1", "", noSched, &minute)), `{"key1:NoSchedule":"first","gone:NoSchedule":"old"}`),
			policies:    []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, nil, pt("key2", "", noSched))},
			wantTaints:  []corev1.Taint{taint("key1", "", noSched, &minute), taint("key2", "", noSched, &now)},
			wantChanges: []Change{{Policy: "p", Taint: taint("key2", "", noSched, &now)}},
			wantOwners:  map[string]string{"key1:NoSchedule": "first", "key2:NoSchedule": "p"},
		},
		{
			name:        "an annotation that is not JSON reads as no owners",
			cluster:     withOwners(cluster("False"), `not json`),
			policies:    []*v1alpha1.ClusterTaintPolicy{policy("p", t0, readyOut, nil, pt("key1", "", noSched))},
			wantTaints:  []corev1.Taint{taint("key1", "", noSched, &now)},
			wantChanges: []Change{{Policy: "p", Taint: taint("key1", "", noSched, &now)}},
			wantOwners:  map[string]string{"key1:NoSchedule": "p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.cluster.DeepCopy()
			got := Apply(tt.cluster, tt.policies, tt.opts, t0)
			if diff := cmp.Diff(tt.wantTaints, got.Taints, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantChanges, got.Changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOwners, got.Owners); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHub, got.HubOwned); diff != "" {
				t.Errorf("hub-owned (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.cluster); diff != "" {
				t.Errorf("Apply modified the cluster (-before +after):\n%s", diff)
			}
		})
	}
}

func withTarget(p *v1alpha1.ClusterTaintPolicy, a *v1alpha1.ClusterAffinity) *v1alpha1.ClusterTaintPolicy {
	p.Spec.TargetClusters = a
	return p
}

func withOwners(c *v1alpha1.Cluster, annotation string) *v1alpha1.Cluster {
	c.Annotations = map[string]string{v1alpha1.AnnotationTaintPolicies: annotation}
	return c
}
