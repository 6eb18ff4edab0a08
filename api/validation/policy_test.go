package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// karmadaPolicy is the seed example, as a Karmada user writes it.
const karmadaPolicy = `
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
  namespace: default
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    clusterTolerations:
      - key: cluster.karmada.io/not-ready
        operator: Exists
        effect: NoExecute
        tolerationSeconds: 60
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference:
        staticWeightList:
          - targetCluster:
              clusterNames: [member1]
            weight: 1
          - targetCluster:
              clusterNames: [member2]
            weight: 2
  failover:
    cluster:
      purgeMode: Gracefully
`

func jsonOf(t *testing.T, doc string) []byte {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestKarmadaPolicyIsAccepted(t *testing.T) {
	p, errs := PropagationPolicy(jsonOf(t, karmadaPolicy))
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs.ToAggregate())
	}
	if p.APIVersion != "flotilla.io/v1alpha1" || len(p.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList) != 2 {
		t.Errorf("decoded %s with %+v", p.APIVersion, p.Spec.Placement.ReplicaScheduling)
	}
}

func TestPolicyErrorsNameTheField(t *testing.T) {
	tests := []struct{ name, from, to, want string }{
		{"bad scheduling type", "replicaSchedulingType: Divided", "replicaSchedulingType: Split", `spec.placement.replicaScheduling.replicaSchedulingType: Unsupported value: "Split"`},
		{"unknown field", "purgeMode: Gracefully", "purgeMode: Gracefully\n      purgeDelay: 3", "spec.failover.cluster.purgeDelay: Forbidden: unknown field"},
		{"negative weight", "weight: 2", "weight: -2", "spec.placement.replicaScheduling.weightPreference.staticWeightList[1].weight: Invalid value: -2"},
		{"no selectors", "resourceSelectors:\n    - apiVersion: apps/v1\n      kind: Deployment\n      name: nginx", "resourceSelectors: []", "spec.resourceSelectors: Required value"},
		{"other namespace", "name: nginx\n  placement", "name: nginx\n      namespace: prod\n  placement", "spec.resourceSelectors[0].namespace: Invalid value: \"prod\""},
		{"bad purge mode", "purgeMode: Gracefully", "purgeMode: Later", `spec.failover.cluster.purgeMode: Unsupported value: "Later"`},
		{"fencing at zero", "purgeMode: Gracefully", "purgeMode: Gracefully\n      fencing: {stopAfterSeconds: 0}", "spec.failover.cluster.fencing.stopAfterSeconds: Invalid value: 0: must be positive"},
		{"fencing over 30 days", "purgeMode: Gracefully", "purgeMode: Gracefully\n      fencing: {stopAfterSeconds: 2592001}", "spec.failover.cluster.fencing.stopAfterSeconds: Invalid value: 2592001: must be at most 2592000 (30 days)"},
		{"state label key", "purgeMode: Gracefully", "purgeMode: Directly\n      statePreservation: {rules: [{aliasLabelName: 'bad key!', jsonPath: '{.replicas}'}]}",
			`spec.failover.cluster.statePreservation.rules[0].aliasLabelName: Invalid value: "bad key!": not a valid label key`},
		{"state label key duplicated", "purgeMode: Gracefully", "purgeMode: Directly\n      statePreservation: {rules: [{aliasLabelName: a, jsonPath: '{.x}'}, {aliasLabelName: a, jsonPath: '{.y}'}]}",
			`spec.failover.cluster.statePreservation.rules[1].aliasLabelName: Duplicate value: "a"`},
		{"state jsonPath", "purgeMode: Gracefully", "purgeMode: Directly\n      statePreservation: {rules: [{aliasLabelName: example.com/rev, jsonPath: '{ %health }'}]}",
			`spec.failover.cluster.statePreservation.rules[0].jsonPath: Invalid value: "{ %health }": does not parse as a JSONPath template`},
		{"state jsonPath unclosed", "purgeMode: Gracefully", "purgeMode: Directly\n      statePreservation: {rules: [{aliasLabelName: rev, jsonPath: '{.updateRevision'}]}",
			`spec.failover.cluster.statePreservation.rules[0].jsonPath: Invalid value: "{.updateRevision"`},
		{"state jsonPath missing", "purgeMode: Gracefully", "purgeMode: Directly\n      statePreservation: {rules: [{aliasLabelName: rev, jsonPath: ''}]}",
			`spec.failover.cluster.statePreservation.rules[0].jsonPath: Required value`},
		{"state jsonPath too long", "purgeMode: Gracefully", "purgeMode: Directly\n      statePreservation: {rules: [{aliasLabelName: rev, jsonPath: '{.a" + strings.Repeat("a", 1024) + "}'}]}",
			`spec.failover.cluster.statePreservation.rules[0].jsonPath: Too long: may not be more than 1024 bytes`},
		{"state no rules", "purgeMode: Gracefully", "purgeMode: Directly\n      statePreservation: {rules: []}",
			`spec.failover.cluster.statePreservation.rules: Required value`},
		{"state too many rules", "purgeMode: Gracefully", "purgeMode: Directly\n      statePreservation: {rules: [" + strings.Repeat("{aliasLabelName: a, jsonPath: '{.x}'}, ", 16) + "{aliasLabelName: b, jsonPath: '{.x}'}]}",
			`spec.failover.cluster.statePreservation.rules: Too many: 17: must have at most 16 items`},
		{"application state label key", "purgeMode: Gracefully", "purgeMode: Gracefully\n    application:\n      statePreservation: {rules: [{aliasLabelName: '-x', jsonPath: '{.replicas}'}]}",
			`spec.failover.application.statePreservation.rules[0].aliasLabelName: Invalid value: "-x"`},
		{"toleration seconds on NoSchedule", "effect: NoExecute", "effect: NoSchedule", "spec.placement.clusterTolerations[0].tolerationSeconds"},
		{"no name", "name: nginx-propagation", "name: \"\"", "metadata.name: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(karmadaPolicy, tt.from, tt.to, 1)
			if doc == karmadaPolicy {
				t.Fatalf("%q not in the policy", tt.from)
			}
			_, errs := PropagationPolicy(jsonOf(t, doc))
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tt.want) {
				t.Errorf("errors = %v, want one containing %q", got, tt.want)
			}
		})
	}
}

