package scheduling

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func TestScheduleNeeded(t *testing.T) {
	divided := &v1alpha1.Placement{ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided}}
	earlier, later := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	scheduled := func(status metav1.ConditionStatus) v1alpha1.ResourceBindingStatus {
		return v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 3, LastScheduledTime: &earlier,
			Conditions: []metav1.Condition{{Type: v1alpha1.BindingConditionScheduled, Status: status}}}
	}
	placed := []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}
	tests := []struct {
		name       string
		generation int64
		spec       v1alpha1.ResourceBindingSpec
		status     v1alpha1.ResourceBindingStatus
		want       bool
	}{
		{"divided, all placed: kept when clusters change", 3, v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: placed}, scheduled(metav1.ConditionTrue), false},
		{"new generation (template or policy changed, or an eviction)", 4, v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: placed}, scheduled(metav1.ConditionTrue), true},
		{"replicas short after an eviction", 3, v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: placed[1:]}, scheduled(metav1.ConditionTrue), true},
		{"never placed", 3, v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided}, scheduled(metav1.ConditionTrue), true},
		{"last schedule failed: retried on cluster changes", 3, v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: placed}, scheduled(metav1.ConditionFalse), true},
		{"never scheduled", 1, v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: placed}, v1alpha1.ResourceBindingStatus{}, true},
		{"fresh requested", 3, v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: placed, RescheduleTriggeredAt: &later}, scheduled(metav1.ConditionTrue), true},
		{"fresh already done", 3, v1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: placed, RescheduleTriggeredAt: &earlier}, scheduled(metav1.ConditionTrue), false},
		{"duplicated follows the clusters", 3, v1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: placed}, scheduled(metav1.ConditionTrue), true},
		{"no replicas follows the clusters", 3, v1alpha1.ResourceBindingSpec{Placement: divided, Clusters: placed}, scheduled(metav1.ConditionTrue), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scheduleNeeded(tt.generation, &tt.spec, &tt.status); got != tt.want {
				t.Errorf("scheduleNeeded = %v, want %v", got, tt.want)
			}
		})
	}
}
