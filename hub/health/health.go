// Package health decides a cluster's Ready condition and health taints from
// what the hub observed: lease renewals stamped with the hub's clock and the
// agent's probe of its own API server. It is pure logic over a clock reading:
// every evaluation also returns the next instant at which the answer could
// change, so the caller arms one timer instead of polling.
package health

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Config holds the thresholds of DESIGN §3.
type Config struct {
	// GracePeriod after the last renewal before Ready goes Unknown.
	GracePeriod time.Duration
	// StartupGracePeriod after registration for a cluster never renewed.
	StartupGracePeriod time.Duration
	// FailureThreshold: the API server must be reported unhealthy this long
	// before Ready goes False.
	FailureThreshold time.Duration
	// SuccessThreshold: after False, it must be reported healthy this long
	// before Ready goes True again.
	SuccessThreshold time.Duration
	// EvictionTimeout: not Ready this long adds the NoExecute taint.
	EvictionTimeout time.Duration
	// NoExecuteTaints: the hub adds the not-ready and unreachable
	// NoExecute taints after EvictionTimeout (Flotilla's default). False
	// leaves them to ClusterTaintPolicies, as Karmada 1.14 and later do:
	// the hub then neither adds nor removes them.
	NoExecuteTaints bool
	// DefaultLeaseDuration stands in for clusters whose lease duration is
	// not known yet.
	DefaultLeaseDuration time.Duration
	// HubStarted is when this hub began to serve agents as the leader
	// (registry.New sets it once loaded when it is zero). Nothing goes
	// Unknown before HubStarted + GracePeriod + lease duration, so a hub
	// restart gives every agent time to reconnect.
	HubStarted time.Time
}

// DefaultConfig returns the defaults of DESIGN §3.
func DefaultConfig(hubStarted time.Time) Config {
	return Config{
		GracePeriod:          40 * time.Second,
		StartupGracePeriod:   60 * time.Second,
		FailureThreshold:     30 * time.Second,
		SuccessThreshold:     30 * time.Second,
		EvictionTimeout:      5 * time.Minute,
		NoExecuteTaints:      true,
		DefaultLeaseDuration: 40 * time.Second,
		HubStarted:           hubStarted,
	}
}

// Observations are the facts about one cluster.
type Observations struct {
	// Registered is when the Cluster object was created.
	Registered time.Time
	// LastRenewal is the hub time of the last lease renewal; zero if never.
	LastRenewal time.Time
	// LeaseDuration is the agent's lease duration; zero if unknown.
	LeaseDuration time.Duration
	// ProbeReported is true once the agent reported its API server's health.
	ProbeReported bool
	ProbeHealthy  bool
	ProbeMessage  string
	// ProbeSince is when the probe result last changed.
	ProbeSince time.Time
	// Cordoned is spec.unschedulable.
	Cordoned bool
	// Terminating: the Cluster has a deletionTimestamp (its finalizer
	// holds it while its workloads leave).
	Terminating bool
	// NoRestartGrace: the leader before this hub saw the cluster's agent
	// no longer renewing when it last told the standbys (package
	// handover), so its lease expires on time, without the grace a
	// restart gives agents to reconnect.
	NoRestartGrace bool
	// ReplicaLostAt is when the hub replica serving the cluster's agent
	// died or left, if it did since the agent's last renewal: the lease
	// does not expire before a grace period and a lease duration after
	// it, the time the agent has to notice and reconnect to another
	// replica (as after a restart).
	ReplicaLostAt time.Time
}

// State is what an evaluation remembers for the next one.
type State struct {
	Ready   metav1.ConditionStatus // "" before the first evaluation
	Reason  string
	Message string
	// Since is when Ready last changed.
	Since time.Time
	// NotReadySince is when Ready last left True; zero while True.
	NotReadySince time.Time
}

// Decision is the outcome of an evaluation.
type Decision struct {
	// Taints are the health, cordon and terminating taints the cluster must carry, without
	// TimeAdded: see MergeTaints.
	Taints []corev1.Taint
	// Next is when to evaluate again if nothing else happens; zero if never.
	Next time.Time
}

