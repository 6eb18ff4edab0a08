package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// newWorkloadHub is a hub with templates, policies, bindings and Works of a
// workload in failover: the Deployment shop/nginx runs on member1 and
// member2 and is being evicted from member3.
func newWorkloadHub(t *testing.T) *fakeHub {
	t.Helper()
	h := newFakeHub(t)
	for _, raw := range workloadTemplates {
		h.addObject(t, json.RawMessage(raw))
	}
	for _, obj := range []any{nginxPolicy(), webPolicy(), everythingPolicy(), nginxBinding(), webBinding(), namespaceBinding()} {
		h.addObject(t, obj)
	}
	for _, w := range workloadWorks() {
		h.addObject(t, w)
	}
	h.events = []corev1.Event{
		bindingEvent(kindResourceBinding, "shop", "nginx-deployment", "Normal", "Scheduled", "scheduled to member1:2, member2:1", 3*time.Hour),
		bindingEvent(kindResourceBinding, "shop", "nginx-deployment", "Warning", "EvictionStarted", "cluster member3\nis unreachable", 2*time.Minute),
		bindingEvent(kindResourceBinding, "default", "nginx-deployment", "Normal", "Scheduled", "not this one", time.Minute),
		bindingEvent(kindClusterResourceBinding, "", "shop-namespace", "Normal", "Scheduled", "scheduled to member1, member2", 24*time.Hour),
	}
	return h
}

var workloadTemplates = []string{
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx","namespace":"shop","creationTimestamp":"2026-04-29T12:00:00Z"},
	  "spec":{"replicas":3},"status":{"readyReplicas":2}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"nginx-conf","namespace":"shop","creationTimestamp":"2026-04-29T12:00:00Z"},
	  "data":{"a":"b"}}`,
	`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","creationTimestamp":"2026-04-28T12:00:00Z"}}`,
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default","creationTimestamp":"2026-05-01T11:50:00Z"},
	  "spec":{"replicas":1}}`,
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
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-propagation", Namespace: "shop", CreationTimestamp: ago(48 * time.Hour)},
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
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: ago(10 * time.Minute)},
		Spec: v1alpha1.PropagationSpec{ResourceSelectors: []v1alpha1.ResourceSelector{
			{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		}},
	}
}

func everythingPolicy() v1alpha1.ClusterPropagationPolicy {
	return v1alpha1.ClusterPropagationPolicy{
		TypeMeta:   v1alpha1.TypeMeta("ClusterPropagationPolicy"),
		ObjectMeta: metav1.ObjectMeta{Name: "everything", CreationTimestamp: ago(72 * time.Hour)},
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

func rawStatus(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

func nginxBinding() v1alpha1.ResourceBinding {
	return v1alpha1.ResourceBinding{
		TypeMeta:   bindingTypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "shop", CreationTimestamp: ago(3 * time.Hour)},
		Spec: v1alpha1.ResourceBindingSpec{
			Resource:  v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "nginx"},
			Replicas:  3,
			Placement: nginxPlacement(),
			Clusters:  []v1alpha1.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}},
			GracefulEvictionTasks: []v1alpha1.GracefulEvictionTask{{
				FromCluster: "member3", Replicas: ptr(int32(1)), Reason: "TaintUntolerated", Producer: "TaintManager",
				PurgeMode: v1alpha1.PurgeModeGracefully, CreationTimestamp: agoPtr(2 * time.Minute), GracePeriodSeconds: ptr(int32(600)),
			}},
		},
		Status: v1alpha1.ResourceBindingStatus{
			LastScheduledTime: agoPtr(2 * time.Minute),
			Conditions: []metav1.Condition{
				condition(v1alpha1.BindingConditionScheduled, metav1.ConditionTrue, v1alpha1.ReasonScheduled, "binding is scheduled", 2*time.Minute),
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
		ObjectMeta: metav1.ObjectMeta{Name: "web-deployment", Namespace: "default", CreationTimestamp: ago(10 * time.Minute)},
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
		ObjectMeta: metav1.ObjectMeta{Name: "shop-namespace", CreationTimestamp: ago(24 * time.Hour)},
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
func work(cluster, name, ref string, gen, ackedGen int64, applied metav1.ConditionStatus, created time.Duration) v1alpha1.Work {
	w := v1alpha1.Work{
		TypeMeta: v1alpha1.TypeMeta("Work"),
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: v1alpha1.ExecutionNamespace(cluster), Generation: gen, CreationTimestamp: ago(created),
			Annotations: map[string]string{bindingAnnotation: ref},
		},
		Status: v1alpha1.WorkStatus{ObservedGeneration: ackedGen},
	}
	if applied != "" {
		w.Status.Conditions = []metav1.Condition{condition(v1alpha1.WorkConditionApplied, applied, "", "", time.Minute)}
	}
	return w
}

func workloadWorks() []v1alpha1.Work {
	tombstone := work("member3", "nginx-deployment-9c0d1e2f", "shop/nginx-deployment", 2, 2, metav1.ConditionTrue, 3*time.Hour)
	tombstone.DeletionTimestamp = agoPtr(2 * time.Minute)
	return []v1alpha1.Work{
		work("member1", "nginx-deployment-1a2b3c4d", "shop/nginx-deployment", 3, 3, metav1.ConditionTrue, 3*time.Hour),
		work("member2", "nginx-deployment-5e6f7a8b", "shop/nginx-deployment", 3, 2, metav1.ConditionFalse, 3*time.Hour),
		tombstone,
		work("member1", "shop-namespace-0f1e2d3c", "shop-namespace", 1, 0, "", 24*time.Hour),
		work("member2", "nginx-deployment-77aa88bb", "default/nginx-deployment", 1, 1, metav1.ConditionTrue, time.Minute),
	}
}

func bindingEvent(kind, ns, name, typ, reason, msg string, last time.Duration) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name + "." + reason, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name, APIVersion: v1alpha1.APIVersion},
		Type:           typ, Reason: reason, Message: msg, Count: 1,
		FirstTimestamp: ago(last), LastTimestamp: ago(last),
	}
}
