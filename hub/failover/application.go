package failover

import (
	"fmt"
	"time"

	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
)

// defaultApplicationToleration is how long a workload may stay unhealthy
// in a cluster when the policy asks for application failover without
// saying (Karmada's default).
const defaultApplicationToleration = 300 * time.Second

// applicationFailures returns the clusters where the binding's workload
// has been unhealthy longer than the policy tolerates, skipping those in
// skip, unless a back-off holds the eviction (backoff.go): then it is
// announced, and decided again when the back-off ends. How long each has
// been unhealthy is kept in memory: after a hub restart the count starts
// again, which only delays a failover.
func (c *Controller) applicationFailures(j *judgement, skip []eviction.Eviction) []eviction.Eviction {
	obj, key, spec, status, now, wake := j.read, j.key, j.spec, j.status, j.now, j.wake
	var app *v1alpha1.ApplicationFailoverBehavior
	if spec.Failover != nil {
		app = spec.Failover.Application
	}
	if app == nil {
		c.mu.Lock()
		delete(c.unhealthySince, key)
		c.mu.Unlock()
		c.backOffs.forget(key)
		return nil
	}
	toleration := defaultApplicationToleration
	if s := app.DecisionConditions.TolerationSeconds; s != nil {
		toleration = time.Duration(*s) * time.Second
	}
	grace := app.GracePeriodSeconds
	if grace == nil {
		grace = ptr.To(c.defaultGraceSeconds())
	}
	due := c.unhealthyPastToleration(key, status.AggregatedStatus, skip, toleration, now, wake)
	c.backOffs.settle(key, status.AggregatedStatus, now)
	leaving := make([]string, 0, len(skip)+len(due))
	for _, e := range skip {
		leaving = append(leaving, e.Cluster)
	}
	var out []eviction.Eviction
	var holds []backOffHold
	for _, d := range due {
		if c.backOffs.predates(key, d.cluster, obj.GetGeneration()) {
			continue // our own eviction from it is not in this read yet
		}
		// The unhealthy count of a held cluster goes on: the eviction is
		// made once the back-off ends, if the workload is unhealthy still.
		if h, held := c.holdFor(key, spec, status, leaving, d.cluster, now); held {
			holds = append(holds, h)
			wake.at(h.until)
			continue
		}
		leaving = append(leaving, d.cluster)
		out = append(out, eviction.Eviction{
			Cluster: d.cluster, Reason: eviction.ReasonApplicationFailure, Producer: eviction.ProducerApplicationFailover,
			PurgeMode: app.PurgeMode, GracePeriod: grace,
			Message: fmt.Sprintf("the workload has been unhealthy in %s for %s (tolerated: %s)", d.cluster, now.Sub(d.since).Round(time.Second), toleration),
		})
	}
	c.announceHolds(obj, key, spec, holds, now)
	return out
}

// unhealthyFor is a cluster where the workload has been unhealthy since.
type unhealthyFor struct {
	cluster string
	since   time.Time
}

// unhealthyPastToleration keeps since when the workload has been unhealthy
// in each cluster of items (not in skip), asks to be woken when one's
// toleration ends, and returns those whose toleration is over.
func (c *Controller) unhealthyPastToleration(key string, items []v1alpha1.AggregatedStatusItem, skip []eviction.Eviction, toleration time.Duration,
	now time.Time, wake *wakeup) []unhealthyFor {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen, next := c.unhealthySince[key], map[string]time.Time{}
	var due []unhealthyFor
	for _, item := range items {
		// Unknown is not unhealthy: a cluster that cannot report is the
		// taint manager's business.
		if !item.Applied || item.Health != v1alpha1.HealthUnhealthy || evicting(skip, item.ClusterName) {
			continue
		}
		since, ok := seen[item.ClusterName]
		if !ok {
			since = now
		}
		// Kept until the eviction is stored: a failed write, or a hold,
		// must not start the count again.
		next[item.ClusterName] = since
		if deadline := since.Add(toleration); now.Before(deadline) {
			wake.at(deadline)
			continue
		}
		due = append(due, unhealthyFor{item.ClusterName, since})
	}
	if len(next) == 0 {
		delete(c.unhealthySince, key)
	} else {
		c.unhealthySince[key] = next
	}
	return due
}

// restartUnhealthy starts the unhealthy count of a cluster again from now
// (its eviction was called off for want of a replacement).
func (c *Controller) restartUnhealthy(key, cluster string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unhealthySince[key] == nil {
		c.unhealthySince[key] = map[string]time.Time{}
	}
	c.unhealthySince[key][cluster] = now
}

func evicting(evictions []eviction.Eviction, cluster string) bool {
	for _, e := range evictions {
		if e.Cluster == cluster {
			return true
		}
	}
	return false
}

// defaultGraceSeconds is the hub's graceful eviction timeout, written on
// each task so that describe shows, and a later flag change keeps, the
// grace a task was given.
func (c *Controller) defaultGraceSeconds() int32 {
	return int32(min(c.cfg.GracefulEvictionTimeout/time.Second, 1<<31-1))
}
