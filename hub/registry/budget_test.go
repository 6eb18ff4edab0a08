package registry

import (
	"context"
	"sync"
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
			r := &Registry{cfg: Config{LeaseWritesPerSecond: tt.perSecond, LeaseFlushInterval: tt.interval}}
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

// TestInParallelStopsAtTheDeadline: once the flush's context ends no write
// starts, and every item is either written or handed back, once. Writers
// handed an item after item 20 wait for the context to end before they
// write it, so however the scheduler runs the goroutines, those are exactly
// the items taken before the end was seen.
func TestInParallelStopsAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	items := make([]int, 100)
	for i := range items {
		items[i] = i
	}
	var mu sync.Mutex
	seen := map[int]string{}
	mark := func(i int, how string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := seen[i]; ok {
			t.Errorf("item %d %s after it was %s", i, how, prev)
		}
		seen[i] = how
	}
	writtenAfterCancel := 0
	inParallel(ctx, items, func(i int) {
		switch {
		case i == 20:
			cancel()
		case i > 20:
			<-ctx.Done()
			mu.Lock()
			writtenAfterCancel++
			mu.Unlock()
		}
		mark(i, "written")
	}, func(i int) { mark(i, "skipped") })
	if len(seen) != len(items) {
		t.Errorf("%d of %d items written or skipped", len(seen), len(items))
	}
	for i := 0; i <= 20; i++ {
		if seen[i] != "written" {
			t.Errorf("item %d before the end was %q, want written", i, seen[i])
		}
	}
	// Each writer may hold one item when the context ends, and the feeder may
	// hand over one more in the select that races the end.
	if writtenAfterCancel > apiWriters {
		t.Errorf("%d written after the context ended, want at most %d", writtenAfterCancel, apiWriters)
	}
}
