package objects

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/store"
)

func openObjects(t *testing.T) *Objects {
	t.Helper()
	s, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return New(s)
}

func docs(t *testing.T, yamlDocs ...string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, d := range yamlDocs {
		raw, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

const (
	deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx}
spec:
  replicas: 3
  template: {spec: {containers: [{name: nginx, image: nginx:1.27}]}}`
	policy = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx-propagation}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement: {clusterAffinity: {clusterNames: [member1, member2]}}`
	clusterRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}`
)

func actions(outcomes []Outcome) []string {
	var out []string
	for _, o := range outcomes {
		out = append(out, o.Kind+" "+o.Namespace+"/"+o.Name+" "+o.Action)
	}
	return out
}

func TestApplyCreatesConfiguresAndKeepsStatus(t *testing.T) {
	o := openObjects(t)
	ctx := t.Context()
	got, err := o.Apply(ctx, docs(t, deployment, policy, clusterRole), "", false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Deployment default/nginx created", "PropagationPolicy default/nginx-propagation created", "ClusterRole /reader created"}
	if diff := cmp.Diff(want, actions(got)); diff != "" {
		t.Fatalf("first apply (-want +got):\n%s", diff)
	}
	deployments := o.Template(schema.GroupKind{Group: "apps", Kind: "Deployment"}, true)
	stored, err := deployments.Get(ctx, "default", "nginx")
	if err != nil {
		t.Fatal(err)
	}
	// The hub writes status; a later apply keeps it.
	if err := unstructured.SetNestedField(stored.Object, int64(3), "status", "readyReplicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := deployments.Update(ctx, stored); err != nil {
		t.Fatal(err)
	}
	got, err = o.Apply(ctx, docs(t, deployment, policy), "", false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Deployment default/nginx unchanged", "PropagationPolicy default/nginx-propagation unchanged"}, actions(got)); diff != "" {
		t.Errorf("same documents again (-want +got):\n%s", diff)
	}
	got, err = o.Apply(ctx, docs(t, strings.Replace(deployment, "replicas: 3", "replicas: 9", 1)), "", false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Deployment default/nginx configured"}, actions(got)); diff != "" {
		t.Errorf("scaled (-want +got):\n%s", diff)
	}
	stored, err = deployments.Get(ctx, "default", "nginx")
	if err != nil {
		t.Fatal(err)
	}
	replicas, _, _ := unstructured.NestedInt64(stored.Object, "spec", "replicas")
	ready, _, _ := unstructured.NestedInt64(stored.Object, "status", "readyReplicas")
	if replicas != 9 || ready != 3 || stored.GetGeneration() != 2 {
		t.Errorf("after scaling: replicas %d, status.readyReplicas %d, generation %d; want 9, 3, 2", replicas, ready, stored.GetGeneration())
	}
}

func TestApplyWithAnInvalidItemStoresNothing(t *testing.T) {
	o := openObjects(t)
	badPolicy := strings.Replace(policy, "clusterAffinity:", "replicaScheduling: {replicaSchedulingType: Split}, clusterAffinity:", 1)
	_, err := o.Apply(t.Context(), docs(t, deployment, badPolicy, `apiVersion: v1
kind: ConfigMap
metadata: {name: Bad_Name}`), "", false)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want Invalid", err)
	}
	var fields []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	want := []string{"items[1].spec.placement.replicaScheduling.replicaSchedulingType", "items[2].metadata.name"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	all, _, err := o.Templates.List(t.Context(), "")
	if err != nil || len(all) != 0 {
		t.Errorf("templates stored by a refused apply: %d (%v)", len(all), err)
	}
}

func TestApplyRefusesDuplicatesAndDryRunStoresNothing(t *testing.T) {
	o := openObjects(t)
	if _, err := o.Apply(t.Context(), docs(t, deployment, deployment), "", false); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "items[1]") {
		t.Errorf("duplicate: err = %v, want Invalid naming items[1]", err)
	}
	got, err := o.Apply(t.Context(), docs(t, deployment), "prod", true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Deployment prod/nginx created"}, actions(got)); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if all, _, _ := o.Templates.List(t.Context(), ""); len(all) != 0 {
		t.Errorf("dry run stored %d templates", len(all))
	}
}

func TestDelete(t *testing.T) {
	o := openObjects(t)
	if _, err := o.Apply(t.Context(), docs(t, deployment, policy), "", false); err != nil {
		t.Fatal(err)
	}
	got, err := o.Delete(t.Context(), docs(t, deployment, policy, clusterRole), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Deployment default/nginx deleted", "PropagationPolicy default/nginx-propagation deleted", "ClusterRole /reader not found"}
	if diff := cmp.Diff(want, actions(got)); diff != "" {
		t.Errorf("delete (-want +got):\n%s", diff)
	}
	if all, _, _ := o.Templates.List(t.Context(), ""); len(all) != 0 {
		t.Errorf("%d templates left", len(all))
	}
}

func TestClusterScopedCRDKindsGetNoNamespace(t *testing.T) {
	o := openObjects(t)
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com, scope: Cluster, names: {kind: Widget, plural: widgets}}`
	widget := `apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}`
	got, err := o.Apply(t.Context(), docs(t, crd, widget), "", false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"CustomResourceDefinition /widgets.example.com created", "Widget /w1 created"}, actions(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestApplyUnknownPolicyFieldIsInvalidNotAPanic(t *testing.T) {
	o := openObjects(t)
	_, err := o.Apply(t.Context(), docs(t, strings.Replace(policy, "placement:", "placment:", 1)), "", false)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "items[0].spec.placment") {
		t.Errorf("err = %v, want Invalid naming items[0].spec.placment", err)
	}
}

func TestDeleteNeedsOnlyTheIdentity(t *testing.T) {
	o := openObjects(t)
	if _, err := o.Apply(t.Context(), docs(t, deployment, policy), "", false); err != nil {
		t.Fatal(err)
	}
	got, err := o.Delete(t.Context(), docs(t,
		"apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: nginx-propagation}",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx}\nspec: {replicas: -1}"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PropagationPolicy default/nginx-propagation deleted", "Deployment default/nginx deleted"}
	if diff := cmp.Diff(want, actions(got)); diff != "" {
		t.Errorf("delete by identity (-want +got):\n%s", diff)
	}
}

func TestApplyOfLargeTemplatesFitsOneTransaction(t *testing.T) {
	o := openObjects(t)
	big := strings.Repeat("x", 700<<10)
	var items []json.RawMessage
	for i := range 3 {
		items = append(items, json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big-`+string(rune('a'+i))+`"},"data":{"blob":"`+big+`"}}`))
	}
	if _, err := o.Apply(t.Context(), items, "", false); err != nil {
		t.Fatalf("2.1 MiB of ConfigMaps: %v", err)
	}
}

const rebalancer = `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: demo}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: default}`

func TestApplyRebalancerKeepsStatusAndBumpsGeneration(t *testing.T) {
	o := openObjects(t)
	ctx := t.Context()
	// -n does not give a cluster-scoped kind a namespace.
	got, err := o.Apply(ctx, docs(t, rebalancer), "prod", false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"WorkloadRebalancer /demo created"}, actions(got)); diff != "" {
		t.Fatalf("first apply (-want +got):\n%s", diff)
	}
	if got[0].APIVersion != "apps.flotilla.io/v1alpha1" {
		t.Errorf("outcome apiVersion %q, want Flotilla's", got[0].APIVersion)
	}
	stored, err := o.Rebalancers.Get(ctx, "", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if stored.APIVersion != "apps.flotilla.io/v1alpha1" || stored.Generation != 1 {
		t.Errorf("stored %s generation %d, want apps.flotilla.io/v1alpha1 and 1", stored.APIVersion, stored.Generation)
	}
	stored.Status.ObservedGeneration = 1
	stored.Status.ObservedWorkloads = []appsv1alpha1.ObservedWorkload{{Workload: stored.Spec.Workloads[0], Result: appsv1alpha1.RebalanceSuccessful}}
	if _, err := o.Rebalancers.Update(ctx, stored); err != nil {
		t.Fatal(err)
	}
	if got, err := o.Apply(ctx, docs(t, rebalancer), "", false); err != nil || got[0].Action != ActionUnchanged {
		t.Fatalf("same document again: %v, %v; want unchanged", got, err)
	}
	edited := rebalancer + "\n    - {apiVersion: v1, kind: ConfigMap, name: settings, namespace: default}"
	if got, err := o.Apply(ctx, docs(t, edited), "", false); err != nil || got[0].Action != ActionConfigured {
		t.Fatalf("a workload added: %v, %v; want configured", got, err)
	}
	stored, err = o.Rebalancers.Get(ctx, "", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if stored.Generation != 2 || len(stored.Spec.Workloads) != 2 || stored.Status.ObservedGeneration != 1 || len(stored.Status.ObservedWorkloads) != 1 {
		t.Errorf("after the edit: generation %d, %d workloads, status %+v; want 2, 2 and the status kept", stored.Generation, len(stored.Spec.Workloads), stored.Status)
	}
	got, err = o.Delete(ctx, docs(t, "apiVersion: apps.flotilla.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: demo}"), "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"WorkloadRebalancer /demo deleted"}, actions(got)); diff != "" {
		t.Errorf("delete (-want +got):\n%s", diff)
	}
}

func TestApplyInvalidRebalancerNamesTheField(t *testing.T) {
	o := openObjects(t)
	bad := strings.Replace(rebalancer, "kind: Deployment, ", "", 1)
	_, err := o.Apply(t.Context(), docs(t, deployment, bad, "apiVersion: apps.flotilla.io/v1alpha1\nkind: Rebalancer\nmetadata: {name: x}"), "", false)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want Invalid", err)
	}
	var fields []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	if diff := cmp.Diff([]string{"items[1].spec.workloads[0].kind", "items[2].kind"}, fields); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	if all, _, _ := o.Rebalancers.List(t.Context(), ""); len(all) != 0 {
		t.Errorf("%d rebalancers stored by a refused apply", len(all))
	}
}
