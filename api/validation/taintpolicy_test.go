package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// karmadaTaintPolicy is Karmada's documented ClusterTaintPolicy, as a
// Karmada user writes it: NoExecute on a cluster that is not Ready.
const karmadaTaintPolicy = `
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: detect-cluster-notready
spec:
  targetClusters:
    clusterNames: [member1, member2]
  addOnConditions:
    - conditionType: Ready
      operator: NotIn
      statusValues: ["True"]
  removeOnConditions:
    - conditionType: Ready
      operator: In
      statusValues: ["True"]
  taints:
    - key: cluster.karmada.io/not-ready
      effect: NoExecute
    - key: example.com/degraded
      value: api
      effect: NoSchedule
`

func TestKarmadaTaintPolicyIsAccepted(t *testing.T) {
	p, errs := ClusterTaintPolicy(jsonOf(t, karmadaTaintPolicy))
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs.ToAggregate())
	}
	if p.APIVersion != v1alpha1.APIVersion || p.Kind != v1alpha1.KindClusterTaintPolicy {
		t.Errorf("type = %s %s, want Flotilla's", p.APIVersion, p.Kind)
	}
	want := []v1alpha1.PolicyTaint{{Key: "cluster.karmada.io/not-ready", Effect: "NoExecute"}, {Key: "example.com/degraded", Value: "api", Effect: "NoSchedule"}}
	if diff := cmp.Diff(want, p.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
}

func TestTaintPolicyErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, from, to string
		want           []string
	}{
		{"no taints", "taints:\n    - key: cluster.karmada.io/not-ready\n      effect: NoExecute\n    - key: example.com/degraded\n      value: api\n      effect: NoSchedule\n",
			"taints: []\n", []string{"spec.taints: Required value: at least one taint"}},
		{"duplicate key and effect", "key: example.com/degraded\n      value: api\n      effect: NoSchedule", "key: cluster.flotilla.io/not-ready\n      effect: NoExecute",
			[]string{`spec.taints[1]: Duplicate value: "same key and effect (cluster.flotilla.io/not-ready:NoExecute) as spec.taints[0]"`}},
		{"same key, other effect", "effect: NoSchedule", "effect: PreferNoSchedule", nil},
		{"bad key", "key: example.com/degraded", "key: -bad-", []string{`spec.taints[1].key: Invalid value: "-bad-"`}},
		{"bad value", "value: api", "value: not ok", []string{`spec.taints[1].value: Invalid value: "not ok"`}},
		{"bad effect", "effect: NoSchedule", "effect: Evict", []string{`spec.taints[1].effect: Unsupported value: "Evict"`}},
		{"hub's NoSchedule", "key: example.com/degraded", "key: cluster.karmada.io/unreachable",
			[]string{"spec.taints[1].key: Forbidden: the hub sets cluster.flotilla.io/unreachable:NoSchedule itself from the Ready condition"}},
		{"hub's terminating", "key: example.com/degraded\n      value: api\n      effect: NoSchedule", "key: cluster.flotilla.io/terminating\n      effect: NoExecute",
			[]string{"spec.taints[1].key: Forbidden: the hub sets cluster.flotilla.io/terminating itself"}},
		{"hub's unschedulable", "key: example.com/degraded", "key: cluster.flotilla.io/unschedulable",
			[]string{"spec.taints[1].key: Forbidden: the hub sets cluster.flotilla.io/unschedulable itself"}},
		{"bad operator", "operator: NotIn", "operator: Exists", []string{`spec.addOnConditions[0].operator: Unsupported value: "Exists"`}},
		{"no condition type", "- conditionType: Ready\n      operator: In", "- conditionType: \"\"\n      operator: In",
			[]string{"spec.removeOnConditions[0].conditionType: Required value"}},
		{"bad condition type", "- conditionType: Ready\n      operator: In", "- conditionType: not a type\n      operator: In",
			[]string{`spec.removeOnConditions[0].conditionType: Invalid value: "not a type"`}},
		{"no status values", `operator: In
      statusValues: ["True"]`, `operator: In
      statusValues: []`, []string{"spec.removeOnConditions[0].statusValues: Required value"}},
		{"bad status value", `operator: In
      statusValues: ["True"]`, `operator: In
      statusValues: ["true"]`, []string{`spec.removeOnConditions[0].statusValues[0]: Unsupported value: "true"`}},
		{"bad target", "clusterNames: [member1, member2]", "fieldSelector:\n      matchExpressions: [{key: color, operator: In, values: [red]}]",
			[]string{`spec.targetClusters.fieldSelector.matchExpressions[0].key: Unsupported value: "color"`}},
		{"unknown field", "  taints:\n", "  taint: []\n  taints:\n", []string{"spec.taint: Forbidden: unknown field"}},
		{"namespaced", "name: detect-cluster-notready\n", "name: detect-cluster-notready\n  namespace: default\n", []string{"metadata.namespace: Forbidden: the kind is cluster-scoped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(karmadaTaintPolicy, tt.from, tt.to, 1)
			if doc == karmadaTaintPolicy {
				t.Fatalf("%q not in the policy", tt.from)
			}
			_, errs := ClusterTaintPolicy(jsonOf(t, doc))
			// Each error starts with the wanted text (the rest explains it).
			var got []string
			for i, e := range errs {
				msg := e.Error()
				if i < len(tt.want) && strings.HasPrefix(msg, tt.want[i]) {
					msg = tt.want[i]
				}
				got = append(got, msg)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalTaintKey(t *testing.T) {
	for in, want := range map[string]string{
		"cluster.karmada.io/not-ready":  "cluster.flotilla.io/not-ready",
		"cluster.karmada.io/custom":     "cluster.flotilla.io/custom",
		"cluster.flotilla.io/not-ready": "cluster.flotilla.io/not-ready",
		"example.com/karmada.io/x":      "example.com/karmada.io/x",
	} {
		if got := v1alpha1.NormalTaintKey(in); got != want {
			t.Errorf("NormalTaintKey(%q) = %q, want %q", in, got, want)
		}
	}
}
