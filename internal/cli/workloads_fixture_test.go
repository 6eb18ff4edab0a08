package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// newWorkloadHub is a hub with templates, policies, bindings and Works of a
// workload in failover: the Deployment shop/nginx runs on member1 and
// member2 and is being evicted from member3. The ConfigMap shop/nginx-conf
// has no binding (yet).
func newWorkloadHub(t *testing.T) *testHub {
	t.Helper()
	h := newHub(t)
	ctx := context.Background()
	nginx, err := h.Kube.AppsV1().Deployments("shop").Create(ctx, deployment("shop", "nginx", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nginx.Status = appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2}
	if _, err := h.Kube.AppsV1().Deployments("shop").UpdateStatus(ctx, nginx, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Kube.AppsV1().Deployments("default").Create(ctx, deployment("default", "web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	conf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nginx-conf", Namespace: "shop"}, Data: map[string]string{"a": "b"}}
	if _, err := h.Kube.CoreV1().ConfigMaps("shop").Create(ctx, conf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policies := h.Flotilla.FlotillaV1alpha1()
	for _, p := range []v1alpha1.PropagationPolicy{nginxPolicy(), webPolicy()} {
		if _, err := policies.PropagationPolicies(p.Namespace).Create(ctx, &p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	everything := everythingPolicy()
	if _, err := policies.ClusterPropagationPolicies().Create(ctx, &everything, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.addBinding(t, nginxBinding())
	h.addBinding(t, webBinding())
	h.addClusterBinding(t, namespaceBinding())
	for _, w := range workloadWorks() {
		h.addWork(t, w)
	}
	for _, e := range []corev1.Event{
		bindingEvent(kindResourceBinding, "shop", "nginx-deployment", "Normal", "Scheduled", "scheduled to member1:2, member2:1", 3*time.Hour),
		bindingEvent(kindResourceBinding, "shop", "nginx-deployment", "Warning", "EvictionStarted", "cluster member3\nis unreachable", 2*time.Minute),
		bindingEvent(kindResourceBinding, "default", "nginx-deployment", "Normal", "Scheduled", "not this one", time.Minute),
		bindingEvent(kindClusterResourceBinding, "", "shop-namespace", "Normal", "Scheduled", "scheduled to member1, member2", 24*time.Hour),
	} {
		h.addEvent(t, e)
	}
	return h
}

// deployment is a Deployment template with replicas replicas.
func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
			},
		},
	}
}

// addBinding creates a binding and writes its status, as the hub's
// controllers do.
func (h *testHub) addBinding(t *testing.T, b v1alpha1.ResourceBinding) *v1alpha1.ResourceBinding {
	t.Helper()
	bindings := h.Flotilla.FlotillaV1alpha1().ResourceBindings(b.Namespace)
	stored, err := bindings.Create(context.Background(), &b, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create binding %s/%s: %v", b.Namespace, b.Name, err)
	}
	stored.Status = b.Status
	if stored, err = bindings.UpdateStatus(context.Background(), stored, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of binding %s/%s: %v", b.Namespace, b.Name, err)
	}
	return stored
}

func (h *testHub) addClusterBinding(t *testing.T, b v1alpha1.ClusterResourceBinding) *v1alpha1.ClusterResourceBinding {
	t.Helper()
	bindings := h.Flotilla.FlotillaV1alpha1().ClusterResourceBindings()
	stored, err := bindings.Create(context.Background(), &b, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create cluster binding %s: %v", b.Name, err)
	}
	stored.Status = b.Status
	if stored, err = bindings.UpdateStatus(context.Background(), stored, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of cluster binding %s: %v", b.Name, err)
	}
	return stored
}

// addWork creates a Work at generation w.Generation (each change of its
// manifests is one, and so is the deletion), writes its status and, for a
// Work with a deletionTimestamp, deletes it: it stays as a tombstone, held
// by the finalizer the hub gives every Work.
func (h *testHub) addWork(t *testing.T, w v1alpha1.Work) {
	t.Helper()
	ctx := context.Background()
	works := h.Flotilla.FlotillaV1alpha1().Works(w.Namespace)
	gen, tombstone, status := w.Generation, w.DeletionTimestamp != nil, w.Status
	w.Generation, w.DeletionTimestamp, w.Status = 0, nil, v1alpha1.WorkStatus{}
	w.Finalizers = []string{v1alpha1.WorkFinalizer}
	w.Spec.Workload.Manifests = []v1alpha1.Manifest{workManifest(1)}
	stored, err := works.Create(ctx, &w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create work %s/%s: %v", w.Namespace, w.Name, err)
	}
	if tombstone {
		gen-- // the deletion is one more generation
	}
	for stored.Generation < gen {
		stored.Spec.Workload.Manifests = []v1alpha1.Manifest{workManifest(stored.Generation + 1)}
		if stored, err = works.Update(ctx, stored, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update work %s/%s: %v", w.Namespace, w.Name, err)
		}
	}
	stored.Status = status
	if _, err = works.UpdateStatus(ctx, stored, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of work %s/%s: %v", w.Namespace, w.Name, err)
	}
	if tombstone {
		if err := works.Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete work %s/%s: %v", w.Namespace, w.Name, err)
		}
	}
}

// workManifest is a ConfigMap manifest whose name changes with gen.
func workManifest(gen int64) v1alpha1.Manifest {
	raw := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"generation-%d"}}`, gen)
	return v1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(raw)}}
}

var (
	policyTypeMeta  = v1alpha1.TypeMeta("PropagationPolicy")
	bindingTypeMeta = v1alpha1.TypeMeta(kindResourceBinding)
)

// nginxPlacement divides replicas 2:1 between member1 and the others, and
// tolerates an unreachable cluster for a minute.
func nginxPlacement() *v1alpha1.Placement {
	return &v1alpha1.Placement{
		ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}},
		ClusterTolerations: []corev1.Toleration{{
			Key: v1alpha1.TaintClusterUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(60)),
		}},
		ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference: &v1alpha1.ClusterPreferences{StaticWeightList: []v1alpha1.StaticClusterWeight{
				{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 2},
				{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: []string{"member2", "member3"}}, Weight: 1},
			}},
		},
	}
}

func nginxPolicy() v1alpha1.PropagationPolicy {
	return v1alpha1.PropagationPolicy{
		TypeMeta:   policyTypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-propagation", Namespace: "shop"},
		Spec: v1alpha1.PropagationSpec{
			Priority: ptr(int32(10)),
			ResourceSelectors: []v1alpha1.ResourceSelector{
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "nginx-conf"},
			},
			Placement: *nginxPlacement(),
		},
	}
}

func webPolicy() v1alpha1.PropagationPolicy {
	return v1alpha1.PropagationPolicy{
		TypeMeta:   policyTypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1alpha1.PropagationSpec{ResourceSelectors: []v1alpha1.ResourceSelector{
			{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		}},
	}
}

func everythingPolicy() v1alpha1.ClusterPropagationPolicy {
	return v1alpha1.ClusterPropagationPolicy{
		TypeMeta:   v1alpha1.TypeMeta("ClusterPropagationPolicy"),
		ObjectMeta: metav1.ObjectMeta{Name: "everything"},
		Spec: v1alpha1.PropagationSpec{
			ResourceSelectors: []v1alpha1.ResourceSelector{
				{APIVersion: "v1", Kind: "Namespace", Name: "shop"},
				{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop"},
				{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Secret"}, {APIVersion: "v1", Kind: "Service"},
			},
			Placement: v1alpha1.Placement{ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceAggregated,
			}},
		},
	}
}

func condition(typ string, status metav1.ConditionStatus, reason, msg string, d time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: ago(d)}
}

func observed(c metav1.Condition, gen int64) metav1.Condition {
	c.ObservedGeneration = gen
	return c
}

func rawStatus(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

func nginxBinding() v1alpha1.ResourceBinding {
	return v1alpha1.ResourceBinding{
		TypeMeta:   bindingTypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "shop"},
		Spec: v1alpha1.ResourceBindingSpec{
			Resource:  v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "nginx"},
			Replicas:  3,
			Placement: nginxPlacement(),
			Clusters:  []v1alpha1.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}},
			GracefulEvictionTasks: []v1alpha1.GracefulEvictionTask{{
				FromCluster: "member3", Replicas: ptr(int32(1)), Reason: "TaintUntolerated", Producer: "TaintManager",
				PurgeMode: v1alpha1.PurgeModeGracefully, CreationTimestamp: agoPtr(2 * time.Minute), GracePeriodSeconds: ptr(int32(600)),
				PreservedLabelState:    map[string]string{"example.com/revision": "nginx-7d4b9", "example.com/ready": "1"},
				ClustersBeforeFailover: []string{"member1", "member2", "member3"}, PreservedStateObservedAt: agoPtr(3 * time.Minute),
			}},
		},
		Status: v1alpha1.ResourceBindingStatus{
			// The API server starts every object at generation 1.
			SchedulerObservedGeneration: 1,
			LastScheduledTime:           agoPtr(2 * time.Minute),
			Conditions: []metav1.Condition{
				observed(condition(v1alpha1.BindingConditionScheduled, metav1.ConditionTrue, v1alpha1.ReasonScheduled, "binding is scheduled", 2*time.Minute), 1),
				condition(v1alpha1.BindingConditionFullyApplied, metav1.ConditionFalse, v1alpha1.ReasonFullyAppliedProgress, "member2 is applying", 90*time.Second),
			},
			AggregatedStatus: []v1alpha1.AggregatedStatusItem{
				{ClusterName: "member1", Applied: true, Health: v1alpha1.HealthHealthy, Status: rawStatus(`{"replicas":2, "readyReplicas":2}`)},
				{ClusterName: "member2", Health: v1alpha1.HealthUnknown, AppliedMessage: "waiting for\nthe agent"},
				{ClusterName: "member3", Applied: true, Health: v1alpha1.HealthHealthy, Status: rawStatus(`{"readyReplicas":1}`)},
			},
		},
	}
}

func webBinding() v1alpha1.ResourceBinding {
	return v1alpha1.ResourceBinding{
		TypeMeta:   bindingTypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "web-deployment", Namespace: "default"},
		Spec: v1alpha1.ResourceBindingSpec{
			Resource: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
			Replicas: 1,
		},
		Status: v1alpha1.ResourceBindingStatus{Conditions: []metav1.Condition{
			condition(v1alpha1.BindingConditionScheduled, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, "0/3 clusters fit", 10*time.Minute),
		}},
	}
}

func namespaceBinding() v1alpha1.ClusterResourceBinding {
	return v1alpha1.ClusterResourceBinding{
		TypeMeta:   v1alpha1.TypeMeta(kindClusterResourceBinding),
		ObjectMeta: metav1.ObjectMeta{Name: "shop-namespace"},
		Spec: v1alpha1.ResourceBindingSpec{
			Resource: v1alpha1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "shop"},
			Clusters: []v1alpha1.TargetCluster{{Name: "member1"}, {Name: "member2"}},
		},
		Status: v1alpha1.ResourceBindingStatus{
			Conditions: []metav1.Condition{
				condition(v1alpha1.BindingConditionScheduled, metav1.ConditionTrue, v1alpha1.ReasonScheduled, "", 24*time.Hour),
				condition(v1alpha1.BindingConditionFullyApplied, metav1.ConditionTrue, v1alpha1.ReasonFullyApplied, "", 24*time.Hour),
			},
			AggregatedStatus: []v1alpha1.AggregatedStatusItem{
				{ClusterName: "member1", Applied: true, Health: v1alpha1.HealthHealthy},
				{ClusterName: "member2", Applied: true, Health: v1alpha1.HealthHealthy},
			},
		},
	}
}

// work is a Work of the binding ref on cluster, at generation gen, of which
// the agent acknowledged acked; applied is the Applied condition's status
// ("" for none).
func work(cluster, name, ref string, gen, ackedGen int64, applied metav1.ConditionStatus) v1alpha1.Work {
	w := v1alpha1.Work{
		TypeMeta: v1alpha1.TypeMeta("Work"),
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: v1alpha1.ExecutionNamespace(cluster), Generation: gen,
			Annotations: map[string]string{bindingAnnotation: ref},
		},
		Status: v1alpha1.WorkStatus{ObservedGeneration: ackedGen},
	}
	if applied != "" {
		reason := v1alpha1.ReasonAppliedSuccessful
		if applied != metav1.ConditionTrue {
			reason = v1alpha1.ReasonAppliedFailed
		}
		w.Status.Conditions = []metav1.Condition{condition(v1alpha1.WorkConditionApplied, applied, reason, "", time.Minute)}
	}
	return w
}

func workloadWorks() []v1alpha1.Work {
	tombstone := work("member3", "nginx-deployment-9c0d1e2f", "shop/nginx-deployment", 2, 2, metav1.ConditionTrue)
	tombstone.DeletionTimestamp = agoPtr(2 * time.Minute)
	return []v1alpha1.Work{
		work("member1", "nginx-deployment-1a2b3c4d", "shop/nginx-deployment", 3, 3, metav1.ConditionTrue),
		work("member2", "nginx-deployment-5e6f7a8b", "shop/nginx-deployment", 3, 2, metav1.ConditionFalse),
		tombstone,
		work("member1", "shop-namespace-0f1e2d3c", "shop-namespace", 1, 0, ""),
		work("member2", "nginx-deployment-77aa88bb", "default/nginx-deployment", 1, 1, metav1.ConditionTrue),
	}
}

func bindingEvent(kind, ns, name, typ, reason, msg string, last time.Duration) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: strings.ToLower(name + "." + reason), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name, APIVersion: v1alpha1.APIVersion},
		Type:           typ, Reason: reason, Message: msg, Count: 1,
		FirstTimestamp: ago(last), LastTimestamp: ago(last),
	}
}
