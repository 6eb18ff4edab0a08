package cli

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// States of a cluster lease, judged by how long ago it was renewed.
//
// The agent renews its lease every quarter of the lease duration (10s of
// 40s by default). A lease renewed at most half a duration ago has missed
// at most one renewal: it is fresh. Up to a full duration it is late:
// renewals are being missed, but the lease still holds. Beyond that it has
// expired, and the hub marks the cluster Ready=Unknown and taints it
// unreachable.
const (
	leaseFresh   = "fresh"
	leaseLate    = "late"
	leaseExpired = "expired"
	// leaseUnknown is a lease without a renewTime or duration to judge by.
	leaseUnknown = "unknown"
)

// leaseState says whether l is fresh, late or expired at now.
func leaseState(l *coordinationv1.Lease, now time.Time) string {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return leaseUnknown
	}
	since := now.Sub(l.Spec.RenewTime.Time)
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	switch {
	case since <= d/2:
		return leaseFresh
	case since <= d:
		return leaseLate
	default:
		return leaseExpired
	}
}

// leaseRenewed is the age of l's last renewal.
func leaseRenewed(l *coordinationv1.Lease, now time.Time) string {
	if l.Spec.RenewTime == nil {
		return unknownAge
	}
	return age(now, l.Spec.RenewTime.Time)
}
