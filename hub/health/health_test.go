package health

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const (
	s = time.Second
	m = time.Minute
)

func taint(key string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Effect: effect}
}

var (
	unreachableNoSchedule = taint(v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule)
	unreachableNoExecute  = taint(v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute)
	notReadyNoSchedule    = taint(v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule)
	notReadyNoExecute     = taint(v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoExecute)
	cordonTaint           = taint(v1alpha1.TaintClusterUnschedulable, corev1.TaintEffectNoSchedule)
)

// step is one evaluation in a scenario; the state carries over.
type step struct {
	now        time.Time
	obs        Observations
	wantReady  metav1.ConditionStatus
	wantReason string
	wantTaints []corev1.Taint
	wantNext   time.Time
}

func renewedAt(d time.Duration) Observations {
	return Observations{Registered: t0, LastRenewal: at(d), LeaseDuration: 40 * s}
}

func unhealthy(obs Observations, since time.Duration) Observations {
	obs.ProbeReported, obs.ProbeHealthy, obs.ProbeMessage, obs.ProbeSince = true, false, "readyz: connection refused", at(since)
	return obs
}

func healthy(obs Observations, since time.Duration) Observations {
	obs.ProbeReported, obs.ProbeHealthy, obs.ProbeSince = true, true, at(since)
	return obs
}

// noSession marks obs as a cluster the last leader held no session for.
func noSession(obs Observations) Observations {
	obs.NoRestartGrace = true
	return obs
}

// replicaLost marks obs as a cluster whose serving replica was lost at d.
func replicaLost(obs Observations, d time.Duration) Observations {
	obs.ReplicaLostAt = at(d)
	return obs
}

// restoredUnknown is the state of a cluster that was Unknown when the hub restarted.
var restoredUnknown = State{Ready: metav1.ConditionUnknown, Reason: v1alpha1.ReasonLeaseExpired, Since: at(-time.Minute), NotReadySince: at(-time.Minute)}

var terminatingTaint = corev1.Taint{Key: v1alpha1.TaintClusterTerminating, Effect: corev1.TaintEffectNoExecute}

