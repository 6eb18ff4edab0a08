package eviction

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// zoneOf returns n clusters of zone, the first down of them not Ready.
func zoneOf(zone string, n, down int) []ClusterHealth {
	out := make([]ClusterHealth, n)
	for i := range out {
		out[i] = ClusterHealth{Name: fmt.Sprintf("%s-%d", zone, i), Zone: zone, Ready: i >= down}
	}
	return out
}

func fleetOf(zones ...[]ClusterHealth) []ClusterHealth {
	var out []ClusterHealth
	for _, z := range zones {
		out = append(out, z...)
	}
	return out
}

// zoneConfig is DefaultZoneConfig changed by edit.
func zoneConfig(edit func(*ZoneConfig)) ZoneConfig {
	cfg := DefaultZoneConfig()
	edit(&cfg)
	return cfg
}

func TestZonesModes(t *testing.T) {
	tests := []struct {
		name     string
		clusters []ClusterHealth
		want     map[string]Mode
	}{
		{"no clusters", nil, map[string]Mode{}},
		{"all ready", zoneOf("eu", 3, 0), map[string]Mode{"eu": ModeNormal}},
		{"1 of 3 down", zoneOf("eu", 3, 1), map[string]Mode{"eu": ModeNormal}},
		{"2 of 3 down: not more than 2", zoneOf("eu", 3, 2), map[string]Mode{"eu": ModeNormal}},
		{"3 of 5 down: partial", zoneOf("eu", 5, 3), map[string]Mode{"eu": ModePartialDisruption}},
		{"3 of 6 down: under 55%", zoneOf("eu", 6, 3), map[string]Mode{"eu": ModeNormal}},
		{"11 of 20 down: exactly 55%", zoneOf("eu", 20, 11), map[string]Mode{"eu": ModePartialDisruption}},
		{"10 of 20 down: under 55%", zoneOf("eu", 20, 10), map[string]Mode{"eu": ModeNormal}},
		{"one zone all down, another fine", fleetOf(zoneOf("eu", 3, 3), zoneOf("us", 2, 0)),
			map[string]Mode{"eu": ModeFullDisruption, "us": ModeNormal}},
		{"a single cluster down in its own zone", fleetOf(zoneOf("eu", 1, 1), zoneOf("us", 1, 0)),
			map[string]Mode{"eu": ModeFullDisruption, "us": ModeNormal}},
		{"every zone all down: isolated", fleetOf(zoneOf("eu", 3, 3), zoneOf("us", 2, 2)),
			map[string]Mode{"eu": ModeIsolated, "us": ModeIsolated}},
		{"one zone, all down: isolated", zoneOf("eu", 4, 4), map[string]Mode{"eu": ModeIsolated}},
		{"the empty zone is a zone", fleetOf(zoneOf("", 1, 1), zoneOf("us", 1, 0)),
			map[string]Mode{"": ModeFullDisruption, "us": ModeNormal}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := NewZones(DefaultZoneConfig())
			z.Observe(tt.clusters, t0)
			if diff := cmp.Diff(tt.want, z.Modes()); diff != "" {
				t.Errorf("Modes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestZonesCustomThreshold(t *testing.T) {
	z := NewZones(zoneConfig(func(c *ZoneConfig) { c.UnhealthyThreshold = 0.3 }))
	z.Observe(zoneOf("eu", 10, 3), t0)
	if diff := cmp.Diff(map[string]Mode{"eu": ModePartialDisruption}, z.Modes()); diff != "" {
		t.Errorf("Modes (-want +got):\n%s", diff)
	}
}

func TestZonesChanges(t *testing.T) {
	z := NewZones(DefaultZoneConfig())
	steps := []struct {
		name     string
		clusters []ClusterHealth
		want     []ModeChange
	}{
		{"first sight", fleetOf(zoneOf("us", 5, 0), zoneOf("eu", 3, 0)), []ModeChange{
			{Zone: "eu", To: ModeNormal, Total: 3},
			{Zone: "us", To: ModeNormal, Total: 5},
		}},
		{"same again: nothing", fleetOf(zoneOf("us", 5, 0), zoneOf("eu", 3, 0)), nil},
		{"counts change, mode does not: nothing", fleetOf(zoneOf("us", 5, 2), zoneOf("eu", 3, 1)), nil},
		{"us partial, eu full", fleetOf(zoneOf("us", 5, 3), zoneOf("eu", 3, 3)), []ModeChange{
			{Zone: "eu", From: ModeNormal, To: ModeFullDisruption, NotReady: 3, Total: 3},
			{Zone: "us", From: ModeNormal, To: ModePartialDisruption, NotReady: 3, Total: 5},
		}},
		{"reported once", fleetOf(zoneOf("us", 5, 3), zoneOf("eu", 3, 3)), nil},
		{"all down: isolated", fleetOf(zoneOf("us", 5, 5), zoneOf("eu", 3, 3)), []ModeChange{
			{Zone: "eu", From: ModeFullDisruption, To: ModeIsolated, NotReady: 3, Total: 3},
			{Zone: "us", From: ModePartialDisruption, To: ModeIsolated, NotReady: 5, Total: 5},
		}},
		{"eu gone, a new zone ap", fleetOf(zoneOf("us", 5, 0), zoneOf("ap", 1, 0)), []ModeChange{
			{Zone: "ap", To: ModeNormal, Total: 1},
			{Zone: "eu", From: ModeIsolated},
			{Zone: "us", From: ModeIsolated, To: ModeNormal, Total: 5},
		}},
		{"no clusters at all", nil, []ModeChange{
			{Zone: "ap", From: ModeNormal},
			{Zone: "us", From: ModeNormal},
		}},
	}
	for i, s := range steps {
		got := z.Observe(s.clusters, at(time.Duration(i)*time.Minute))
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Fatalf("step %q: Observe (-want +got):\n%s", s.name, diff)
		}
	}
}

// admitStep is a call of Admit and what it should return. A zero
// failedAt is t0.
type admitStep struct {
	zone, cluster string
	failedAt, now time.Time
	wantOK        bool
	wantRetry     time.Time
}

func checkAdmit(t *testing.T, z *Zones, steps ...admitStep) {
	t.Helper()
	for i, s := range steps {
		failedAt := s.failedAt
		if failedAt.IsZero() {
			failedAt = t0
		}
		ok, retry := z.Admit(s.zone, s.cluster, failedAt, s.now)
		if ok != s.wantOK || !retry.Equal(s.wantRetry) {
			t.Errorf("step %d: Admit(%q, %q, %v, %v) = %v, %v; want %v, %v", i, s.zone, s.cluster, failedAt, s.now, ok, retry, s.wantOK, s.wantRetry)
		}
	}
}

func TestZonesAdmit(t *testing.T) {
	never := time.Time{}
	tests := []struct {
		name     string
		cfg      ZoneConfig // DefaultZoneConfig() if zero
		clusters []ClusterHealth
		steps    []admitStep
	}{
		{"normal zone: a cluster every 10 s, its bindings at once", ZoneConfig{}, zoneOf("eu", 3, 1), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "a", never, t0, true, never}, // admitted: every binding goes
			{"eu", "b", never, t0, false, at(10 * time.Second)},
			{"eu", "b", never, at(time.Second), false, at(10 * time.Second)},
			{"eu", "b", never, at(10 * time.Second), true, never},
			{"eu", "a", never, at(10 * time.Second), true, never},
			{"eu", "c", never, at(30 * time.Second), true, never}, // burst 1: no saving up
			{"eu", "d", never, at(30 * time.Second), false, at(40 * time.Second)},
		}},
		{"waiting clusters go in the order they failed, then by name", ZoneConfig{}, zoneOf("eu", 5, 1), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "late", at(2 * time.Second), at(time.Second), false, at(10 * time.Second)},
			{"eu", "early", at(time.Second), at(time.Second), false, at(10 * time.Second)},
			{"eu", "late", at(2 * time.Second), at(time.Second), false, at(20 * time.Second)},
			{"eu", "tie", at(time.Second), at(time.Second), false, at(20 * time.Second)},
			{"eu", "late", at(2 * time.Second), at(10 * time.Second), false, at(30 * time.Second)}, // "early" took the token
			{"eu", "early", at(time.Second), at(10 * time.Second), true, never},
		}},
		{"custom rate", zoneConfig(func(c *ZoneConfig) { c.ClusterRate = 4 }), zoneOf("eu", 3, 1), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "b", never, t0, false, at(250 * time.Millisecond)},
			{"eu", "b", never, at(250 * time.Millisecond), true, never},
		}},
		{"a ceiling on bindings", zoneConfig(func(c *ZoneConfig) { c.BindingRate = 2 }), zoneOf("eu", 3, 1), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "a", never, t0, false, at(500 * time.Millisecond)},
			{"eu", "a", never, at(500 * time.Millisecond), true, never},
			{"eu", "b", never, at(10 * time.Second), true, never}, // admitted, and a binding token
			{"eu", "b", never, at(10 * time.Second), false, at(10*time.Second + 500*time.Millisecond)},
		}},
		{"full disruption next to a fine zone keeps the rate", ZoneConfig{},
			fleetOf(zoneOf("eu", 3, 3), zoneOf("us", 2, 0)), []admitStep{
				{"eu", "a", never, t0, true, never},
				{"eu", "b", never, t0, false, at(10 * time.Second)},
				{"us", "c", never, t0, true, never}, // one bucket per zone
			}},
		{"isolated never admits", ZoneConfig{}, fleetOf(zoneOf("eu", 3, 3), zoneOf("us", 2, 2)), []admitStep{
			{"eu", "a", never, t0, false, never},
			{"us", "b", never, at(time.Hour), false, never},
			{"unknown", "c", never, t0, false, never},
		}},
		{"small partial zone: 0, even for the first", ZoneConfig{}, zoneOf("eu", 5, 3), []admitStep{
			{"eu", "a", never, t0, false, never},
			{"eu", "a", never, at(time.Hour), false, never},
		}},
		{"large partial zone: secondary rate", ZoneConfig{}, zoneOf("eu", 60, 40), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "b", never, at(time.Second), false, at(100 * time.Second)},
			{"eu", "a", never, at(time.Second), true, never},
			{"eu", "b", never, at(100 * time.Second), true, never},
		}},
		{"custom large zone threshold and secondary rate", zoneConfig(func(c *ZoneConfig) { c.LargeZoneThreshold, c.SecondaryClusterRate = 4, 0.1 }), zoneOf("eu", 5, 3), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "b", never, t0, false, at(10 * time.Second)},
		}},
		{"a rate too slow for a Duration waits the longest Duration", zoneConfig(func(c *ZoneConfig) { c.ClusterRate = 1e-12 }), zoneOf("eu", 1, 0), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "b", never, t0, false, t0.Add(time.Duration(math.MaxInt64))},
		}},
		{"unknown zone at ClusterRate", ZoneConfig{}, zoneOf("eu", 3, 0), []admitStep{
			{"new", "a", never, t0, true, never},
			{"new", "b", never, t0, false, at(10 * time.Second)},
			{"other", "c", never, t0, true, never},
		}},
		// A zero rate halts evictions in the modes that use it (as in
		// Kubernetes); it does not mean the default.
		{"rate 0: normal zone evicts nothing", zoneConfig(func(c *ZoneConfig) { c.ClusterRate = 0 }), zoneOf("eu", 3, 1), []admitStep{
			{"eu", "a", never, t0, false, never},
			{"eu", "a", never, at(time.Hour), false, never},
		}},
		{"rate 0: full disruption evicts nothing", zoneConfig(func(c *ZoneConfig) { c.ClusterRate = 0 }),
			fleetOf(zoneOf("eu", 3, 3), zoneOf("us", 2, 0)), []admitStep{
				{"eu", "a", never, t0, false, never},
				{"us", "b", never, at(time.Hour), false, never},
			}},
		{"rate 0: unknown zone evicts nothing", zoneConfig(func(c *ZoneConfig) { c.ClusterRate = 0 }), zoneOf("eu", 3, 0), []admitStep{
			{"new", "a", never, t0, false, never},
		}},
		{"rate 0: a large partial zone keeps the secondary rate", zoneConfig(func(c *ZoneConfig) { c.ClusterRate = 0 }), zoneOf("eu", 60, 40), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "b", never, at(time.Second), false, at(100 * time.Second)},
		}},
		{"secondary rate 0: a large partial zone evicts nothing", zoneConfig(func(c *ZoneConfig) { c.SecondaryClusterRate = 0 }), zoneOf("eu", 60, 40), []admitStep{
			{"eu", "a", never, t0, false, never},
			{"eu", "a", never, at(time.Hour), false, never},
		}},
		{"secondary rate 0: a normal zone keeps the rate", zoneConfig(func(c *ZoneConfig) { c.SecondaryClusterRate = 0 }), zoneOf("eu", 60, 1), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "b", never, t0, false, at(10 * time.Second)},
		}},
		{"large zone threshold 0: every partial zone is large", zoneConfig(func(c *ZoneConfig) { c.LargeZoneThreshold = 0 }), zoneOf("eu", 5, 3), []admitStep{
			{"eu", "a", never, t0, true, never},
			{"eu", "b", never, at(time.Second), false, at(100 * time.Second)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg == (ZoneConfig{}) {
				cfg = DefaultZoneConfig()
			}
			z := NewZones(cfg)
			z.Observe(tt.clusters, t0)
			checkAdmit(t, z, tt.steps...)
		})
	}
}

