package admission

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

const policy = `
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx, namespace: default, labels: {team: web}}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: nginx}
  placement:
    clusterAffinity: {clusterNames: [member1, member2]}
    clusterTolerations:
      - {key: cluster.flotilla.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 60}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [member1]}, weight: 1}
          - {targetCluster: {clusterNames: [member2]}, weight: 2}
  failover:
    cluster: {purgeMode: Gracefully}
`

const clusterPolicy = `
apiVersion: flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: everywhere}
spec:
  resourceSelectors:
    - {apiVersion: v1, kind: Namespace}
`

const rebalancer = `
apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: demo}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: default}
  ttlSecondsAfterFinished: 60
`

const taintPolicy = `
apiVersion: flotilla.io/v1alpha1
kind: ClusterTaintPolicy
metadata: {name: api-degraded}
spec:
  addOnConditions: [{conditionType: APIServerHealthy, operator: In, statusValues: ["False"]}]
  taints: [{key: example.com/api-degraded, effect: NoSchedule}]
`

const clusterDoc = `
apiVersion: flotilla.io/v1alpha1
kind: Cluster
metadata: {name: member1}
spec:
  region: eu
  taints:
    - {key: example.com/maintenance, value: "true", effect: NoSchedule}
status:
  kubernetesVersion: v1.37.2
`

var (
	ppKind      = schema.GroupVersionKind{Group: "flotilla.io", Version: "v1alpha1", Kind: "PropagationPolicy"}
	cppKind     = schema.GroupVersionKind{Group: "flotilla.io", Version: "v1alpha1", Kind: "ClusterPropagationPolicy"}
	rbKind      = schema.GroupVersionKind{Group: "apps.flotilla.io", Version: "v1alpha1", Kind: "WorkloadRebalancer"}
	clusterGVK  = schema.GroupVersionKind{Group: "flotilla.io", Version: "v1alpha1", Kind: "Cluster"}
	workKind    = schema.GroupVersionKind{Group: "flotilla.io", Version: "v1alpha1", Kind: "Work"}
	karmadaPP   = schema.GroupVersionKind{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "PropagationPolicy"}
	karmadaCPP  = schema.GroupVersionKind{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "ClusterPropagationPolicy"}
	karmadaRB   = schema.GroupVersionKind{Group: "apps.karmada.io", Version: "v1alpha1", Kind: "WorkloadRebalancer"}
	ctpKind     = schema.GroupVersionKind{Group: "flotilla.io", Version: "v1alpha1", Kind: "ClusterTaintPolicy"}
	karmadaCTP  = schema.GroupVersionKind{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "ClusterTaintPolicy"}
	deployments = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
)

