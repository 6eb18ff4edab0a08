package registry

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// TestRegistryFlappingClock renews 1,000 times with an agent clock that
// jumps 10 s ahead and back at every renewal (before: one ClockSkewed
// event per flap, 506 events for 1,000 renewals). ClockSynced goes False
// once and stays so; it comes back only after the clock has been good for
// clockSyncedHold.
func TestRegistryFlappingClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	before := f.reg.stats.eventsRecorded.Load()
	transitions, skewChanges := 0, 0
	last, shown := metav1.ConditionStatus(""), ""

	for i := range 1000 {
		skew := time.Duration(0)
		if i%2 == 1 {
			skew = 10 * time.Second
		}
		if _, err := f.reg.Renew("edge-1", "agent", clk.Now().Add(skew)); err != nil {
			t.Fatal(err)
		}
		c := f.cluster("edge-1")
		if s := clockSynced(c); s != last {
			transitions, last = transitions+1, s
		}
		if c.Status.Agent.ClockSkew != shown {
			skewChanges, shown = skewChanges+1, c.Status.Agent.ClockSkew
		}
		clk.Step(100 * time.Millisecond)
	}
	events := f.reg.stats.eventsRecorded.Load() - before
	if transitions != 2 || last != metav1.ConditionFalse { // True at the first renewal, False at the second
		t.Errorf("ClockSynced changed %d times, ends %s; want 2 changes, ending False", transitions, last)
	}
	// 100 s of flapping: the transitions, then once a minute.
	if skewChanges > 4 {
		t.Errorf("status.agent.clockSkew changed %d times, want at most 4 (a Cluster write each)", skewChanges)
	}
	if events > 3 { // Ready, ClockSkewed (and nothing per flap)
		t.Errorf("%d events recorded for 1,000 flapping renewals, want at most 3", events)
	}
	for range 60 {
		f.renew("edge-1")
		clk.Step(time.Second)
	}
	f.renew("edge-1")
	if s := clockSynced(f.cluster("edge-1")); s != metav1.ConditionTrue {
		t.Errorf("ClockSynced = %s after a minute of good renewals, want True", s)
	}
}

func clockSynced(c *v1alpha1.Cluster) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionClockSynced); cond != nil {
		return cond.Status
	}
	return ""
}

// TestRegistryBoundsEventsPerReason records many events of one reason and
// of another: each reason gets its burst, then one per eventInterval.
func TestRegistryBoundsEventsPerReason(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	tests := []struct {
		name    string
		record  int
		advance time.Duration
		want    int64
	}{
		{"a burst", 100, 0, eventBurst},
		{"one more interval later", 100, eventInterval, 1},
		{"nothing within the interval", 100, eventInterval / 2, 0},
	}
	for _, tt := range tests {
		clk.Step(tt.advance)
		before := f.reg.stats.eventsRecorded.Load()
		for range tt.record {
			f.reg.SessionReplaced("edge-1", "192.0.2.1:1", "192.0.2.2:2")
		}
		if got := f.reg.stats.eventsRecorded.Load() - before; got != tt.want {
			t.Errorf("%s: %d events recorded, want %d", tt.name, got, tt.want)
		}
	}
	if got := f.reg.stats.eventsSuppressed.Load(); got != 300-eventBurst-1 {
		t.Errorf("suppressed = %d, want %d", got, 300-eventBurst-1)
	}
	// Another reason has its own bound.
	before := f.reg.stats.eventsRecorded.Load()
	f.renew("edge-1")
	f.reg.Disconnect("edge-1", "session-edge-1", "test")
	if f.reg.stats.eventsRecorded.Load() == before {
		t.Error("an event of another reason was suppressed")
	}
}