func TestStatePreservationAccepted(t *testing.T) {
	doc := strings.Replace(karmadaPolicy, "purgeMode: Gracefully", `purgeMode: Directly
      statePreservation:
        rules:
          - {aliasLabelName: example.com/update-revision, jsonPath: "{ .updateRevision }"}
          - {aliasLabelName: ready, jsonPath: "{.readyReplicas}"}`, 1)
	p, errs := PropagationPolicy(jsonOf(t, doc))
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs.ToAggregate())
	}
	if got := len(p.Spec.Failover.Cluster.StatePreservation.Rules); got != 2 {
		t.Errorf("rules = %d, want 2", got)
	}
}

func TestTemplate(t *testing.T) {
	tests := []struct {
		name, doc  string
		namespaced bool
		want       string // "" = valid
	}{
		{"deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx, namespace: default}\nspec: {replicas: 3}", true, ""},
		{"cluster role", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}", false, ""},
		{"namespace on cluster-scoped", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, namespace: b}", false, "metadata.namespace: Forbidden"},
		{"bad name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_OK, namespace: default}", true, "metadata.name: Invalid value"},
		{"negative replicas", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: n, namespace: default}\nspec: {replicas: -1}", true, "spec.replicas"},
		{"string replicas", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: n, namespace: default}\nspec: {replicas: \"3\"}", true, "spec.replicas"},
		{"own kind", "apiVersion: flotilla.io/v1alpha1\nkind: Work\nmetadata: {name: w, namespace: default}", true, "apiVersion: Forbidden"},
		{"no kind", "apiVersion: v1\nmetadata: {name: w, namespace: default}", true, "kind: Required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(jsonOf(t, tt.doc)); err != nil && tt.want != "kind: Required" {
				t.Fatal(err)
			}
			errs := Template(u, tt.namespaced).ToAggregate()
			switch {
			case tt.want == "" && errs != nil:
				t.Errorf("errors = %v, want none", errs)
			case tt.want != "" && (errs == nil || !strings.Contains(errs.Error(), tt.want)):
				t.Errorf("errors = %v, want one containing %q", errs, tt.want)
			}
		})
	}
}

