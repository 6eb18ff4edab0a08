package main

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/health"
)

func TestNotRenewedFor(t *testing.T) {
	tests := []struct {
		message string
		want    time.Duration
		ok      bool
	}{
		{"Ready True → Unknown: cluster lease not renewed for 40.012s (grace period 40s)", 40012 * time.Millisecond, true},
		{"cluster lease not renewed for 40.012s (grace period 40s)", 40012 * time.Millisecond, true},
		{"cluster lease not renewed for 1m0.5s (grace period 1m0s)", 60500 * time.Millisecond, true},
		{"cluster lease not renewed for 40.012s", 40012 * time.Millisecond, true},
		{"cluster agent has not renewed its lease within the startup grace period (1m20s)", 0, false},
		{"cluster lease not renewed for soon (grace period 40s)", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := notRenewedFor(tt.message)
		if got != tt.want || ok != tt.ok {
			t.Errorf("notRenewedFor(%q) = %v, %v; want %v, %v", tt.message, got, ok, tt.want, tt.ok)
		}
	}
}

// TestNotRenewedForReadsTheHubsMessage: the hub's own LeaseExpired message
// parses to the silence it judged by, so a change of its wording breaks
// this test rather than the tool's figures.
func TestNotRenewedForReadsTheHubsMessage(t *testing.T) {
	started := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cfg := health.DefaultConfig(started)
	renewed := started.Add(10 * time.Minute)
	now := renewed.Add(cfg.GracePeriod + 12*time.Millisecond)
	obs := health.Observations{Registered: started, LastRenewal: renewed}
	state, _ := health.Evaluate(cfg, obs, health.State{Ready: metav1.ConditionTrue}, now)
	if state.Reason != v1alpha1.ReasonLeaseExpired {
		t.Fatalf("the hub decided %s (%q), want %s", state.Reason, state.Message, v1alpha1.ReasonLeaseExpired)
	}
	got, ok := notRenewedFor("Ready True → Unknown: " + state.Message)
	if want := cfg.GracePeriod + 12*time.Millisecond; !ok || got != want {
		t.Errorf("notRenewedFor(%q) = %v, %v; want %v", state.Message, got, ok, want)
	}
}
