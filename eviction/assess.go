package eviction

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Verdict is the state of one graceful eviction task.
type Verdict struct {
	Done   bool
	Reason string // when Done: ReasonReplacementHealthy or ReasonGracePeriodExpired
	// Waiting is, when !Done, what the task waits for, for humans (describe
	// binding), e.g. "replacement not scheduled yet: <Scheduled condition
	// message>", "member-2 not healthy yet (Unknown), member-3 not applied
	// yet; grace period ends in 9m30s", "kept until removed by hand
	// (purgeMode Never)".
	Waiting string
	// Recheck is, when !Done, when the verdict can change by time alone
	// (the grace deadline), zero if only other changes can.
	Recheck time.Time
	// NoReplacement is set when the scheduler has seen the eviction (the
	// binding's current generation) and found no replacement: if the
	// evicted cluster recovers meanwhile, the eviction can be called off.
	// It is not set while the scheduler has yet to run.
	NoReplacement bool
}

// maxListed is how many waiting clusters a Verdict names before "and N more".
const maxListed = 5

// Assess decides whether task has ended, given the binding's generation,
// spec and status:
//   - SuppressDeletion true (Never): never done (NoReplacement still says
//     whether the scheduler found none).
//   - "replaced" = status.SchedulerObservedGeneration == generation AND the
//     Scheduled condition is True with ObservedGeneration == generation AND
//     len(spec.Clusters) > 0. Not replaced -> not done, whatever the grace
//     period says (no purge without a replacement); Recheck zero.
//   - Replaced and every cluster of spec.Clusters has an AggregatedStatus
//     item that is Applied and Health == Healthy -> Done,
//     ReasonReplacementHealthy.
//   - Replaced and now >= max(CreationTimestamp, status.lastScheduledTime) +
//     grace (task.GracePeriodSeconds, else defaultGrace) -> Done,
//     ReasonGracePeriodExpired.
//   - A nil CreationTimestamp never expires: the grace has not started (the
//     hub stamps such a task with the time it first sees it, as Karmada
//     does); not done, Recheck zero.
//   - Otherwise not done, Recheck = the grace deadline, Waiting lists the
//     clusters not yet healthy (sorted by name, at most 5, then "and N
//     more").
//
// The times are taken as the instants they stand for: a caller that knows
// them only to the second, as the API stores them, rounds them up first
// so that no grace period ends early.
func Assess(task *v1alpha1.GracefulEvictionTask, generation int64, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus, defaultGrace time.Duration, now time.Time) Verdict {
	if task == nil {
		return Verdict{Waiting: "no eviction task"}
	}
	if spec == nil {
		spec = &v1alpha1.ResourceBindingSpec{}
	}
	if status == nil {
		status = &v1alpha1.ResourceBindingStatus{}
	}
	why, settled := notReplaced(generation, spec, status)
	if task.SuppressDeletion != nil && *task.SuppressDeletion {
		return Verdict{Waiting: "kept until removed by hand (purgeMode Never)", NoReplacement: why != "" && settled}
	}
	if why != "" {
		return Verdict{Waiting: "replacement not scheduled yet: " + why, NoReplacement: settled}
	}
	unhealthy := unhealthyClusters(spec.Clusters, status.AggregatedStatus)
	if len(unhealthy) == 0 {
		return Verdict{Done: true, Reason: ReasonReplacementHealthy}
	}
	if task.CreationTimestamp == nil {
		return Verdict{Waiting: listWaiting(unhealthy) + "; grace period not started (the task has no creation time yet)"}
	}
	// The grace runs from when the replacement was placed, if that was
	// later: a replacement found late must get its chance to start.
	start := task.CreationTimestamp.Time
	if lst := status.LastScheduledTime; lst != nil && lst.After(start) {
		start = lst.Time
	}
	deadline := start.Add(gracePeriod(task, defaultGrace))
	if !now.Before(deadline) {
		return Verdict{Done: true, Reason: ReasonGracePeriodExpired}
	}
	return Verdict{
		Waiting: fmt.Sprintf("%s; grace period ends in %s", listWaiting(unhealthy), deadline.Sub(now).Round(time.Second)),
		Recheck: deadline,
	}
}

// notReplaced says why the binding has no replacement for the evicted
// cluster yet, or "" if it has one, and whether that is the scheduler's
// answer for the current generation (settled) rather than a schedule yet
// to come. The generations must match: a Scheduled condition from before
// the eviction describes the old result, which still held the evicted
// cluster.
func notReplaced(generation int64, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) (string, bool) {
	if status.SchedulerObservedGeneration != generation {
		return fmt.Sprintf("the scheduler has not seen generation %d yet (observed %d)", generation, status.SchedulerObservedGeneration), false
	}
	cond := meta.FindStatusCondition(status.Conditions, v1alpha1.BindingConditionScheduled)
	switch {
	case cond == nil:
		return "no Scheduled condition", false
	case cond.ObservedGeneration != generation:
		return fmt.Sprintf("the Scheduled condition is for generation %d, not %d", cond.ObservedGeneration, generation), false
	case cond.Status != metav1.ConditionTrue:
		return conditionText(cond), true
	case len(spec.Clusters) == 0:
		return "no cluster selected", true
	}
	return "", true
}

// conditionText is a not-True condition in a few words: its message, else
// its reason, else its status.
func conditionText(cond *metav1.Condition) string {
	for _, s := range []string{cond.Message, cond.Reason} {
		if s != "" {
			return s
		}
	}
	return "Scheduled is " + string(cond.Status)
}

// gracePeriod is the task's own grace period, else the hub's default. A
// negative one counts as 0.
func gracePeriod(task *v1alpha1.GracefulEvictionTask, defaultGrace time.Duration) time.Duration {
	if task.GracePeriodSeconds != nil {
		return time.Duration(max(*task.GracePeriodSeconds, 0)) * time.Second
	}
	return defaultGrace
}