// overflowPolicy is Karmada's example of overflow tiers: on-prem first,
// then the public cloud.
const overflowPolicy = `
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement:
    clusterAffinities:
      - affinityName: on-prem
        clusterNames: [cluster1]
        overflowAffinities:
          - affinityName: public-cloud
            clusterNames: [cluster2, cluster3]
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference: {dynamicWeight: AvailableReplicas}
`

func TestOverflowAffinities(t *testing.T) {
	const tiers = "spec.placement.clusterAffinities[0].overflowAffinities"
	tests := []struct {
		name     string
		from, to string
		want     []string // each in the errors; none: valid
	}{
		{"Karmada's example", "", "", nil},
		{"Aggregated", "replicaDivisionPreference: Weighted", "replicaDivisionPreference: Aggregated", nil},
		{"empty division preference with dynamic weight", "      replicaDivisionPreference: Weighted\n", "", nil},
		{"static weights", "weightPreference: {dynamicWeight: AvailableReplicas}", "weightPreference: {staticWeightList: [{targetCluster: {clusterNames: [cluster1]}, weight: 1}]}",
			[]string{tiers + ": Forbidden: overflow tiers need replicaScheduling Divided with weightPreference.dynamicWeight or replicaDivisionPreference Aggregated"}},
		{"Duplicated", "replicaSchedulingType: Divided", "replicaSchedulingType: Duplicated", []string{tiers + ": Forbidden: overflow tiers need"}},
		{"no replica scheduling", "    replicaScheduling:\n      replicaDivisionPreference: Weighted\n      replicaSchedulingType: Divided\n      weightPreference: {dynamicWeight: AvailableReplicas}\n", "",
			[]string{tiers + ": Forbidden: overflow tiers need"}},
		{"an empty list counts as set", "overflowAffinities:\n          - affinityName: public-cloud\n            clusterNames: [cluster2, cluster3]", "overflowAffinities: []\n",
			nil},
		{"no primary tier", "        clusterNames: [cluster1]\n", "", []string{tiers + ": Forbidden: overflow tiers need the group's own clusterNames"}},
		{"tier named as the group", "affinityName: public-cloud", "affinityName: on-prem",
			[]string{tiers + `[0].affinityName: Invalid value: "on-prem": already names the group or an earlier tier of it`}},
		{"two tiers with one name", "            clusterNames: [cluster2, cluster3]", "            clusterNames: [cluster2]\n          - affinityName: public-cloud\n            clusterNames: [cluster3]",
			[]string{tiers + `[1].affinityName: Invalid value: "public-cloud": already names`}},
		{"tier without a name", "affinityName: public-cloud", "affinityName: \"\"", []string{tiers + "[0].affinityName: Required value: each overflow tier needs a name"}},
		{"tier name not a label key", "affinityName: public-cloud", "affinityName: public cloud", []string{tiers + `[0].affinityName: Invalid value: "public cloud"`}},
		{"bad field selector in a tier", "            clusterNames: [cluster2, cluster3]", "            fieldSelector: {matchExpressions: [{key: planet, operator: In, values: [earth]}]}",
			[]string{tiers + `[0].fieldSelector.matchExpressions[0].key: Unsupported value: "planet"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(overflowPolicy, tt.from, tt.to, 1)
			if tt.from != "" && doc == overflowPolicy {
				t.Fatalf("%q not in the policy", tt.from)
			}
			p, errs := PropagationPolicy(jsonOf(t, doc))
			if len(tt.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("errors: %v", errs.ToAggregate())
				}
				if tt.from == "" && len(p.Spec.Placement.ClusterAffinities[0].OverflowAffinities) != 1 {
					t.Errorf("overflow tiers decoded as %+v", p.Spec.Placement.ClusterAffinities[0])
				}
				return
			}
			got := errs.ToAggregate()
			for _, want := range tt.want {
				if got == nil || !strings.Contains(got.Error(), want) {
					t.Errorf("errors = %v, want one containing %q", got, want)
				}
			}
		})
	}
}