func TestEvaluateScenarios(t *testing.T) {
	longAgo := t0.Add(-time.Hour) // the hub's restart grace is long over
	tests := []struct {
		name       string
		hubStarted time.Time
		initial    State // as restored after a hub restart
		steps      []step
	}{
		{"renewing cluster is Ready until the grace period ends, then Unknown, then NoExecute", longAgo, State{}, []step{
			{at(0), renewedAt(0), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(40 * s)},
			{at(40*s - time.Millisecond), renewedAt(0), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(40 * s)},
			{at(40 * s), renewedAt(0), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule}, at(40*s + 5*m)},
			{at(40*s + 5*m), renewedAt(0), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule, unreachableNoExecute}, time.Time{}},
			// The agent comes back: Ready at once, taints gone.
			{at(6 * m), renewedAt(6 * m), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(6*m + 40*s)},
		}},
		{"a renewal moves the deadline", longAgo, State{}, []step{
			{at(0), renewedAt(0), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(40 * s)},
			{at(10 * s), renewedAt(10 * s), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(50 * s)},
		}},
		{"unhealthy API server goes False after the failure threshold, recovers after the success threshold", longAgo, State{}, []step{
			{at(0), healthy(renewedAt(0), 0), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(40 * s)},
			{at(10 * s), unhealthy(renewedAt(10*s), 10*s), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(40 * s)},
			{at(40 * s), unhealthy(renewedAt(30*s), 10*s), metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady, []corev1.Taint{notReadyNoSchedule}, at(70 * s)},
			{at(50 * s), healthy(renewedAt(50*s), 50*s), metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady, []corev1.Taint{notReadyNoSchedule}, at(80 * s)},
			{at(80 * s), healthy(renewedAt(80*s), 50*s), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(120 * s)},
		}},
		{"not ready long enough adds NoExecute, counted from when Ready was lost even across False to Unknown", longAgo, State{}, []step{
			{at(0), unhealthy(renewedAt(0), 0), metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady, []corev1.Taint{notReadyNoSchedule}, at(40 * s)},
			{at(40 * s), unhealthy(renewedAt(0), 0), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule}, at(5 * m)},
			{at(5 * m), unhealthy(renewedAt(0), 0), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule, unreachableNoExecute}, time.Time{}},
		}},
		{"a never-connected cluster gets the startup grace, then goes Unknown", longAgo, State{}, []step{
			{at(0), Observations{Registered: t0}, "", "", nil, at(60 * s)},
			{at(60 * s), Observations{Registered: t0}, metav1.ConditionUnknown, v1alpha1.ReasonClusterNeverConnected, []corev1.Taint{unreachableNoSchedule}, at(60*s + 5*m)},
		}},
		{"after a hub restart nothing goes Unknown before grace + lease duration", t0, State{}, []step{
			{at(0), renewedAt(-30 * s), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(80 * s)},
			{at(80*s - time.Millisecond), renewedAt(-30 * s), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(80 * s)},
			{at(80 * s), renewedAt(-30 * s), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule}, at(80*s + 5*m)},
		}},
		{"after a takeover, a cluster the last leader had no session for expires on time", t0, State{Ready: metav1.ConditionTrue, Reason: v1alpha1.ReasonClusterReady}, []step{
			{at(0), noSession(renewedAt(-30 * s)), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(10 * s)},
			{at(10 * s), noSession(renewedAt(-30 * s)), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule}, at(10*s + 5*m)},
		}},
		{"after a takeover, a cluster without a session whose lease already expired is Unknown at once", t0, State{Ready: metav1.ConditionTrue, Reason: v1alpha1.ReasonClusterReady}, []step{
			{at(0), noSession(renewedAt(-50 * s)), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule}, at(5 * m)},
		}},
		{"a cluster whose serving replica was lost gets grace + lease duration from the loss, also without the restart grace", longAgo, State{}, []step{
			// Last renewal t0; the replica died at t0+30s: expiry t0+30s+80s
			// rather than t0+40s.
			{at(30 * s), replicaLost(noSession(renewedAt(0)), 30*s), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(110 * s)},
			{at(110 * s), replicaLost(noSession(renewedAt(0)), 30*s), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule}, at(110*s + 5*m)},
		}},
		{"a replica lost long before the last renewal changes nothing", longAgo, State{}, []step{
			{at(200 * s), replicaLost(renewedAt(200*s), 0), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(240 * s)},
		}},
		{"an Unknown cluster stays Unknown through a hub restart until it renews", t0, restoredUnknown, []step{
			// Restored state: Unknown since t0-1m, last renewal t0-2m; the
			// restart grace (until t0+80s) must not make it Ready.
			{at(0), renewedAt(-2 * m), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{unreachableNoSchedule}, at(80 * s)},
			{at(10 * s), renewedAt(10 * s), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, nil, at(80 * s)},
		}},
		{"cordon adds the unschedulable taint whatever the health", longAgo, State{}, []step{
			{at(0), func() Observations { o := renewedAt(0); o.Cordoned = true; return o }(), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, []corev1.Taint{cordonTaint}, at(40 * s)},
		}},
		{"a Cluster being deleted carries the terminating NoExecute taint, beside its health taints", longAgo, State{}, []step{
			{at(0), func() Observations { o := renewedAt(0); o.Terminating = true; return o }(), metav1.ConditionTrue, v1alpha1.ReasonClusterReady, []corev1.Taint{terminatingTaint}, at(40 * s)},
			{at(40 * s), func() Observations { o := renewedAt(0); o.Terminating = true; return o }(), metav1.ConditionUnknown, v1alpha1.ReasonLeaseExpired, []corev1.Taint{terminatingTaint, unreachableNoSchedule}, at(40*s + 5*m)},
		}},
		{"first report unhealthy is False at once", longAgo, State{}, []step{
			{at(0), unhealthy(renewedAt(0), 0), metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady, []corev1.Taint{notReadyNoSchedule}, at(40 * s)},
		}},
		{"notReady NoExecute after the eviction timeout", longAgo, State{}, []step{
			{at(0), unhealthy(renewedAt(0), 0), metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady, []corev1.Taint{notReadyNoSchedule}, at(40 * s)},
			{at(5 * m), unhealthy(renewedAt(5*m-time.Second), 0), metav1.ConditionFalse, v1alpha1.ReasonClusterNotReady, []corev1.Taint{notReadyNoSchedule, notReadyNoExecute}, at(5*m + 39*s)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig(tt.hubStarted)
			state := tt.initial
			for i, st := range tt.steps {
				var decision Decision
				state, decision = Evaluate(cfg, st.obs, state, st.now)
				if state.Ready != st.wantReady || state.Reason != st.wantReason {
					t.Errorf("step %d: Ready %q (%s), want %q (%s): %s", i, state.Ready, state.Reason, st.wantReady, st.wantReason, state.Message)
				}
				if diff := cmp.Diff(st.wantTaints, decision.Taints); diff != "" {
					t.Errorf("step %d: taints (-want +got):\n%s", i, diff)
				}
				if !decision.Next.Equal(st.wantNext) {
					t.Errorf("step %d: next evaluation %v, want %v", i, decision.Next.Sub(t0), st.wantNext.Sub(t0))
				}
			}
		})
	}
}

