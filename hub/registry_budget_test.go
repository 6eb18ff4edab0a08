package hub

import (
	"testing"
	"time"
)

func TestLeaseBudgetLeavesRoomForClusterWrites(t *testing.T) {
	tests := []struct {
		name          string
		perSecond     float64
		interval      time.Duration
		clusterWrites int64
		want          int
	}{
		{"no limit", 0, 10 * time.Second, 500, 0},
		{"no cluster writes: the whole rate", 100, 10 * time.Second, 0, 1000},
		{"cluster writes take their share", 100, 10 * time.Second, 160, 840},
		{"leases keep a tenth", 100, 10 * time.Second, 5000, 100},
		{"at least one lease", 0.01, time.Second, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Registry{cfg: RegistryConfig{LeaseWritesPerSecond: tt.perSecond, LeaseFlushInterval: tt.interval}}
			r.clusterWrites.Store(tt.clusterWrites)
			if got := r.leaseBudget(); got != tt.want {
				t.Errorf("leaseBudget() = %d, want %d", got, tt.want)
			}
			if tt.perSecond > 0 && r.clusterWrites.Load() != 0 {
				t.Errorf("cluster writes not reset by the lease flush: %d", r.clusterWrites.Load())
			}
		})
	}
}
