package dashboard

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/google/go-cmp/cmp"
)

// TestBindingViewTellsWhyNotApplied: a cluster where the Work is not
// applied (here refused by the member's policy) shows why; an applied one
// shows no message.
func TestBindingViewTellsWhyNotApplied(t *testing.T) {
	const why = "1 of 2 manifests failed: ... RefusedByMemberPolicy: namespace \"kube-system\" is denied"
	rb := &v1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "nginx-deployment"},
		Spec: v1alpha1.ResourceBindingSpec{Clusters: []v1alpha1.TargetCluster{{Name: "a"}, {Name: "b"}}},
		Status: v1alpha1.ResourceBindingStatus{AggregatedStatus: []v1alpha1.AggregatedStatusItem{
			{ClusterName: "a", Applied: false, AppliedMessage: why},
			{ClusterName: "b", Applied: true, AppliedMessage: "applied by the agent"},
		}}}
	v := bindingView(controller.Binding{RB: rb}, func(string) string { return "" }, time.Minute, time.Now())
	if len(v.Placement) != 2 || v.Placement[0].Message != why || v.Placement[1].Message != "" {
		t.Errorf("placement = %+v, want the reason on a only", v.Placement)
	}
}

// TestClusterViewNamesTaintPolicies: a taint a ClusterTaintPolicy added
// shows the policy; others none, whatever else the annotation says.
func TestClusterViewNamesTaintPolicies(t *testing.T) {
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Annotations: map[string]string{
		v1alpha1.AnnotationTaintPolicies: `{"example.com/api-degraded:NoSchedule":"api-degraded","gone:NoExecute":"old"}`}},
		Spec: v1alpha1.ClusterSpec{Taints: []corev1.Taint{
			{Key: "example.com/api-degraded", Effect: corev1.TaintEffectNoSchedule},
			{Key: "example.com/api-degraded", Effect: corev1.TaintEffectNoExecute},
		}}}
	got := clusterView(c, Lease{}, false).Taints
	want := []TaintView{
		{Key: "example.com/api-degraded", Effect: "NoSchedule", Policy: "api-degraded"},
		{Key: "example.com/api-degraded", Effect: "NoExecute"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
}