func TestEvaluateTracksTransitionTimes(t *testing.T) {
	cfg := DefaultConfig(t0.Add(-time.Hour))
	state, _ := Evaluate(cfg, renewedAt(0), State{}, at(0))
	state, _ = Evaluate(cfg, renewedAt(0), state, at(10*s))
	if !state.Since.Equal(at(0)) {
		t.Errorf("Since = %v, want t0 (no change at +10s)", state.Since)
	}
	state, _ = Evaluate(cfg, renewedAt(0), state, at(45*s))
	if !state.Since.Equal(at(45*s)) || !state.NotReadySince.Equal(at(45*s)) {
		t.Errorf("after expiry: Since %v NotReadySince %v, want both +45s", state.Since.Sub(t0), state.NotReadySince.Sub(t0))
	}
	state, _ = Evaluate(cfg, renewedAt(50*s), state, at(50*s))
	if !state.NotReadySince.IsZero() {
		t.Errorf("NotReadySince = %v after recovery, want zero", state.NotReadySince)
	}
}

func TestMergeTaints(t *testing.T) {
	earlier := metav1.NewTime(t0)
	operator := corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &earlier}
	kept := unreachableNoSchedule
	kept.TimeAdded = &earlier
	stale := notReadyNoSchedule
	stale.TimeAdded = &earlier

	merged, added, removed := DefaultConfig(t0).MergeTaints(
		[]corev1.Taint{operator, kept, stale},
		[]corev1.Taint{unreachableNoSchedule, unreachableNoExecute}, nil,
		at(time.Minute))

	later := metav1.NewTime(at(time.Minute))
	newTaint := unreachableNoExecute
	newTaint.TimeAdded = &later
	if diff := cmp.Diff([]corev1.Taint{operator, kept, newTaint}, merged); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Taint{newTaint}, added); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Taint{stale}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}

func TestGrantedLease(t *testing.T) {
	cfg := DefaultConfig(t0)
	for _, tt := range []struct{ requested, want int32 }{{0, 40}, {10, 10}, {40, 40}, {300, 40}} {
		if got := GrantedLeaseSeconds(tt.requested, cfg); got != tt.want {
			t.Errorf("GrantedLeaseSeconds(%d) = %d, want %d", tt.requested, got, tt.want)
		}
	}
}

