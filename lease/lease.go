// Package lease models cluster leases: coordination.k8s.io/v1 Lease objects
// renewed with the hub's clock, their freshness, and the ordered deadlines
// that make expiry event-driven rather than polled.
package lease

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// New returns the Lease of a cluster acquired by holder at now.
func New(cluster, holder string, duration time.Duration, now time.Time) *coordinationv1.Lease {
	stamp := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: v1alpha1.LeaseNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To(int32(duration / time.Second)),
			AcquireTime:          &stamp,
			RenewTime:            &stamp,
			LeaseTransitions:     ptr.To[int32](0),
		},
	}
}

// Renew stamps a renewal received at now (the hub's clock) from holder. A
// new holder, such as a restarted agent, counts as a transition.
func Renew(l *coordinationv1.Lease, holder string, duration time.Duration, now time.Time) {
	stamp := metav1.NewMicroTime(now)
	if ptr.Deref(l.Spec.HolderIdentity, "") != holder {
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Spec.AcquireTime = &stamp
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	}
	l.Spec.LeaseDurationSeconds = ptr.To(int32(duration / time.Second))
	l.Spec.RenewTime = &stamp
}

// State is a lease's freshness.
type State string

// The agent renews every quarter of the duration, so a fresh lease has
// missed at most one renewal, a late one several, and an expired one
// outlived its duration.
const (
	Fresh   State = "fresh"
	Late    State = "late"
	Expired State = "expired"
	// Unknown is a lease without a renewal time or duration to judge by.
	Unknown State = "unknown"
)

// Freshness says how fresh a lease is at now.
func Freshness(l *coordinationv1.Lease, now time.Time) State {
	if l == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return Unknown
	}
	age := now.Sub(l.Spec.RenewTime.Time)
	duration := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	switch {
	case age <= duration/2:
		return Fresh
	case age <= duration:
		return Late
	default:
		return Expired
	}
}

// RenewedWithin says whether an agent was renewing at t: lastRenewal or
// sessionStart (zero: none) within half of duration (0: defaultDuration)
// before t, that is within two renewal intervals of a quarter lease each.
// The leader's registry judges its clusters by it, and so does a standby
// its own sessions when it takes over.
func RenewedWithin(lastRenewal, sessionStart time.Time, duration, defaultDuration time.Duration, t time.Time) bool {
	if duration == 0 {
		duration = defaultDuration
	}
	recent := func(at time.Time) bool { return !at.IsZero() && t.Sub(at) <= duration/2 }
	return recent(lastRenewal) || recent(sessionStart)
}
