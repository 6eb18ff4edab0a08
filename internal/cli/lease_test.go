package cli

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	leases "github.com/flotilla-io/flotilla/lease"
)

func TestLeaseState(t *testing.T) {
	renewed := func(d time.Duration) coordinationv1.Lease {
		return coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr(int32(40)), RenewTime: microAgo(d)}}
	}
	tests := []struct {
		name  string
		lease coordinationv1.Lease
		want  string
	}{
		{"just renewed", renewed(0), string(leases.Fresh)},
		{"renewed by a clock ahead of ours", renewed(-3 * time.Second), string(leases.Fresh)},
		{"one renewal missed", renewed(20 * time.Second), string(leases.Fresh)},
		{"two renewals missed", renewed(20*time.Second + time.Millisecond), string(leases.Late)},
		{"at the deadline", renewed(40 * time.Second), string(leases.Late)},
		{"past the deadline", renewed(40*time.Second + time.Millisecond), string(leases.Expired)},
		{"never renewed", coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr(int32(40))}}, string(leases.Unknown)},
		{"no duration", coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: microAgo(0)}}, string(leases.Unknown)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := leaseState(&tt.lease, testNow); got != tt.want {
				t.Errorf("leaseState = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAge(t *testing.T) {
	tests := []struct {
		t    time.Time
		want string
	}{
		{testNow.Add(-3 * time.Second), "3s"},
		{testNow.Add(-150 * time.Second), "2m30s"},
		{testNow.Add(-26 * time.Hour), "26h"},
		{testNow.Add(10 * time.Second), "0s"}, // ahead of our clock
		{time.Time{}, "<unknown>"},
	}
	for _, tt := range tests {
		if got := age(testNow, tt.t); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.t, got, tt.want)
		}
	}
}
