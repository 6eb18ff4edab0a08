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
// skip. How long each has been unhealthy is kept in memory: after a hub
// restart the count starts again, which only delays a failover.
func (c *Controller) applicationFailures(key string, spec *v1alpha1.ResourceBindingSpec, items []v1alpha1.AggregatedStatusItem,
	skip []eviction.Eviction, now time.Time, wake *wakeup) []eviction.Eviction {
	var app *v1alpha1.ApplicationFailoverBehavior
	if spec.Failover != nil {
		app = spec.Failover.Application
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if app == nil {
		delete(c.unhealthySince, key)
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
	seen, next := c.unhealthySince[key], map[string]time.Time{}
	var out []eviction.Eviction
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
		deadline := since.Add(toleration)
		if now.Before(deadline) {
			next[item.ClusterName] = since
			wake.at(deadline)
			continue
		}
		// Kept until the eviction is stored: a failed write must not
		// start the count again.
		next[item.ClusterName] = since
		out = append(out, eviction.Eviction{
			Cluster: item.ClusterName, Reason: eviction.ReasonApplicationFailure, Producer: eviction.ProducerApplicationFailover,
			PurgeMode: app.PurgeMode, GracePeriod: grace,
			Message: fmt.Sprintf("the workload has been unhealthy in %s for %s (tolerated: %s)", item.ClusterName, now.Sub(since).Round(time.Second), toleration),
		})
	}
	if len(next) == 0 {
		delete(c.unhealthySince, key)
	} else {
		c.unhealthySince[key] = next
	}
	return out
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
