package eviction

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

const gen = 7

// scheduledStatus is a status the scheduler wrote for generation gen with
// a Scheduled condition cond (nil: none).
func scheduledStatus(cond *metav1.Condition, items ...v1alpha1.AggregatedStatusItem) v1alpha1.ResourceBindingStatus {
	s := v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: gen, AggregatedStatus: items}
	if cond != nil {
		s.Conditions = []metav1.Condition{{Type: "FullyApplied", Status: metav1.ConditionFalse}, *cond}
	}
	return s
}

func scheduled(status metav1.ConditionStatus, observed int64, reason, message string) *metav1.Condition {
	return &metav1.Condition{Type: v1alpha1.BindingConditionScheduled, Status: status, ObservedGeneration: observed, Reason: reason, Message: message}
}

var scheduledTrue = scheduled(metav1.ConditionTrue, gen, v1alpha1.ReasonScheduled, "")

func healthy(cluster string) v1alpha1.AggregatedStatusItem {
	return v1alpha1.AggregatedStatusItem{ClusterName: cluster, Applied: true, Health: v1alpha1.HealthHealthy}
}

func TestAssess(t *testing.T) {
	const defaultGrace = 10 * time.Minute
	task := func(created time.Time, grace *int32) *v1alpha1.GracefulEvictionTask {
		tk := &v1alpha1.GracefulEvictionTask{FromCluster: "member-1", PurgeMode: v1alpha1.PurgeModeGracefully, GracePeriodSeconds: grace}
		if !created.IsZero() {
			tk.CreationTimestamp = &metav1.Time{Time: created}
		}
		return tk
	}
	fresh := task(t0, nil)
	suppressed := task(t0, nil)
	suppressed.PurgeMode, suppressed.SuppressDeletion = v1alpha1.PurgeModeNever, ptr.To(true)
	released := task(t0, nil)
	released.SuppressDeletion = ptr.To(false)
	replacement := placed("member-2", 1, "member-3", 1)
	allHealthy := scheduledStatus(scheduledTrue, healthy("member-2"), healthy("member-3"))
	halfway := scheduledStatus(scheduledTrue, healthy("member-2"),
		v1alpha1.AggregatedStatusItem{ClusterName: "member-3", Applied: true, Health: v1alpha1.HealthUnknown})
	mixed := scheduledStatus(scheduledTrue,
		v1alpha1.AggregatedStatusItem{ClusterName: "member-3", Applied: false},
		v1alpha1.AggregatedStatusItem{ClusterName: "member-2", Applied: true, Health: v1alpha1.HealthUnknown},
		healthy("member-4"))
	late := at(time.Hour)
	tests := []struct {
		name   string
		task   *v1alpha1.GracefulEvictionTask
		spec   v1alpha1.ResourceBindingSpec
		status v1alpha1.ResourceBindingStatus
		now    time.Time
		want   Verdict
	}{
		{"Never is never done", suppressed, replacement, allHealthy, late,
			Verdict{Waiting: "kept until removed by hand (purgeMode Never)"}},
		{"Never without a replacement says so", suppressed, placed(), allHealthy, late,
			Verdict{Waiting: "kept until removed by hand (purgeMode Never)", NoReplacement: true}},
		{"the grace runs from a replacement placed late", fresh, replacement, placedLate(halfway), at(defaultGrace + time.Minute),
			Verdict{Waiting: "member-3 not healthy yet (Unknown); grace period ends in 1m0s", Recheck: at(defaultGrace + 2*time.Minute)}},
		{"suppressDeletion false follows the usual rules", released, replacement, allHealthy, t0,
			Verdict{Done: true, Reason: ReasonReplacementHealthy}},
		{"stale scheduler generation", fresh, replacement,
			v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: gen - 1, Conditions: []metav1.Condition{*scheduledTrue}}, late,
			Verdict{Waiting: "replacement not scheduled yet: the scheduler has not seen generation 7 yet (observed 6)"}},
		{"no Scheduled condition", fresh, replacement, scheduledStatus(nil), late,
			Verdict{Waiting: "replacement not scheduled yet: no Scheduled condition"}},
		{"Scheduled False, whatever the grace period", fresh, replacement,
			scheduledStatus(scheduled(metav1.ConditionFalse, gen, v1alpha1.ReasonNoClusterFit, "0/3 clusters are available: 3 cluster(s) is being evicted from this binding.")), late,
			Verdict{Waiting: "replacement not scheduled yet: 0/3 clusters are available: 3 cluster(s) is being evicted from this binding.", NoReplacement: true}},
		{"Scheduled False without message", fresh, replacement,
			scheduledStatus(scheduled(metav1.ConditionFalse, gen, v1alpha1.ReasonUnschedulable, "")), late,
			Verdict{Waiting: "replacement not scheduled yet: Unschedulable", NoReplacement: true}},
		{"Scheduled Unknown without reason", fresh, replacement,
			scheduledStatus(scheduled(metav1.ConditionUnknown, gen, "", "")), late,
			Verdict{Waiting: "replacement not scheduled yet: Scheduled is Unknown", NoReplacement: true}},
		{"Scheduled True for an older generation", fresh, replacement,
			scheduledStatus(scheduled(metav1.ConditionTrue, gen-1, v1alpha1.ReasonScheduled, ""), healthy("member-2"), healthy("member-3")), late,
			Verdict{Waiting: "replacement not scheduled yet: the Scheduled condition is for generation 6, not 7"}},
		{"scheduled to no cluster", fresh, placed(), allHealthy, late,
			Verdict{Waiting: "replacement not scheduled yet: no cluster selected", NoReplacement: true}},
		{"nil creation time without replacement", task(time.Time{}, nil), placed(), allHealthy, late,
			Verdict{Waiting: "replacement not scheduled yet: no cluster selected", NoReplacement: true}},
		{"replacement healthy before the grace period ends", fresh, replacement, allHealthy, at(time.Minute),
			Verdict{Done: true, Reason: ReasonReplacementHealthy}},
		{"replacement healthy after the grace period", fresh, replacement, allHealthy, late,
			Verdict{Done: true, Reason: ReasonReplacementHealthy}},
		{"one cluster Unknown", fresh, replacement, halfway, at(30 * time.Second),
			Verdict{Waiting: "member-3 not healthy yet (Unknown); grace period ends in 9m30s", Recheck: at(defaultGrace)}},
		{"Unknown and not applied, sorted", fresh, placed("member-3", 1, "member-4", 1, "member-2", 1), mixed, at(30 * time.Second),
			Verdict{Waiting: "member-2 not healthy yet (Unknown), member-3 not applied yet; grace period ends in 9m30s", Recheck: at(defaultGrace)}},
		{"no status, unhealthy, no health", fresh, placed("a", 1, "b", 1, "c", 1),
			scheduledStatus(scheduledTrue, v1alpha1.AggregatedStatusItem{ClusterName: "b", Applied: true, Health: v1alpha1.HealthUnhealthy},
				v1alpha1.AggregatedStatusItem{ClusterName: "c", Applied: true}), t0,
			Verdict{Waiting: "a no status yet, b not healthy yet (Unhealthy), c not healthy yet (Unknown); grace period ends in 10m0s", Recheck: at(defaultGrace)}},
		{"a second before the deadline", fresh, replacement, halfway, at(defaultGrace - time.Second),
			Verdict{Waiting: "member-3 not healthy yet (Unknown); grace period ends in 1s", Recheck: at(defaultGrace)}},
		{"grace period expires exactly at the deadline", fresh, replacement, halfway, at(defaultGrace),
			Verdict{Done: true, Reason: ReasonGracePeriodExpired}},
		{"custom grace period, before", task(t0, ptr.To[int32](60)), replacement, halfway, at(59 * time.Second),
			Verdict{Waiting: "member-3 not healthy yet (Unknown); grace period ends in 1s", Recheck: at(time.Minute)}},
		{"custom grace period, at", task(t0, ptr.To[int32](60)), replacement, halfway, at(time.Minute),
			Verdict{Done: true, Reason: ReasonGracePeriodExpired}},
		{"custom grace period longer than the default", task(t0, ptr.To[int32](3600)), replacement, halfway, at(defaultGrace),
			Verdict{Waiting: "member-3 not healthy yet (Unknown); grace period ends in 50m0s", Recheck: at(time.Hour)}},
		{"negative grace period counts as 0", task(t0, ptr.To[int32](-5)), replacement, halfway, t0,
			Verdict{Done: true, Reason: ReasonGracePeriodExpired}},
		{"nil creation time never expires", task(time.Time{}, nil), replacement, halfway, late,
			Verdict{Waiting: "member-3 not healthy yet (Unknown); grace period not started (the task has no creation time yet)"}},
		{"nil creation time with a zero grace period never expires", task(time.Time{}, ptr.To[int32](0)), replacement, halfway, late,
			Verdict{Waiting: "member-3 not healthy yet (Unknown); grace period not started (the task has no creation time yet)"}},
		{"nil creation time still ends on a healthy replacement", task(time.Time{}, nil), replacement, allHealthy, late,
			Verdict{Done: true, Reason: ReasonReplacementHealthy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Assess(tt.task, gen, &tt.spec, &tt.status, defaultGrace, tt.now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Assess (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAssessListsAtMostFive(t *testing.T) {
	var spec v1alpha1.ResourceBindingSpec
	for i := 7; i >= 1; i-- {
		spec.Clusters = append(spec.Clusters, v1alpha1.TargetCluster{Name: fmt.Sprintf("m%d", i)})
	}
	status := scheduledStatus(scheduledTrue)
	task := &v1alpha1.GracefulEvictionTask{FromCluster: "m0", CreationTimestamp: &metav1.Time{Time: t0}}
	got := Assess(task, gen, &spec, &status, time.Minute, t0)
	want := Verdict{
		Waiting: "m1 no status yet, m2 no status yet, m3 no status yet, m4 no status yet, m5 no status yet, and 2 more; grace period ends in 1m0s",
		Recheck: at(time.Minute),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Assess (-want +got):\n%s", diff)
	}
}

// placedLate is status with its last schedule 2 minutes after t0.
func placedLate(status v1alpha1.ResourceBindingStatus) v1alpha1.ResourceBindingStatus {
	lst := metav1.NewTime(at(2 * time.Minute))
	status.LastScheduledTime = &lst
	return status
}

func TestAssessNilInputs(t *testing.T) {
	task := &v1alpha1.GracefulEvictionTask{FromCluster: "a", CreationTimestamp: &metav1.Time{Time: t0}}
	tests := []struct {
		name string
		task *v1alpha1.GracefulEvictionTask
		spec *v1alpha1.ResourceBindingSpec
		want Verdict
	}{
		{"nil task", nil, &v1alpha1.ResourceBindingSpec{}, Verdict{Waiting: "no eviction task"}},
		{"nil spec and status", task, nil, Verdict{Waiting: "replacement not scheduled yet: the scheduler has not seen generation 7 yet (observed 0)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Assess(tt.task, gen, tt.spec, nil, time.Minute, at(time.Hour))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Assess (-want +got):\n%s", diff)
			}
		})
	}
}
