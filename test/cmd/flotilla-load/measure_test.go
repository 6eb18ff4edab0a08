package main

import (
	"testing"
	"time"
)

func TestNotRenewedFor(t *testing.T) {
	tests := []struct {
		message string
		want    time.Duration
		ok      bool
	}{
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
