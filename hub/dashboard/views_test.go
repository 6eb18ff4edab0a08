package dashboard

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
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