func TestZonesRateChangeKeepsTokens(t *testing.T) {
	z := NewZones(DefaultZoneConfig())
	z.Observe(zoneOf("eu", 60, 0), t0)
	checkAdmit(t, z, admitStep{"eu", "a", time.Time{}, t0, true, time.Time{}})
	// A tenth of a token earned at 0.1/s; the rest comes at 0.01/s: 90 s more.
	z.Observe(zoneOf("eu", 60, 40), at(time.Second))
	checkAdmit(t, z,
		admitStep{"eu", "b", time.Time{}, at(time.Second), false, at(91 * time.Second)},
		admitStep{"eu", "b", time.Time{}, at(91 * time.Second), true, time.Time{}})
}

func TestZonesLimitFollowsSizeWithinMode(t *testing.T) {
	z := NewZones(zoneConfig(func(c *ZoneConfig) { c.LargeZoneThreshold = 5 }))
	z.Observe(zoneOf("eu", 5, 3), t0)
	checkAdmit(t, z, admitStep{"eu", "a", time.Time{}, t0, false, time.Time{}})
	if got := z.Observe(zoneOf("eu", 6, 4), at(time.Second)); got != nil {
		t.Errorf("Observe = %v, want no change", got)
	}
	checkAdmit(t, z, admitStep{"eu", "a", time.Time{}, at(time.Second), true, time.Time{}})
}

