// Package aggregate sums up what the agents report on a binding's Works:
// the binding's per-cluster status (status.aggregatedStatus), its
// FullyApplied condition, and the template's status summed over the
// clusters. It is pure over the API types; the status controller writes
// what it computes, and the failover controller judges graceful eviction
// tasks on it.
package aggregate

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Items computes a binding's per-cluster status from its Works, in the
// order of the clusters' names. The failover controller uses it too, on
// its own mirror of the Works: a task must not end on a stored status that
// predates the binding's latest placement.
//
// A cluster that is not reachable (see Reachable) has health Unknown
// whatever its agent last said.
func Items(spec *v1alpha1.ResourceBindingSpec, workOf func(cluster string) *v1alpha1.Work, reachable func(cluster string) bool) []v1alpha1.AggregatedStatusItem {
	targets := slices.SortedFunc(slices.Values(spec.Clusters), func(a, b v1alpha1.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
	items := make([]v1alpha1.AggregatedStatusItem, 0, len(targets))
	for _, tc := range targets {
		item := v1alpha1.AggregatedStatusItem{ClusterName: tc.Name, Health: v1alpha1.HealthUnknown}
		w := workOf(tc.Name)
		switch {
		case w == nil || w.DeletionTimestamp != nil:
			item.AppliedMessage = msgNoWork
		default:
			item.Applied, item.AppliedMessage = applied(w)
			if got := w.Annotations[v1alpha1.AnnotationWorkReplicas]; got != strconv.Itoa(int(tc.Replicas)) {
				// The Work still renders an earlier placement.
				item.Applied, item.AppliedMessage = false, fmt.Sprintf("%s for %d replicas (has %s)", prefixNotRendered, tc.Replicas, got)
			}
			if len(w.Status.ManifestStatuses) > 0 {
				ms := w.Status.ManifestStatuses[0]
				if ms.Health != "" && reachable(tc.Name) {
					item.Health = ms.Health
				}
				item.Status = ms.Status.DeepCopy()
				item.StateValues = maps.Clone(ms.StateValues)
			}
		}
		items = append(items, item)
	}
	return items
}

// Reachable reports whether a cluster's agent is heard from: its Ready
// condition is not Unknown (Unknown: the agent is silent).
func Reachable(cl *v1alpha1.Cluster) bool {
	cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ClusterConditionReady)
	return cond == nil || cond.Status != metav1.ConditionUnknown
}

// applied says whether the agent applied the Work's current generation.
func applied(w *v1alpha1.Work) (bool, string) {
	cond := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkConditionApplied)
	switch {
	case cond == nil:
		return false, msgWaitingForAgent
	case cond.Status != metav1.ConditionTrue:
		return false, cond.Message
	case w.Status.ObservedGeneration != w.Generation:
		return false, fmt.Sprintf("%s %d, current is %d", prefixEarlierGen, w.Status.ObservedGeneration, w.Generation)
	}
	return true, ""
}

// Messages of an item whose Work is on its way, not failed.
const (
	msgNoWork          = "no Work yet"
	msgWaitingForAgent = "waiting for the agent"
	prefixNotRendered  = "Work not yet rendered"
	prefixEarlierGen   = "agent applied generation"
)

// inProgress reports whether an item's message says its Work is on its
// way: not created, not rendered for the current placement, or not yet
// applied by the agent in its current generation. A new placement (an
// eviction's replacement, a scale) goes through these; they are not
// failures, so no ApplyFailed warning is recorded for them.
func inProgress(msg string) bool {
	return msg == msgNoWork || msg == msgWaitingForAgent || strings.HasPrefix(msg, prefixNotRendered) || strings.HasPrefix(msg, prefixEarlierGen)
}

// FullyApplied is the binding's FullyApplied condition over its Items.
func FullyApplied(items []v1alpha1.AggregatedStatusItem, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.BindingConditionFullyApplied, ObservedGeneration: generation}
	var pending, failed []string
	for _, it := range items {
		switch {
		case it.Applied:
		case inProgress(it.AppliedMessage):
			pending = append(pending, it.ClusterName)
		default:
			failed = append(failed, it.ClusterName+": "+it.AppliedMessage)
		}
	}
	switch {
	case len(items) == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonFullyAppliedProgress, "not scheduled to any cluster"
	case len(failed) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonFullyAppliedFailed, fmt.Sprintf("%v", failed)
	case len(pending) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonFullyAppliedProgress, fmt.Sprintf("waiting for %v", pending)
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, v1alpha1.ReasonFullyApplied, "applied in every cluster"
	}
	return cond
}

// SummedStatus adds up the integer fields of the clusters' status objects
// (readyReplicas, availableReplicas, succeeded...), the template's status
// as a user reads it on the hub. Nil if no cluster reported any.
func SummedStatus(items []v1alpha1.AggregatedStatusItem) map[string]any {
	sums := map[string]int64{}
	for _, it := range items {
		if it.Status == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(it.Status.Raw, &fields) != nil {
			continue
		}
		for k, v := range fields {
			if n, ok := v.(float64); ok && n == float64(int64(n)) {
				sums[k] += int64(n)
			}
		}
	}
	if len(sums) == 0 {
		return nil
	}
	out := make(map[string]any, len(sums))
	for k, v := range sums {
		out[k] = v
	}
	return out
}
