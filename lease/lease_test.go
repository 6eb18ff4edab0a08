package lease

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestDeadlinesOrderAndMoves(t *testing.T) {
	d := NewDeadlines()
	d.Set("b", t0.Add(2*time.Second))
	d.Set("a", t0.Add(3*time.Second))
	d.Set("c", t0.Add(1*time.Second))
	d.Set("c", t0.Add(5*time.Second)) // a renewal moves c back
	d.Remove("missing")
	if next, _ := d.Next(); !next.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("Next = %v, want t0+2s", next)
	}
	if diff := cmp.Diff([]string(nil), d.PopDue(t0.Add(time.Second))); diff != "" {
		t.Errorf("nothing due yet (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b", "a"}, d.PopDue(t0.Add(3*time.Second))); diff != "" {
		t.Errorf("due at t0+3s (-want +got):\n%s", diff)
	}
	d.Remove("c")
	if _, ok := d.Next(); ok || d.Len() != 0 {
		t.Errorf("after removing the last deadline: Len = %d", d.Len())
	}
}

func TestDeadlinesMatchSortedOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := NewDeadlines()
	want := map[string]time.Time{}
	for i := range 2000 {
		name := fmt.Sprintf("c%d", rng.IntN(500))
		if i%7 == 0 {
			d.Remove(name)
			delete(want, name)
			continue
		}
		at := t0.Add(time.Duration(rng.IntN(100000)) * time.Millisecond)
		d.Set(name, at)
		want[name] = at
	}
	var names []string
	for name := range want {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if want[names[i]].Equal(want[names[j]]) {
			return names[i] < names[j]
		}
		return want[names[i]].Before(want[names[j]])
	})
	if diff := cmp.Diff(names, d.PopDue(t0.Add(time.Hour))); diff != "" {
		t.Errorf("pop order (-want +got):\n%s", diff)
	}
}

func TestRenewAndFreshness(t *testing.T) {
	l := New("edge-1", "agent-a", 40*time.Second, t0)
	tests := []struct {
		at   time.Duration
		want State
	}{
		{0, Fresh}, {20 * time.Second, Fresh}, {21 * time.Second, Late}, {40 * time.Second, Late}, {41 * time.Second, Expired},
	}
	for _, tt := range tests {
		if got := Freshness(l, t0.Add(tt.at)); got != tt.want {
			t.Errorf("freshness at +%v = %s, want %s", tt.at, got, tt.want)
		}
	}
	Renew(l, "agent-a", 40*time.Second, t0.Add(10*time.Second))
	if !l.Spec.RenewTime.Time.Equal(t0.Add(10*time.Second)) || ptr.Deref(l.Spec.LeaseTransitions, -1) != 0 {
		t.Errorf("same holder: renew %v transitions %d", l.Spec.RenewTime, ptr.Deref(l.Spec.LeaseTransitions, -1))
	}
	Renew(l, "agent-b", 20*time.Second, t0.Add(20*time.Second))
	if ptr.Deref(l.Spec.LeaseTransitions, -1) != 1 || !l.Spec.AcquireTime.Time.Equal(t0.Add(20*time.Second)) || *l.Spec.LeaseDurationSeconds != 20 {
		t.Errorf("new holder: %+v", l.Spec)
	}
	if got := Freshness(nil, t0); got != Unknown {
		t.Errorf("nil lease freshness = %s", got)
	}
}

func BenchmarkDeadlinesRenew(b *testing.B) {
	const clusters = 5000
	d := NewDeadlines()
	for i := range clusters {
		d.Set(fmt.Sprintf("c%d", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	b.ResetTimer()
	for i := range b.N {
		d.Set(fmt.Sprintf("c%d", i%clusters), t0.Add(time.Duration(clusters+i)*time.Millisecond))
	}
}

func TestRenewedWithin(t *testing.T) {
	var never time.Time
	tests := []struct {
		name                      string
		lastRenewal, sessionStart time.Time
		duration                  time.Duration
		want                      bool
	}{
		{name: "renewed within half the lease", lastRenewal: t0.Add(-20 * time.Second), duration: 40 * time.Second, want: true},
		{name: "renewed longer ago", lastRenewal: t0.Add(-21 * time.Second), duration: 40 * time.Second},
		{name: "a session that just began", lastRenewal: t0.Add(-time.Hour), sessionStart: t0.Add(-time.Second), duration: 40 * time.Second, want: true},
		{name: "never renewed, no session", lastRenewal: never, duration: 40 * time.Second},
		{name: "no lease yet: the default", lastRenewal: t0.Add(-9 * time.Second), want: true},
		{name: "no lease yet: beyond half the default", lastRenewal: t0.Add(-11 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RenewedWithin(tt.lastRenewal, tt.sessionStart, tt.duration, 20*time.Second, t0); got != tt.want {
				t.Errorf("RenewedWithin = %v, want %v", got, tt.want)
			}
		})
	}
}