// TestWithoutNoExecuteTaints: with NoExecuteTaints false (Karmada 1.14's
// behaviour), a cluster not Ready for longer than the eviction timeout
// keeps only the NoSchedule taint, no evaluation is due for the timeout,
// a NoExecute taint of the same key that a ClusterTaintPolicy added is
// left alone, whatever Ready is, and one no policy added is removed.
func TestWithoutNoExecuteTaints(t *testing.T) {
	cfg := DefaultConfig(t0.Add(-time.Hour))
	cfg.NoExecuteTaints = false
	state, decision := Evaluate(cfg, unhealthy(renewedAt(0), 0), State{}, at(0))
	state, decision = Evaluate(cfg, unhealthy(renewedAt(10*m), 0), state, at(10*m))
	if state.Ready != metav1.ConditionFalse {
		t.Fatalf("Ready = %s, want False", state.Ready)
	}
	if diff := cmp.Diff([]corev1.Taint{notReadyNoSchedule}, decision.Taints); diff != "" {
		t.Errorf("taints after the eviction timeout (-want +got):\n%s", diff)
	}
	if want := at(10*m + 40*s); !decision.Next.Equal(want) {
		t.Errorf("next evaluation %v, want the lease expiry %v", decision.Next.Sub(t0), want.Sub(t0))
	}

	earlier := metav1.NewTime(t0)
	policy := notReadyNoExecute
	policy.TimeAdded = &earlier
	owners := map[string]string{v1alpha1.TaintOwnerKey(notReadyNoExecute): "not-ready"}
	merged, added, removed := cfg.MergeTaints([]corev1.Taint{policy}, nil, owners, at(time.Minute))
	if diff := cmp.Diff([]corev1.Taint{policy}, merged); diff != "" || len(added)+len(removed) > 0 {
		t.Errorf("merged (-want +got):\n%s\nadded %v removed %v", diff, added, removed)
	}
	// Not a policy's: left from a hub that added NoExecute taints, and removed.
	merged, added, removed = cfg.MergeTaints([]corev1.Taint{policy}, nil, nil, at(time.Minute))
	if len(merged)+len(added) > 0 || !cmp.Equal([]corev1.Taint{policy}, removed) {
		t.Errorf("a NoExecute taint no policy owns: merged %v added %v removed %v, want it removed", merged, added, removed)
	}
	for _, tt := range []struct {
		taint         corev1.Taint
		hub, off, own bool // managed with NoExecuteTaints true, false, false and owned by a policy
	}{
		{notReadyNoSchedule, true, true, true},
		{notReadyNoExecute, true, true, false},
		{unreachableNoExecute, true, true, false},
		{corev1.Taint{Key: v1alpha1.TaintClusterTerminating, Effect: corev1.TaintEffectNoExecute}, true, true, true},
		{corev1.Taint{Key: "example.com/degraded", Effect: corev1.TaintEffectNoExecute}, false, false, false},
	} {
		owned := map[string]string{v1alpha1.TaintOwnerKey(tt.taint): "a-policy"}
		if got := DefaultConfig(t0).IsManaged(tt.taint, owned); got != tt.hub {
			t.Errorf("IsManaged(%s:%s) = %v with NoExecute taints, want %v", tt.taint.Key, tt.taint.Effect, got, tt.hub)
		}
		if got := cfg.IsManaged(tt.taint, nil); got != tt.off {
			t.Errorf("IsManaged(%s:%s) = %v without NoExecute taints, want %v", tt.taint.Key, tt.taint.Effect, got, tt.off)
		}
		if got := cfg.IsManaged(tt.taint, owned); got != tt.own {
			t.Errorf("IsManaged(%s:%s) owned by a policy = %v without NoExecute taints, want %v", tt.taint.Key, tt.taint.Effect, got, tt.own)
		}
	}
}
