package cli

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	leases "github.com/flotilla-io/flotilla/lease"
)

// leaseState says whether l is fresh, late or expired at now (see
// leases.Freshness: the agent renews every quarter of the duration, so fresh
// means at most one renewal missed).
func leaseState(l *coordinationv1.Lease, now time.Time) string {
	return string(leases.Freshness(l, now))
}

// leaseRenewed is the age of l's last renewal.
func leaseRenewed(l *coordinationv1.Lease, now time.Time) string {
	if l.Spec.RenewTime == nil {
		return unknownAge
	}
	return age(now, l.Spec.RenewTime.Time)
}