// edit replaces from with to in doc, failing the test when from is missing.
func edit(t *testing.T, doc, from, to string) string {
	t.Helper()
	if !strings.Contains(doc, from) {
		t.Fatalf("%q not in %s", from, doc)
	}
	return strings.Replace(doc, from, to, 1)
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name     string
		op       admission.Operation
		gvk      schema.GroupVersionKind
		sub      string
		doc, old string
		want     []metav1.StatusCause // nil: admitted
	}{
		{name: "valid policy", op: admission.Create, gvk: ppKind, doc: policy},
		{name: "valid cluster policy", op: admission.Create, gvk: cppKind, doc: clusterPolicy},
		{name: "valid rebalancer", op: admission.Create, gvk: rbKind, doc: rebalancer},
		{name: "valid cluster", op: admission.Create, gvk: clusterGVK, doc: clusterDoc},
		{name: "valid taint policy", op: admission.Create, gvk: ctpKind, doc: taintPolicy},
		{name: "taint policy with a bad operator", op: admission.Create, gvk: ctpKind, doc: edit(t, taintPolicy, "operator: In", "operator: Exists"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Field: "spec.addOnConditions[0].operator",
				Message: `Unsupported value: "Exists": supported values: "In", "NotIn"`}}},
		{name: "Karmada taint policy naming the hub's taint", op: admission.Create, gvk: karmadaCTP,
			doc: edit(t, edit(t, taintPolicy, "flotilla.io/v1alpha1", "policy.karmada.io/v1alpha1"), "example.com/api-degraded", "cluster.karmada.io/not-ready"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Field: "spec.taints[0].key",
				Message: "Forbidden: the hub sets cluster.flotilla.io/not-ready:NoSchedule itself from the Ready condition; a policy may set only its NoExecute taint (applied when the hub runs with --health-no-execute-taints=false), or use a key of your own"}}},
		{name: "negative weight", op: admission.Create, gvk: ppKind, doc: edit(t, policy, "weight: 1", "weight: -1"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight",
				Message: "Invalid value: -1: must not be negative"}}},
		{name: "several errors", op: admission.Update, gvk: ppKind, old: policy,
			doc: edit(t, edit(t, policy, "Divided", "Split"), "purgeMode: Gracefully", "purgeMode: Later"),
			want: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueNotSupported, Field: "spec.placement.replicaScheduling.replicaSchedulingType",
					Message: `Unsupported value: "Split": supported values: "Duplicated", "Divided"`},
				{Type: metav1.CauseTypeFieldValueNotSupported, Field: "spec.failover.cluster.purgeMode",
					Message: `Unsupported value: "Later": supported values: "Gracefully", "Directly", "Never", "Graciously", "Immediately"`},
			}},
		{name: "selector of another namespace", op: admission.Create, gvk: ppKind, doc: edit(t, policy, "name: nginx}", "name: nginx, namespace: prod}"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.resourceSelectors[0].namespace",
				Message: `Invalid value: "prod": a PropagationPolicy selects templates of its own namespace default only`}}},
		{name: "unknown field", op: admission.Create, gvk: ppKind, doc: edit(t, policy, "purgeMode: Gracefully", "purgeMode: Gracefully, purgeDelay: 3"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Field: "spec.failover.cluster.purgeDelay", Message: "Forbidden: unknown field"}}},
		{name: "cluster policy without selectors", op: admission.Create, gvk: cppKind, doc: edit(t, clusterPolicy, "\n    - {apiVersion: v1, kind: Namespace}", " []"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Field: "spec.resourceSelectors", Message: "Required value: at least one selector"}}},
		{name: "negative rebalancer TTL", op: admission.Create, gvk: rbKind, doc: edit(t, rebalancer, "60", "-1"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.ttlSecondsAfterFinished", Message: "Invalid value: -1: must not be negative"}}},
		{name: "bad taint effect", op: admission.Update, gvk: clusterGVK, old: clusterDoc, doc: edit(t, clusterDoc, "NoSchedule", "Evict"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Field: "spec.taints[0].effect",
				Message: `Unsupported value: "Evict": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute", "PreferNoExecute"`}}},
		{name: "bad taint key and value", op: admission.Create, gvk: clusterGVK, doc: edit(t, clusterDoc, `example.com/maintenance, value: "true"`, `"a/b/c", value: "x y"`),
			want: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.taints[0].key",
					Message: `Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`},
				{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.taints[0].value",
					Message: `Invalid value: "x y": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
			}},
		{name: "Karmada policy", op: admission.Create, gvk: karmadaPP, doc: edit(t, edit(t, policy, "flotilla.io/v1alpha1", "policy.karmada.io/v1alpha1"), "weight: 2", "weight: -2"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.placement.replicaScheduling.weightPreference.staticWeightList[1].weight",
				Message: "Invalid value: -2: must not be negative"}}},
		{name: "Karmada policy with overflow tiers and static weights", op: admission.Create, gvk: karmadaPP,
			doc: edit(t, edit(t, policy, "flotilla.io/v1alpha1", "policy.karmada.io/v1alpha1"), "clusterAffinity: {clusterNames: [member1, member2]}",
				"clusterAffinities: [{affinityName: idc, clusterNames: [member1], overflowAffinities: [{affinityName: cloud, clusterNames: [member2]}]}]"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Field: "spec.placement.clusterAffinities[0].overflowAffinities",
				Message: "Forbidden: overflow tiers need replicaScheduling Divided with weightPreference.dynamicWeight or replicaDivisionPreference Aggregated: only a division by room fills one tier before the next"}}},
		{name: "Karmada policy's state preservation", op: admission.Create, gvk: karmadaPP,
			doc: edit(t, edit(t, policy, "flotilla.io/v1alpha1", "policy.karmada.io/v1alpha1"), "purgeMode: Gracefully",
				`purgeMode: Directly, statePreservation: {rules: [{aliasLabelName: "example.com/rev", jsonPath: "{.updateRevision"}]}`),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.failover.cluster.statePreservation.rules[0].jsonPath",
				Message: `Invalid value: "{.updateRevision": does not parse as a JSONPath template: unclosed action`}}},
		{name: "Karmada cluster policy", op: admission.Create, gvk: karmadaCPP, doc: edit(t, clusterPolicy, "kind: Namespace", "kind: \"\""),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Field: "spec.resourceSelectors[0].kind", Message: "Required value"}}},
		{name: "Karmada rebalancer", op: admission.Create, gvk: karmadaRB, doc: edit(t, rebalancer, "name: nginx,", "name: Nginx,"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.workloads[0].name",
				Message: `Invalid value: "Nginx": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}}},
		{name: "status of an invalid rebalancer", op: admission.Update, gvk: rbKind, sub: "status",
			old: edit(t, rebalancer, "60", "-1"), doc: edit(t, rebalancer, "60", "-1") + "status: {observedGeneration: 2}\n"},
		{name: "finalizer on an invalid policy", op: admission.Update, gvk: ppKind,
			old: edit(t, policy, "weight: 1", "weight: -1"),
			doc: edit(t, edit(t, policy, "weight: 1", "weight: -1"), "labels: {team: web}", "labels: {team: web}, finalizers: [example.com/keep], annotations: {a: b}")},
		{name: "label change on an invalid policy", op: admission.Update, gvk: ppKind,
			old: edit(t, policy, "weight: 1", "weight: -1"),
			doc: edit(t, edit(t, policy, "weight: 1", "weight: -1"), "team: web", "team: api"),
			want: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight",
				Message: "Invalid value: -1: must not be negative"}}},
		{name: "other kind of the group", op: admission.Create, gvk: workKind, doc: "apiVersion: flotilla.io/v1alpha1\nkind: Work\nmetadata: {name: w, namespace: x}\nspec: {nonsense: -1}"},
		{name: "template", op: admission.Create, gvk: deployments, doc: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: default}\nspec: {replicas: -1}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request{op: tt.op, gvk: tt.gvk, resource: "things", subresource: tt.sub, obj: object(t, tt.doc)}
			if tt.old != "" {
				r.old = object(t, tt.old)
			}
			obj := r.obj.DeepCopyObject()
			v := NewValidation()
			if !v.Handles(tt.op) {
				t.Fatalf("does not handle %s", tt.op)
			}
			err := v.Validate(context.Background(), r.attributes(), nil)
			if diff := cmp.Diff(obj, r.obj); diff != "" {
				t.Errorf("object changed (-before +after):\n%s", diff)
			}
			if tt.want == nil {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			status, ok := err.(apierrors.APIStatus)
			if !ok || !apierrors.IsInvalid(err) {
				t.Fatalf("error = %v, want Invalid", err)
			}
			details := status.Status().Details
			name := r.obj.(interface{ GetName() string }).GetName()
			if details.Group != tt.gvk.Group || details.Kind != tt.gvk.Kind || details.Name != name {
				t.Errorf("details name %s %s %s, want %s %s %s", details.Group, details.Kind, details.Name, tt.gvk.Group, tt.gvk.Kind, name)
			}
			if diff := cmp.Diff(tt.want, details.Causes); diff != "" {
				t.Errorf("causes (-want +got):\n%s", diff)
			}
			for _, c := range tt.want {
				if line := c.Field + ": " + c.Message; !strings.Contains(err.Error(), line) {
					t.Errorf("message %q does not say %q", err.Error(), line)
				}
			}
		})
	}
}
