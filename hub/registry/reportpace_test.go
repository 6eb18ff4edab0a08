package registry

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

// TestRegistryPacesReportWrites: ten changing reports at once write the
// Cluster reportWriteBurst times; the newest is stored once the pace
// allows, without another report.
func TestRegistryPacesReportWrites(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	f.flush()
	report := func(pods int) {
		t.Helper()
		s := &protocol.ClusterStatus{ObservedAt: clk.Now(), APIServerHealthy: true, NodesTotal: 1, NodesReady: 1,
			Allocatable: map[string]string{"pods": "110"}, Allocated: map[string]string{"pods": strconv.Itoa(pods)}}
		if err := f.reg.Status("edge-1", s); err != nil {
			t.Fatal(err)
		}
	}
	storedPods := func() string {
		c := f.stored("edge-1")
		if c.Status.ResourceSummary == nil {
			return ""
		}
		q := c.Status.ResourceSummary.Allocated[corev1.ResourcePods]
		return q.String()
	}
	// The first report sets APIServerHealthy and NodesReady: a change of
	// status, written at once, whatever the pace.
	report(0)
	f.flush()
	clk.Step(reportWriteInterval)
	writes, version := 0, f.stored("edge-1").ResourceVersion
	for pods := 1; pods <= 10; pods++ {
		report(pods)
		f.flush()
		if v := f.stored("edge-1").ResourceVersion; v != version {
			writes, version = writes+1, v
		}
	}
	if writes != reportWriteBurst || storedPods() != strconv.Itoa(reportWriteBurst) {
		t.Errorf("10 changing reports at once: %d writes, %s pods stored; want %d writes, the last of %d pods", writes, storedPods(), reportWriteBurst, reportWriteBurst)
	}
	if n := f.reg.Counters().ReportsCoalesced; n != 10-reportWriteBurst-1 {
		t.Errorf("%d reports coalesced, want %d", n, 10-reportWriteBurst-1)
	}
	if s := f.reg.Snapshot(); s.UnstoredClusters != 1 {
		t.Errorf("unstored clusters %d while a report waits for its pace, want 1", s.UnstoredClusters)
	}
	clk.Step(reportWriteInterval)
	f.flush()
	if got := storedPods(); got != "10" {
		t.Errorf("after %v: %s pods stored, want the newest report's 10", reportWriteInterval, got)
	}
}