func TestZonesUnknownZoneObservedLater(t *testing.T) {
	z := NewZones(DefaultZoneConfig())
	checkAdmit(t, z, admitStep{"eu", "a", time.Time{}, t0, true, time.Time{}})
	if diff := cmp.Diff(map[string]Mode{}, z.Modes()); diff != "" {
		t.Errorf("Modes before Observe (-want +got):\n%s", diff)
	}
	got := z.Observe(zoneOf("eu", 2, 0), t0)
	if diff := cmp.Diff([]ModeChange{{Zone: "eu", To: ModeNormal, Total: 2}}, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
	// The token taken before the zone was observed stays taken.
	checkAdmit(t, z, admitStep{"eu", "b", time.Time{}, at(time.Second), false, at(10 * time.Second)})
}

func TestZonesIsolationAndRecovery(t *testing.T) {
	z := NewZones(DefaultZoneConfig())
	down := fleetOf(zoneOf("eu", 3, 3), zoneOf("us", 2, 2))
	z.Observe(fleetOf(zoneOf("eu", 3, 0), zoneOf("us", 2, 0)), t0)
	checkAdmit(t, z, admitStep{"us", "us-0", time.Time{}, t0, true, time.Time{}})
	z.TakeChanges()
	z.Observe(down, at(time.Minute))
	z.Observe(down, at(2*time.Minute))
	if got := z.GraceStart(); !got.IsZero() {
		t.Fatalf("GraceStart while isolated = %v, want zero", got)
	}
	// Isolated: nothing goes, not even from a cluster admitted before.
	checkAdmit(t, z,
		admitStep{"eu", "eu-0", time.Time{}, at(2 * time.Minute), false, time.Time{}},
		admitStep{"us", "us-0", time.Time{}, at(2 * time.Minute), false, time.Time{}})

	recovered := at(5 * time.Minute)
	got := z.Observe(fleetOf(zoneOf("eu", 3, 3), zoneOf("us", 2, 1)), recovered)
	want := []ModeChange{
		{Zone: "eu", From: ModeIsolated, To: ModeFullDisruption, NotReady: 3, Total: 3},
		{Zone: "us", From: ModeIsolated, To: ModeNormal, NotReady: 1, Total: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
	if got := z.GraceStart(); !got.Equal(recovered) {
		t.Errorf("GraceStart = %v, want %v", got, recovered)
	}
	// Leaving isolation takes every admission back: the clusters still
	// down queue again.
	if diff := cmp.Diff([]AdmissionChange{{Cluster: "us-0", Zone: "us", At: recovered}}, z.TakeChanges()); diff != "" {
		t.Errorf("changes on leaving isolation (-want +got):\n%s", diff)
	}
	checkAdmit(t, z, admitStep{"eu", "eu-0", time.Time{}, recovered, true, time.Time{}})
	// Staying out of isolation does not move the grace start.
	z.Observe(fleetOf(zoneOf("eu", 3, 0), zoneOf("us", 2, 0)), at(time.Hour))
	if got := z.GraceStart(); !got.Equal(recovered) {
		t.Errorf("GraceStart after a later Observe = %v, want %v", got, recovered)
	}
}

func TestZonesModesIsACopy(t *testing.T) {
	z := NewZones(DefaultZoneConfig())
	z.Observe(zoneOf("eu", 1, 0), t0)
	z.Modes()["eu"] = ModeIsolated
	if got := z.Modes()["eu"]; got != ModeNormal {
		t.Errorf("Modes()[eu] = %q after writing to a copy, want Normal", got)
	}
}

func TestRestartGrace(t *testing.T) {
	z := NewZones(DefaultZoneConfig())
	z.RestartGrace(t0)
	if got := z.GraceStart(); !got.Equal(t0) {
		t.Errorf("GraceStart after RestartGrace(t0) = %v, want %v", got, t0)
	}
	z.RestartGrace(t0.Add(-time.Minute)) // never moves back
	if got := z.GraceStart(); !got.Equal(t0) {
		t.Errorf("GraceStart moved back to %v", got)
	}
}

// TestObserveCountsMatchesObserve feeds the same random fleets to two
// Zones, one listing every cluster and one given running counts (with
// emptied zones left at zero, as an incremental caller leaves them): the
// changes, modes and limits must be the same at every step.
func TestObserveCountsMatchesObserve(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	listed, counted := NewZones(DefaultZoneConfig()), NewZones(DefaultZoneConfig())
	counts := map[string]ZoneCount{}
	for step := range 2000 {
		var fleet []ClusterHealth
		for k := range counts {
			counts[k] = ZoneCount{} // kept, emptied
		}
		for _, zone := range []string{"", "eu", "us", "ap"} {
			if rng.IntN(4) == 0 {
				continue // this zone has no cluster now
			}
			n := 1 + rng.IntN(8)
			down := rng.IntN(n + 1)
			fleet = append(fleet, zoneOf(zone, n, down)...)
			counts[zone] = ZoneCount{Total: n, NotReady: down}
		}
		now := at(time.Duration(step) * time.Second)
		want, got := listed.Observe(fleet, now), counted.ObserveCounts(counts, now)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("step %d: changes (-Observe +ObserveCounts):\n%s", step, diff)
		}
		if diff := cmp.Diff(listed.Modes(), counted.Modes()); diff != "" {
			t.Fatalf("step %d: modes (-Observe +ObserveCounts):\n%s", step, diff)
		}
		for zone := range counts {
			cluster := fmt.Sprintf("%s-%d", zone, step)
			a, aRetry := listed.Admit(zone, cluster, now, now)
			b, bRetry := counted.Admit(zone, cluster, now, now)
			if a != b || !aRetry.Equal(bRetry) {
				t.Fatalf("step %d: Admit(%q) %v %v after Observe, %v %v after ObserveCounts", step, zone, a, aRetry, b, bRetry)
			}
			listed.Forget(cluster, now) // recovered: the queues stay short
			counted.Forget(cluster, now)
		}
	}
}
