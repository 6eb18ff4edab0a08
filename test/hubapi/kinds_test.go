package hubapi

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// TestEveryKindServes creates, gets and lists an object of every Flotilla
// kind through the typed clientset, and writes and reads back the status of
// the kinds that have one.
func TestEveryKindServes(t *testing.T) {
	env := Start(t)
	env.Cleanup(t)
	ns := env.Namespace(t)
	fl, apps := env.Flotilla.FlotillaV1alpha1(), env.Flotilla.AppsV1alpha1()
	when := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	condition := func(kind, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: kind, Status: metav1.ConditionTrue, Reason: reason, Message: "test", LastTransitionTime: when}}
	}
	deployment := v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}
	selectors := []v1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}
	setBindingStatus := func(s *v1alpha1.ResourceBindingStatus) {
		s.SchedulerObservedGeneration = 1
		s.LastScheduledTime = &when
		s.Conditions = condition(v1alpha1.BindingConditionScheduled, v1alpha1.ReasonScheduled)
	}

	// Each test returns whether the kind's client writes a status.
	tests := map[string]func(t *testing.T) bool{
		"clusters.flotilla.io": func(t *testing.T) bool {
			return serves(t, fl.Clusters(),
				&v1alpha1.Cluster{ObjectMeta: named("member-1"), Spec: v1alpha1.ClusterSpec{Region: "eu-west"}},
				func(c *v1alpha1.Cluster) {
					c.Status.KubernetesVersion = "v1.37.2"
					c.Status.NodeSummary = &v1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 3}
					c.Status.Conditions = condition(v1alpha1.ClusterConditionReady, v1alpha1.ReasonClusterReady)
				})
		},
		"propagationpolicies.flotilla.io": func(t *testing.T) bool {
			return serves(t, fl.PropagationPolicies(ns),
				&v1alpha1.PropagationPolicy{ObjectMeta: named("web"), Spec: v1alpha1.PropagationSpec{ResourceSelectors: selectors}},
				nil)
		},
		"clusterpropagationpolicies.flotilla.io": func(t *testing.T) bool {
			return serves(t, fl.ClusterPropagationPolicies(),
				&v1alpha1.ClusterPropagationPolicy{ObjectMeta: named("web"), Spec: v1alpha1.PropagationSpec{ResourceSelectors: selectors}},
				nil)
		},
		"resourcebindings.flotilla.io": func(t *testing.T) bool {
			return serves(t, fl.ResourceBindings(ns),
				&v1alpha1.ResourceBinding{ObjectMeta: named("web-deployment"), Spec: v1alpha1.ResourceBindingSpec{Resource: deployment, Replicas: 3}},
				func(b *v1alpha1.ResourceBinding) { setBindingStatus(&b.Status) })
		},
		"clusterresourcebindings.flotilla.io": func(t *testing.T) bool {
			role := v1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "viewer"}
			return serves(t, fl.ClusterResourceBindings(),
				&v1alpha1.ClusterResourceBinding{ObjectMeta: named("viewer-clusterrole"), Spec: v1alpha1.ResourceBindingSpec{Resource: role}},
				func(b *v1alpha1.ClusterResourceBinding) { setBindingStatus(&b.Status) })
		},
		"works.flotilla.io": func(t *testing.T) bool {
			manifest := v1alpha1.Manifest{RawExtension: runtime.RawExtension{
				Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"kept":"as written"}}`),
			}}
			return serves(t, fl.Works(ns),
				&v1alpha1.Work{ObjectMeta: named("web-deployment"), Spec: v1alpha1.WorkSpec{Workload: v1alpha1.WorkloadTemplate{Manifests: []v1alpha1.Manifest{manifest}}}},
				func(w *v1alpha1.Work) {
					w.Status.ObservedGeneration = 1
					w.Status.Conditions = condition(v1alpha1.WorkConditionApplied, v1alpha1.ReasonAppliedSuccessful)
				})
		},
		"purgerequests.flotilla.io": func(t *testing.T) bool {
			return serves(t, fl.PurgeRequests(),
				&v1alpha1.PurgeRequest{ObjectMeta: named("purge-web"), Spec: v1alpha1.PurgeRequestSpec{
					Binding: v1alpha1.BindingReference{Namespace: ns, Name: "web-deployment"}, Cluster: "member-1",
				}},
				func(r *v1alpha1.PurgeRequest) {
					r.Status.Result = v1alpha1.PurgeResultPurged
					r.Status.FinishTime = &when
				})
		},
		"clustertaintpolicies.flotilla.io": func(t *testing.T) bool {
			return serves(t, fl.ClusterTaintPolicies(),
				&v1alpha1.ClusterTaintPolicy{ObjectMeta: named("api-degraded"), Spec: v1alpha1.ClusterTaintPolicySpec{
					AddOnConditions: []v1alpha1.MatchCondition{{ConditionType: "APIServerHealthy", Operator: v1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{"False"}}},
					Taints:          []v1alpha1.PolicyTaint{{Key: "example.com/api-degraded", Effect: "NoSchedule"}},
				}},
				nil)
		},
		"workloadrebalancers.apps.flotilla.io": func(t *testing.T) bool {
			workload := appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}
			return serves(t, apps.WorkloadRebalancers(),
				&appsv1alpha1.WorkloadRebalancer{ObjectMeta: named("rebalance-web"), Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{workload}}},
				func(r *appsv1alpha1.WorkloadRebalancer) {
					r.Status.ObservedGeneration = 1
					r.Status.FinishTime = &when
					r.Status.ObservedWorkloads = []appsv1alpha1.ObservedWorkload{{Workload: workload, Result: appsv1alpha1.RebalanceSuccessful}}
				})
		},
	}

	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range all {
		test, ok := tests[crd.Name]
		if !ok {
			t.Errorf("CRD %s has no test here", crd.Name)
			continue
		}
		delete(tests, crd.Name)
		t.Run(crd.Spec.Names.Kind, func(t *testing.T) {
			wantStatus := slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
				return v.Subresources != nil && v.Subresources.Status != nil
			})
			if gotStatus := test(t); gotStatus != wantStatus {
				t.Errorf("status written: %v; CRD has a status subresource: %v", gotStatus, wantStatus)
			}
		})
	}
	for name := range tests {
		t.Errorf("test for %s, which crds.All does not have", name)
	}
}

// kindAPI is the part of a typed client serves uses.
type kindAPI[T any, L runtime.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	List(context.Context, metav1.ListOptions) (L, error)
}

// statusAPI is the status part of a typed client, for kinds with a status.
type statusAPI[T any] interface {
	UpdateStatus(context.Context, T, metav1.UpdateOptions) (T, error)
}

type object interface {
	runtime.Object
	metav1.Object
}

// serves creates obj through api, whose typed client interface is I, gets
// it, finds it in the list and, with setStatus, writes a status through
// UpdateStatus and reads it back unchanged. It returns whether it wrote a
// status.
func serves[T object, L runtime.Object, I kindAPI[T, L]](t *testing.T, api I, obj T, setStatus func(T)) bool {
	t.Helper()
	ctx := t.Context()
	created, err := api.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.GetUID() != created.GetUID() {
		t.Errorf("get returned uid %s, create %s", got.GetUID(), created.GetUID())
	}
	if diff := cmp.Diff(field(t, obj, "spec"), field(t, got, "spec")); diff != "" {
		t.Errorf("spec after create (-sent +stored):\n%s", diff)
	}
	list, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(items, func(item runtime.Object) bool { return item.(metav1.Object).GetName() == obj.GetName() }) {
		t.Errorf("list of %d items does not hold %s", len(items), obj.GetName())
	}

	// The concrete client has UpdateStatus in any case; its interface has it
	// only for kinds with a status.
	_, hasStatus := reflect.TypeFor[I]().MethodByName("UpdateStatus")
	if setStatus == nil {
		if hasStatus {
			t.Error("the client has UpdateStatus, but the test sets no status")
		}
		return false
	}
	if !hasStatus {
		t.Fatal("the test sets a status, but the client has no UpdateStatus")
	}
	setStatus(got)
	if _, err := any(api).(statusAPI[T]).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	again, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after status update: %v", err)
	}
	if diff := cmp.Diff(field(t, got, "status"), field(t, again, "status")); diff != "" {
		t.Errorf("status (-written +read):\n%s", diff)
	}
	return true
}

// field returns a top-level field of obj as JSON values.
func field(t *testing.T, obj runtime.Object, name string) any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u[name]
}

func named(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
