package eviction

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/scheduler"
)

// Decision is what the taint manager does with one binding on one cluster.
type Decision struct {
	Evict bool // evict now
	// Conditional: Evict comes from a PreferNoExecute taint only, so the
	// binding leaves only if it can go to a healthy cluster with room; it
	// stays otherwise. At is then the earliest instant another taint's
	// toleration runs out.
	Conditional bool
	At          time.Time     // when !Evict or Conditional: the earliest instant a toleration runs out; zero = never
	Taint       *corev1.Taint // the deciding taint (untolerated or expiring first); nil if none; points into the taints slice passed in
}

// Decide applies Kubernetes' NoExecute taint semantics per taint, with
// Karmada's per-taint start: only NoExecute and PreferNoExecute taints
// count. For each such taint, the first toleration (in slice order) that
// tolerates it decides, as in Kubernetes' and Karmada's
// GetMatchingTolerations; later ones that also match do not count. No
// toleration tolerates it -> Evict now. The deciding toleration without
// TolerationSeconds tolerates that taint forever; otherwise the taint's
// allowance is its TolerationSeconds (a value <= 0 counts as 0). The
// allowance runs from start = max(taint.TimeAdded, since); a taint without
// TimeAdded starts at since, or at now when since is zero too. deadline =
// start + allowance; deadline <= now -> Evict now. A NoExecute taint that
// evicts wins over any other taint (the first such taint in slice order is
// Decision.Taint); when only PreferNoExecute taints evict, the first of
// them decides and the eviction is Conditional. Otherwise At = the minimum
// deadline (Taint = that taint), zero if all tolerated forever. since is
// the partition-protection floor: grace restarts when the hub leaves
// isolation.
//
// TimeAdded is taken as the instant the taint was added: a caller that
// knows it only to the second, as the API stores it, rounds it up first
// so that no allowance ends early.
func Decide(taints []corev1.Taint, tolerations []corev1.Toleration, since, now time.Time) Decision {
	var d Decision
	var preferred *corev1.Taint // the first PreferNoExecute taint that evicts
	for i := range taints {
		taint := &taints[i]
		if taint.Effect != corev1.TaintEffectNoExecute && taint.Effect != v1alpha1.TaintEffectPreferNoExecute {
			continue
		}
		allowance, forever, tolerated := allowanceFor(tolerations, taint)
		if forever {
			continue
		}
		deadline := taintStart(taint, since, now).Add(allowance)
		if !tolerated || !deadline.After(now) {
			if taint.Effect == corev1.TaintEffectNoExecute {
				return Decision{Evict: true, Taint: taint}
			}
			if preferred == nil {
				preferred = taint
			}
			continue
		}
		// Strictly earlier only, so that ties go to the first taint.
		if d.At.IsZero() || deadline.Before(d.At) {
			d.At, d.Taint = deadline, taint
		}
	}
	if preferred != nil {
		return Decision{Evict: true, Conditional: true, At: d.At, Taint: preferred}
	}
	return d
}

// maxSeconds is the longest toleration time.Duration can hold; longer ones
// are cut to it rather than overflowing into the past (≈292 years is
// forever for any practical purpose, but still a deadline).
const maxSeconds = math.MaxInt64 / int64(time.Second)

// allowanceFor returns how long taint is tolerated, as the first
// toleration that tolerates it says: tolerated is false when none does;
// forever is true when that one leaves TolerationSeconds unset. A later
// toleration that also matches changes nothing, neither a shorter nor a
// longer one. Kubernetes' taint manager (GetMatchingTolerations, which
// stops at the first match per taint, then getMinTolerationTime over those)
// and Karmada's (the same GetMatchingTolerations) choose the tolerations
// this way. Kubernetes then runs the smallest of their seconds from one
// start, when it saw the pod tainted, which is the same as running each
// taint's own from there. Karmada runs each chosen toleration's seconds
// from the timeAdded of every taint it tolerates, also taints for which
// another toleration came first; here it runs for the taint it was chosen
// for, so that a taint tolerated forever by its first match stays so.
func allowanceFor(tolerations []corev1.Toleration, taint *corev1.Taint) (allowance time.Duration, forever, tolerated bool) {
	for i := range tolerations {
		if !scheduler.Tolerates(tolerations[i:i+1], taint) {
			continue
		}
		s := tolerations[i].TolerationSeconds
		if s == nil {
			return 0, true, true
		}
		return time.Duration(min(max(*s, 0), maxSeconds)) * time.Second, false, true
	}
	return 0, false, false
}

// taintStart is when a taint's allowance starts running: its TimeAdded, but
// never before since, so that allowances restart when the hub leaves
// isolation instead of evicting everything at once. A taint without
// TimeAdded (set by hand) starts at since, or now if there is no floor.
func taintStart(taint *corev1.Taint, since, now time.Time) time.Time {
	if taint.TimeAdded == nil || taint.TimeAdded.IsZero() {
		if since.IsZero() {
			return now
		}
		return since
	}
	if added := taint.TimeAdded.Time; added.After(since) {
		return added
	}
	return since
}
