package failover

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/aggregate"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// ReasonStateNotPreserved is the warning event of an eviction whose policy
// preserves state that could not be read: the eviction goes on without it.
const ReasonStateNotPreserved = "StateNotPreserved"

// stateWarning is an eviction that went on without the state its policy
// asked to preserve, and why.
type stateWarning struct{ cluster, why, reason string }

// preserveState gives each eviction whose policy has statePreservation
// rules the workload's state in the cluster it leaves, read from items
// (the status the agent last reported on the Work, kept while the
// cluster is unreachable), and says in its message how old that is.
// Karmada retries until the status is there; a cluster that is cut off
// may never report again, so here the eviction goes on without state
// and a warning says why: failing over comes first.
func (c *Controller) preserveState(ctx context.Context, spec *v1alpha1.ResourceBindingSpec, items []v1alpha1.AggregatedStatusItem,
	evicted []eviction.Eviction, now time.Time) []stateWarning {
	var warnings []stateWarning
	for i := range evicted {
		e := &evicted[i]
		rules := statePreservation(spec.Failover, e.Producer)
		if rules == nil || len(rules.Rules) == 0 {
			continue
		}
		labels, err := eviction.StateFor(rules, items, e.Cluster)
		if err != nil {
			why, reason := err.Error(), StateRuleFailed
			if errors.Is(err, eviction.ErrStatusNotCollected) {
				why, reason = fmt.Sprintf("%s never reported the workload's status", e.Cluster), StateStatusNotCollected
			}
			warnings = append(warnings, stateWarning{cluster: e.Cluster, why: why, reason: reason})
			e.Message += "; state not preserved: " + why
			continue
		}
		observed, age := c.stateObservedAt(ctx, e.Cluster, now)
		e.State = &eviction.State{Labels: labels, ClustersBefore: clusterNames(spec.Clusters), ObservedAt: observed}
		e.Message += "; state preserved from " + age
	}
	return warnings
}

// statePreservation is the rules of the failover behaviour that made an
// eviction.
func statePreservation(f *v1alpha1.FailoverBehavior, producer string) *v1alpha1.StatePreservation {
	switch producer {
	case eviction.ProducerApplicationFailover:
		return f.ApplicationStatePreservation()
	case eviction.ProducerTaintManager:
		return f.ClusterStatePreservation()
	}
	return nil
}

// stateObservedAt is when the hub last heard from the cluster's agent, and
// how a message says it: now for a reachable cluster (its agent reports
// every change), else the lease's last renewal, stamped by the hub's
// clock; zero if unknown.
func (c *Controller) stateObservedAt(ctx context.Context, cluster string, now time.Time) (time.Time, string) {
	if cl := c.clusters.Get(cluster); cl != nil && aggregate.Reachable(cl) {
		return now, "the status its agent reports"
	}
	at, _, err := controller.LastRenewal(ctx, c.kube, cluster)
	if err != nil {
		c.logger.Warn("cannot tell when the hub last heard from an evicted cluster", "cluster", cluster, "err", err)
	}
	if !at.IsZero() {
		return at, fmt.Sprintf("the last status the hub holds: %s is unreachable, the hub last heard from its agent %s before the eviction (%s)",
			cluster, now.Sub(at).Round(time.Second), at.UTC().Format(time.RFC3339))
	}
	return time.Time{}, fmt.Sprintf("the last status the hub holds: %s is unreachable, since when is unknown", cluster)
}

// warnStateNotPreserved records a warning per eviction that went on
// without its state, on the binding and on its template.
func (c *Controller) warnStateNotPreserved(obj metav1.Object, spec *v1alpha1.ResourceBindingSpec, warnings []stateWarning) {
	for _, w := range warnings {
		message := fmt.Sprintf("evicted from %s without the state its policy preserves: %s; the new copy gets no preserved labels", w.cluster, w.why)
		c.logger.Warn("state not preserved", "binding", controller.Key(obj.GetNamespace(), obj.GetName()), "cluster", w.cluster, "why", w.why)
		c.recorder.Event(controller.BindingRef(obj), corev1.EventTypeWarning, ReasonStateNotPreserved, message)
		c.recorder.Event(controller.TemplateRef(spec.Resource), corev1.EventTypeWarning, ReasonStateNotPreserved, message)
		if c.observer.StateNotPreserved != nil {
			c.observer.StateNotPreserved(w.reason)
		}
	}
}
