package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// addCluster creates a cluster and writes its status through the status
// subresource, as the hub's registry does; it returns the stored cluster.
func (h *testHub) addCluster(t *testing.T, cl v1alpha1.Cluster) *v1alpha1.Cluster {
	t.Helper()
	clusters := h.Flotilla.FlotillaV1alpha1().Clusters()
	status := cl.Status
	stored, err := clusters.Create(context.Background(), &cl, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create cluster %s: %v", cl.Name, err)
	}
	if status.Conditions == nil && status.NodeSummary == nil && status.Agent == nil && status.KubernetesVersion == "" {
		return stored
	}
	stored.Status = status
	if stored, err = clusters.UpdateStatus(context.Background(), stored, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of cluster %s: %v", cl.Name, err)
	}
	return stored
}

// cluster reads a cluster back.
func (h *testHub) cluster(t *testing.T, name string) *v1alpha1.Cluster {
	t.Helper()
	cl, err := h.Flotilla.FlotillaV1alpha1().Clusters().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get cluster %s: %v", name, err)
	}
	return cl
}

func (h *testHub) addLease(t *testing.T, l coordinationv1.Lease) {
	t.Helper()
	l.Namespace = v1alpha1.LeaseNamespace
	if _, err := h.Kube.CoordinationV1().Leases(l.Namespace).Create(context.Background(), &l, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create lease %s: %v", l.Name, err)
	}
}

// addEvent creates an event; one about a cluster-scoped object lives in
// namespace default, as the hub's recorder puts it.
func (h *testHub) addEvent(t *testing.T, e corev1.Event) {
	t.Helper()
	if e.Namespace == "" {
		e.Namespace = metav1.NamespaceDefault
	}
	if !e.EventTime.IsZero() { // an event of the events.k8s.io API names its reporter
		e.ReportingController, e.ReportingInstance, e.Action = "flotilla.io/hub", "hub-0", "Test"
	}
	if _, err := h.Kube.CoreV1().Events(e.Namespace).Create(context.Background(), &e, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create event %s: %v", e.Name, err)
	}
}

// fixture is what newFixtureHub created, as the API server stored it.
type fixture struct {
	*testHub
	clusters map[string]*v1alpha1.Cluster
}

// newFixtureHub is a hub with three clusters in different states, their
// leases and a few events.
func newFixtureHub(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{testHub: newHub(t), clusters: map[string]*v1alpha1.Cluster{}}
	for _, cl := range []v1alpha1.Cluster{healthyCluster(), unreachableCluster(), {ObjectMeta: metav1.ObjectMeta{Name: "lab"}}} {
		f.clusters[cl.Name] = f.addCluster(t, cl)
	}
	f.addLease(t, lease("edge-1", "edge-1-agent-7c9f", 3*time.Second, ptr(int32(1))))
	f.addLease(t, lease("edge-2", "edge-2-agent-a1", 95*time.Second, nil))
	l := lease("lab", "", 25*time.Second, nil)
	l.Spec.HolderIdentity = nil
	f.addLease(t, l)
	for _, e := range []corev1.Event{
		event("edge-1", "Normal", "ClusterRegistered", "agent edge-1-agent-7c9f registered", 3*time.Hour, 1),
		event("edge-1", "Normal", "ClusterReady", "cluster is ready", 2*time.Hour, 2),
		event("edge-2", "Warning", "ClusterUnreachable", "lease expired", 90*time.Second, 1),
	} {
		f.addEvent(t, e)
	}
	return f
}

func healthyCluster() v1alpha1.Cluster {
	return v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "edge-1",
			Labels: map[string]string{"site": "lisbon", "env": "prod"},
		},
		Spec: v1alpha1.ClusterSpec{Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a"},
		Status: v1alpha1.ClusterStatus{
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonClusterReady,
					Message: "cluster is healthy\nand ready", LastTransitionTime: ago(2 * time.Hour)},
				{Type: v1alpha1.ClusterConditionClockSynced, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonClockSynced,
					LastTransitionTime: ago(150 * time.Minute)},
			},
			KubernetesVersion: "v1.31.2",
			NodeSummary:       &v1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 3},
			ResourceSummary: &v1alpha1.ResourceSummary{
				Allocatable: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourceCPU: resource.MustParse("8"),
					corev1.ResourcePods: resource.MustParse("110"),
				},
				Allocated: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("2500m"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				},
			},
			Agent: &v1alpha1.AgentStatus{Version: "v0.1.0", ConnectedTo: "hub-0", Transport: "quic", ConnectedAt: agoPtr(2 * time.Hour), ClockSkew: "12ms"},
		},
	}
}

func unreachableCluster() v1alpha1.Cluster {
	return v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-2", Annotations: map[string]string{
			v1alpha1.AnnotationTaintPolicies: `{"team:PreferNoSchedule":"payments-only","gone:NoSchedule":"old"}`}},
		Spec: v1alpha1.ClusterSpec{
			Provider: "onprem", Unschedulable: true,
			Taints: []corev1.Taint{
				{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: agoPtr(90 * time.Second)},
				{Key: v1alpha1.TaintClusterUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: agoPtr(30 * time.Minute)},
				{Key: "team", Value: "payments", Effect: corev1.TaintEffectPreferNoSchedule, TimeAdded: agoPtr(20 * time.Minute)},
			},
		},
		Status: v1alpha1.ClusterStatus{
			Conditions: []metav1.Condition{{
				Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonLeaseExpired,
				Message: "cluster lease expired", LastTransitionTime: ago(90 * time.Second),
			}},
			KubernetesVersion: "v1.30.4",
			NodeSummary:       &v1alpha1.NodeSummary{TotalNum: 4, ReadyNum: 2},
			Agent:             &v1alpha1.AgentStatus{Version: "v0.1.0"},
		},
	}
}

// lease is a 40s lease renewed renewed ago and acquired two hours ago.
func lease(name, holder string, renewed time.Duration, transitions *int32) coordinationv1.Lease {
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: ptr(int32(40)),
			AcquireTime:          microAgo(2 * time.Hour),
			RenewTime:            microAgo(renewed),
			LeaseTransitions:     transitions,
		},
	}
}

func event(cluster, typ, reason, msg string, last time.Duration, count int32) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: strings.ToLower(cluster + "." + reason)},
		InvolvedObject: corev1.ObjectReference{Kind: v1alpha1.KindCluster, Name: cluster, APIVersion: v1alpha1.APIVersion},
		Type:           typ, Reason: reason, Message: msg, Count: count,
		FirstTimestamp: ago(last + time.Hour), LastTimestamp: ago(last),
	}
}
