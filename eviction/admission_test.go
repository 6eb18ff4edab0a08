package eviction

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAdmitChanges(t *testing.T) {
	z := NewZones(DefaultZoneConfig())
	z.Observe(zoneOf("eu", 5, 2), t0)
	never := time.Time{}
	checkAdmit(t, z,
		admitStep{"eu", "a", never, t0, true, never},
		admitStep{"eu", "b", never, t0, false, at(10 * time.Second)},
		admitStep{"eu", "c", at(time.Second), t0, false, at(20 * time.Second)})
	if diff := cmp.Diff(map[string]int{"eu": 2}, z.Waiting()); diff != "" {
		t.Errorf("Waiting (-want +got):\n%s", diff)
	}
	// b recovers: it leaves the queue, and c moves up.
	z.Forget("b", at(time.Second))
	checkAdmit(t, z, admitStep{"eu", "c", at(time.Second), at(time.Second), false, at(10 * time.Second)})
	// a recovers, then fails again: it queues behind c.
	z.Forget("a", at(2*time.Second))
	checkAdmit(t, z,
		admitStep{"eu", "a", at(3 * time.Second), at(3 * time.Second), false, at(20 * time.Second)},
		admitStep{"eu", "a", at(3 * time.Second), at(10 * time.Second), false, at(20 * time.Second)}, // c was admitted
		admitStep{"eu", "a", at(3 * time.Second), at(20 * time.Second), true, never})
	want := []AdmissionChange{
		{Cluster: "a", Zone: "eu", Admitted: true, At: t0, Waiting: 0},
		{Cluster: "a", Zone: "eu", At: at(2 * time.Second)},
		{Cluster: "c", Zone: "eu", Admitted: true, At: at(10 * time.Second), Waiting: 1},
		{Cluster: "a", Zone: "eu", Admitted: true, At: at(20 * time.Second), Waiting: 0},
	}
	if diff := cmp.Diff(want, z.TakeChanges()); diff != "" {
		t.Errorf("TakeChanges (-want +got):\n%s", diff)
	}
	if got := z.TakeChanges(); got != nil {
		t.Errorf("TakeChanges again = %v, want none", got)
	}
	if diff := cmp.Diff(map[string]int{}, z.Waiting()); diff != "" {
		t.Errorf("Waiting (-want +got):\n%s", diff)
	}
}

// TestAdmitRestore: a hub that restarts (or a new leader) restores the
// recorded admissions: those clusters go on at once, and the zone's bucket
// counts from the latest of them, so a restart hands out no extra token.
func TestAdmitRestore(t *testing.T) {
	never := time.Time{}
	before := NewZones(DefaultZoneConfig())
	before.Observe(zoneOf("eu", 5, 2), t0)
	checkAdmit(t, before, admitStep{"eu", "a", never, t0, true, never})
	checkAdmit(t, before, admitStep{"eu", "b", never, at(10 * time.Second), true, never})

	after := NewZones(DefaultZoneConfig())
	after.Observe(zoneOf("eu", 5, 2), at(12*time.Second))
	for _, c := range before.TakeChanges() {
		after.Restore(c.Cluster, c.Zone, c.At)
	}
	checkAdmit(t, after,
		admitStep{"eu", "a", never, at(12 * time.Second), true, never},
		admitStep{"eu", "b", never, at(12 * time.Second), true, never},
		admitStep{"eu", "c", never, at(12 * time.Second), false, at(20 * time.Second)},
		admitStep{"eu", "c", never, at(20 * time.Second), true, never})
	if got, ok := after.Admitted("a"); !ok || !got.At.Equal(t0) {
		t.Errorf("Admitted(a) = %v, %v; want at %v", got, ok, t0)
	}
}

// TestAdmitProperties drives Zones with random fleets, failures,
// recoveries and calls, and checks the guarantees at every step: no zone
// admits more than 1 + rate × t clusters in any window of t, Isolated lets
// no binding go, a binding goes only from an admitted cluster, and with a
// ceiling no zone lets more than 1 + ceiling × t bindings go.
func TestAdmitProperties(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			cfg := DefaultZoneConfig()
			cfg.LargeZoneThreshold = 4
			if seed%2 == 1 {
				cfg.BindingRate = 3
			}
			checkAdmitProperties(t, rng, cfg)
		})
	}
}

func checkAdmitProperties(t *testing.T, rng *rand.Rand, cfg ZoneConfig) {
	t.Helper()
	z := NewZones(cfg)
	zones := []string{"eu", "us"}
	admittedAt := map[string][]time.Time{} // by zone
	boundAt := map[string][]time.Time{}    // bindings let go, by zone
	failedAt := map[string]time.Time{}     // by cluster, while it is down
	now := t0
	for step := range 3000 {
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		if step%50 == 0 { // the fleet changes
			var fleet []ClusterHealth
			for _, zone := range zones {
				fleet = append(fleet, zoneOf(zone, 6, rng.IntN(7))...)
			}
			z.Observe(fleet, now)
		}
		zone := zones[rng.IntN(len(zones))]
		cluster := fmt.Sprintf("%s-%d", zone, rng.IntN(6))
		if rng.IntN(20) == 0 {
			z.Forget(cluster, now)
			delete(failedAt, cluster)
			continue
		}
		if _, ok := failedAt[cluster]; !ok {
			failedAt[cluster] = now
		}
		isolated := z.Modes()[zone] == ModeIsolated
		ok, _ := z.Admit(zone, cluster, failedAt[cluster], now)
		_, admitted := z.Admitted(cluster)
		switch {
		case ok && isolated:
			t.Fatalf("step %d: Isolated, and a binding of %s went", step, cluster)
		case ok && !admitted:
			t.Fatalf("step %d: a binding of %s went, not admitted", step, cluster)
		case ok:
			boundAt[zone] = append(boundAt[zone], now)
		}
		for _, c := range z.TakeChanges() {
			if c.Admitted {
				if isolated {
					t.Fatalf("step %d: Isolated, and %s was admitted", step, c.Cluster)
				}
				admittedAt[c.Zone] = append(admittedAt[c.Zone], c.At)
			}
		}
	}
	for _, zone := range zones {
		// The highest rate a zone can have: ClusterRate (the secondary
		// one is lower).
		checkAtMost(t, "clusters admitted in "+zone, admittedAt[zone], cfg.ClusterRate)
		if cfg.BindingRate > 0 {
			checkAtMost(t, "bindings let go in "+zone, boundAt[zone], cfg.BindingRate)
		}
	}
	if len(admittedAt["eu"])+len(admittedAt["us"]) == 0 {
		t.Fatal("no cluster was ever admitted: the test tests nothing")
	}
}

// checkAtMost checks that no window [times[i], times[j]] holds more than
// 1 + rate × its length events (a bucket of burst 1).
func checkAtMost(t *testing.T, what string, times []time.Time, rate float64) {
	t.Helper()
	for i := range times {
		for j := i; j < len(times); j++ {
			n, limit := float64(j-i+1), 1+rate*times[j].Sub(times[i]).Seconds()
			if n > limit+1e-9 {
				t.Fatalf("%s: %v events between %v and %v, more than %v", what, n, times[i], times[j], limit)
			}
		}
	}
}