// Evaluate computes the cluster's Ready state at now.
func Evaluate(cfg Config, obs Observations, prev State, now time.Time) (State, Decision) {
	status, reason, message, next := readiness(cfg, obs, prev, now)
	state := prev
	if status != prev.Ready {
		state.Since = now
		if (status == metav1.ConditionFalse || status == metav1.ConditionUnknown) && prev.NotReadySince.IsZero() {
			state.NotReadySince = now
		}
	}
	if status == metav1.ConditionTrue || status == "" {
		state.NotReadySince = time.Time{}
	}
	state.Ready, state.Reason, state.Message = status, reason, message

	var taints []corev1.Taint
	if obs.Cordoned {
		taints = append(taints, corev1.Taint{Key: v1alpha1.TaintClusterUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	if obs.Terminating {
		// No default toleration covers it: every workload that does not
		// tolerate it leaves through the taint manager.
		taints = append(taints, corev1.Taint{Key: v1alpha1.TaintClusterTerminating, Effect: corev1.TaintEffectNoExecute})
	}
	if status == metav1.ConditionFalse || status == metav1.ConditionUnknown {
		key := v1alpha1.TaintClusterNotReady
		if status == metav1.ConditionUnknown {
			key = v1alpha1.TaintClusterUnreachable
		}
		taints = append(taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
		evictAt := state.NotReadySince.Add(cfg.EvictionTimeout)
		if !cfg.NoExecuteTaints {
			return state, Decision{Taints: taints, Next: next}
		}
		if !now.Before(evictAt) {
			taints = append(taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute})
		} else {
			next = earliest(next, evictAt)
		}
	}
	return state, Decision{Taints: taints, Next: next}
}

// readiness applies the rules of DESIGN §3 and says when they could next
// give another answer.
func readiness(cfg Config, obs Observations, prev State, now time.Time) (status metav1.ConditionStatus, reason, message string, next time.Time) {
	expiry := leaseExpiry(cfg, obs)
	if obs.LastRenewal.IsZero() && now.Before(expiry) && prev.Ready == "" {
		// Never connected, still within the startup grace: no verdict yet.
		return "", "", "", expiry
	}
	// An Unknown cluster stays Unknown until it renews again, whatever grace
	// a hub restart gives the others.
	stillUnknown := prev.Ready == metav1.ConditionUnknown && !obs.LastRenewal.After(prev.Since)
	if !now.Before(expiry) || stillUnknown {
		if stillUnknown && now.Before(expiry) {
			return prev.Ready, prev.Reason, prev.Message, expiry
		}
		if obs.LastRenewal.IsZero() {
			return metav1.ConditionUnknown, v1alpha1.ReasonClusterNeverConnected,
				fmt.Sprintf("cluster agent has not renewed its lease within the startup grace period (%v)", cfg.StartupGracePeriod), time.Time{}
		}
		return metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired,
			fmt.Sprintf("cluster lease not renewed for %v (grace period %v)", now.Sub(obs.LastRenewal).Round(time.Millisecond), cfg.GracePeriod), time.Time{}
	}
	next = expiry
	switch {
	case !obs.ProbeReported || obs.ProbeHealthy:
		if prev.Ready == metav1.ConditionFalse && obs.ProbeReported {
			recovered := obs.ProbeSince.Add(cfg.SuccessThreshold)
			if now.Before(recovered) {
				return metav1.ConditionFalse, prev.Reason, prev.Message, earliest(next, recovered)
			}
		}
		return metav1.ConditionTrue, v1alpha1.ReasonClusterReady, "cluster agent renews its lease and its API server is healthy", next
	default:
		failed := obs.ProbeSince.Add(cfg.FailureThreshold)
		notReadyMessage := "cluster API server is not healthy: " + obs.ProbeMessage
		if now.Before(failed) && prev.Ready == metav1.ConditionTrue {
			return metav1.ConditionTrue, prev.Reason, prev.Message, earliest(next, failed)
		}
		return metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady, notReadyMessage, next
	}
}

// leaseExpiry is when the lease counts as expired: the grace period after
// the last renewal (or the startup grace after registration), but never
// before the restart grace has passed, unless the cluster had no session
// to lose, nor before the reconnect grace of a lost replica.
func leaseExpiry(cfg Config, obs Observations) time.Time {
	expiry := obs.LastRenewal.Add(cfg.GracePeriod)
	if obs.LastRenewal.IsZero() {
		expiry = obs.Registered.Add(cfg.StartupGracePeriod)
	}
	leaseDuration := obs.LeaseDuration
	if leaseDuration == 0 {
		leaseDuration = cfg.DefaultLeaseDuration
	}
	if !obs.ReplicaLostAt.IsZero() {
		expiry = latest(expiry, obs.ReplicaLostAt.Add(cfg.GracePeriod+leaseDuration))
	}
	if obs.NoRestartGrace {
		return expiry
	}
	return latest(expiry, cfg.HubStarted.Add(cfg.GracePeriod+leaseDuration))
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// GrantedLeaseSeconds is the lease the hub grants: what the agent asked for
// (or the default), but never longer than the grace period, or an agent
// renewing every quarter of a long lease would expire between renewals.
func GrantedLeaseSeconds(requested int32, cfg Config) int32 {
	lease := time.Duration(requested) * time.Second
	if lease == 0 {
		lease = cfg.DefaultLeaseDuration
	}
	lease = min(lease, cfg.GracePeriod)
	return max(1, int32(lease/time.Second))
}
