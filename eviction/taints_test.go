package eviction

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

const (
	notReady    = v1alpha1.TaintClusterNotReady
	unreachable = v1alpha1.TaintClusterUnreachable
)

func TestDecide(t *testing.T) {
	noSchedule := corev1.Taint{Key: unreachable, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name        string
		taints      []corev1.Taint
		tolerations []corev1.Toleration
		since, now  time.Time
		wantEvict   bool
		// wantConditional: the eviction is PreferNoExecute's, only if
		// the binding can go elsewhere.
		wantConditional bool
		wantAt          time.Time
		wantTaint       int // index into taints; -1: nil
	}{
		{name: "no taints", now: t0, wantTaint: -1},
		{name: "NoSchedule is ignored", taints: []corev1.Taint{noSchedule}, now: t0, wantTaint: -1},
		{name: "PreferNoSchedule is ignored", taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}, now: t0, wantTaint: -1},
		{name: "untolerated NoExecute evicts now",
			taints: []corev1.Taint{noExecute(unreachable, t0)}, now: t0, wantEvict: true},
		{name: "untolerated NoSchedule next to a tolerated NoExecute",
			taints:      []corev1.Taint{noSchedule, noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, nil)}, now: t0, wantTaint: -1},
		{name: "tolerated forever",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, nil)}, now: at(time.Hour), wantTaint: -1},
		{name: "before the deadline",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(300))},
			now:         at(299 * time.Second), wantAt: at(300 * time.Second)},
		{name: "at the deadline",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(300))},
			now:         at(300 * time.Second), wantEvict: true},
		{name: "after the deadline",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(300))},
			now:         at(time.Hour), wantEvict: true},
		{name: "toleration for another taint does not count",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(notReady, nil)}, now: t0, wantEvict: true},
		{name: "NoSchedule toleration does not tolerate NoExecute",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{{Key: unreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			now:         t0, wantEvict: true},
		{name: "Equal with another value does not tolerate",
			taints:      []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}},
			tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cpu"}},
			now:         t0, wantEvict: true},
		{name: "empty key Exists tolerates every taint",
			taints:      []corev1.Taint{noExecute(unreachable, t0), noExecute("example.com/x", t0)},
			tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, TolerationSeconds: secs(30)}},
			now:         t0, wantAt: at(30 * time.Second)},
		{name: "two taints: the earlier deadline wins",
			taints:      []corev1.Taint{noExecute(notReady, t0), noExecute(unreachable, at(time.Minute))},
			tolerations: []corev1.Toleration{tolerate(notReady, secs(600)), tolerate(unreachable, secs(120))},
			now:         at(time.Minute), wantAt: at(3 * time.Minute), wantTaint: 1},
		{name: "two taints: an expired one evicts although the other has time",
			taints:      []corev1.Taint{noExecute(notReady, at(4*time.Minute)), noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(notReady, secs(600)), tolerate(unreachable, secs(300))},
			now:         at(5 * time.Minute), wantEvict: true, wantTaint: 1},
		{name: "untolerated taint wins over a pending one",
			taints:      []corev1.Taint{noExecute(notReady, t0), noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(notReady, secs(600))},
			now:         t0, wantEvict: true, wantTaint: 1},
		{name: "two untolerated taints: the first decides",
			taints: []corev1.Taint{noExecute(notReady, t0), noExecute(unreachable, t0)},
			now:    t0, wantEvict: true},
		{name: "equal deadlines: the first decides",
			taints:      []corev1.Taint{noExecute(notReady, t0), noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(notReady, secs(60)), tolerate(unreachable, secs(60))},
			now:         t0, wantAt: at(time.Minute)},
		// For each taint the first matching toleration decides, as in
		// Kubernetes and Karmada (GetMatchingTolerations).
		{name: "forever then seconds on one taint: the first, forever, decides",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, nil), tolerate(unreachable, secs(60))},
			now:         at(time.Hour), wantTaint: -1},
		{name: "seconds then forever on one taint: the first, seconds, decides",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(60)), tolerate(unreachable, nil)},
			now:         t0, wantAt: at(time.Minute)},
		{name: "a later, shorter toleration does not count",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(600)), {Operator: corev1.TolerationOpExists, TolerationSeconds: secs(60)}},
			now:         t0, wantAt: at(10 * time.Minute)},
		{name: "a later, longer toleration does not count",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(60)), tolerate(unreachable, secs(600))},
			now:         t0, wantAt: at(time.Minute)},
		{name: "a later zero does not evict",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(60)), tolerate(unreachable, secs(0))},
			now:         t0, wantAt: at(time.Minute)},
		{name: "an empty-key Exists first decides over a specific one after it",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, TolerationSeconds: secs(30)}, tolerate(unreachable, nil)},
			now:         t0, wantAt: at(30 * time.Second)},
		{name: "a first toleration that does not match is skipped",
			taints: []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{
				{Key: unreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				tolerate(notReady, secs(10)),
				tolerate(unreachable, secs(120)),
				tolerate(unreachable, secs(60)),
			},
			now: t0, wantAt: at(2 * time.Minute)},
		{name: "a karmada key first decides",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate("cluster.karmada.io/unreachable", secs(90)), tolerate(unreachable, secs(30))},
			now:         t0, wantAt: at(90 * time.Second)},
		// Each taint keeps its first match: the 60 s of the catch-all,
		// first for not-ready only, does not apply to unreachable, which
		// its own toleration, first for it, tolerates forever. (Kubernetes
		// evicts at the same instant, 60 s after it saw not-ready; Karmada
		// would apply the 60 s to unreachable too and evict at t0+1m.)
		{name: "a toleration chosen for one taint does not decide another",
			taints:      []corev1.Taint{noExecute(unreachable, t0), noExecute(notReady, at(100*time.Second))},
			tolerations: []corev1.Toleration{tolerate(unreachable, nil), {Operator: corev1.TolerationOpExists, TolerationSeconds: secs(60)}},
			now:         at(100 * time.Second), wantAt: at(160 * time.Second), wantTaint: 1},
		{name: "zero seconds evicts now",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(0))},
			now:         t0, wantEvict: true},
		{name: "negative seconds count as zero",
			taints:      []corev1.Taint{noExecute(unreachable, at(time.Minute))},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(-30))},
			now:         at(time.Minute), wantEvict: true},
		{name: "huge seconds do not overflow",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(math.MaxInt64))},
			now:         t0, wantAt: t0.Add(time.Duration(maxSeconds) * time.Second)},
		{name: "karmada key tolerates the flotilla taint",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate("cluster.karmada.io/unreachable", secs(60))},
			now:         t0, wantAt: at(time.Minute)},
		{name: "karmada key with another suffix does not",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate("cluster.karmada.io/not-ready", nil)},
			now:         t0, wantEvict: true},
		{name: "since later than timeAdded restarts the grace",
			taints:      []corev1.Taint{noExecute(unreachable, t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(300))},
			since:       at(10 * time.Minute), now: at(11 * time.Minute), wantAt: at(15 * time.Minute)},
		{name: "since earlier than timeAdded changes nothing",
			taints:      []corev1.Taint{noExecute(unreachable, at(time.Minute))},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(300))},
			since:       t0, now: at(2 * time.Minute), wantAt: at(6 * time.Minute)},
		{name: "since does not save an untolerated taint",
			taints: []corev1.Taint{noExecute(unreachable, t0)},
			since:  at(time.Minute), now: at(time.Minute), wantEvict: true},
		{name: "missing timeAdded starts at since",
			taints:      []corev1.Taint{noExecute(unreachable, time.Time{})},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(300))},
			since:       t0, now: at(2 * time.Minute), wantAt: at(5 * time.Minute)},
		{name: "missing timeAdded and since starts now",
			taints:      []corev1.Taint{noExecute(unreachable, time.Time{})},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(300))},
			now:         at(2 * time.Minute), wantAt: at(7 * time.Minute)},
		{name: "missing timeAdded with zero seconds evicts now",
			taints:      []corev1.Taint{noExecute(unreachable, time.Time{})},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(0))},
			now:         t0, wantEvict: true},
		// PreferNoExecute counts as NoExecute does, but its evictions are
		// conditional, and an unconditional one wins.
		{name: "untolerated PreferNoExecute evicts, conditionally",
			taints: []corev1.Taint{preferNoExecute("degraded", t0)}, now: t0, wantEvict: true, wantConditional: true},
		{name: "a NoExecute toleration does not tolerate PreferNoExecute",
			taints:      []corev1.Taint{preferNoExecute("degraded", t0)},
			tolerations: []corev1.Toleration{tolerate("degraded", nil)}, now: t0, wantEvict: true, wantConditional: true},
		{name: "tolerated PreferNoExecute waits for its seconds",
			taints:      []corev1.Taint{preferNoExecute("degraded", t0)},
			tolerations: []corev1.Toleration{{Key: "degraded", Operator: corev1.TolerationOpExists, Effect: v1alpha1.TaintEffectPreferNoExecute, TolerationSeconds: secs(60)}},
			now:         at(30 * time.Second), wantAt: at(time.Minute)},
		{name: "an expired PreferNoExecute toleration evicts, conditionally",
			taints:      []corev1.Taint{preferNoExecute("degraded", t0)},
			tolerations: []corev1.Toleration{{Key: "degraded", Operator: corev1.TolerationOpExists, TolerationSeconds: secs(60)}},
			now:         at(time.Minute), wantEvict: true, wantConditional: true},
		{name: "an untolerated NoExecute after a PreferNoExecute evicts unconditionally",
			taints: []corev1.Taint{preferNoExecute("degraded", t0), noExecute(unreachable, t0)},
			now:    t0, wantEvict: true, wantTaint: 1},
		{name: "a conditional eviction keeps the next deadline of the others",
			taints:      []corev1.Taint{noExecute(unreachable, t0), preferNoExecute("degraded", t0)},
			tolerations: []corev1.Toleration{tolerate(unreachable, secs(300))},
			now:         t0, wantEvict: true, wantConditional: true, wantAt: at(5 * time.Minute), wantTaint: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.taints, tt.tolerations, tt.since, tt.now)
			if got.Evict != tt.wantEvict || got.Conditional != tt.wantConditional || !got.At.Equal(tt.wantAt) {
				t.Errorf("Decide = {Evict: %v, Conditional: %v, At: %v}, want {Evict: %v, Conditional: %v, At: %v}",
					got.Evict, got.Conditional, got.At, tt.wantEvict, tt.wantConditional, tt.wantAt)
			}
			checkTaint(t, got.Taint, tt.taints, tt.wantTaint)
		})
	}
}

// checkTaint checks that got points at taints[want] (want -1: nil).
func checkTaint(t *testing.T, got *corev1.Taint, taints []corev1.Taint, want int) {
	t.Helper()
	switch {
	case want < 0 && got != nil:
		t.Errorf("Taint = %v, want nil", got)
	case want >= 0 && got != &taints[want]:
		t.Errorf("Taint = %v, want a pointer to taints[%d] (%v)", got, want, taints[want])
	}
}
