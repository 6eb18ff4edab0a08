package failover

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
)

// base is a whole second: the times tests stamp are offsets from it.
var base = time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)

func after(d time.Duration) time.Time { return base.Add(d) }

// stored is t as the API stores it: to the second, rounded down.
func stored(t time.Time) *metav1.Time {
	return &metav1.Time{Time: t.Truncate(time.Second)}
}

func TestStampInstant(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		stored *metav1.Time
		seen   time.Time
		want   time.Time
	}{
		{"seen within its second: when seen", stored(after(700 * ms)), after(720 * ms), after(720 * ms)},
		{"seen at its second: then", stored(base), base, base},
		{"seen in the next second: rounded up", stored(after(700 * ms)), after(1200 * ms), after(time.Second)},
		{"seen long after (a hub start): rounded up", stored(after(700 * ms)), after(time.Hour), after(time.Second)},
		{"stamped ahead of this hub's clock: as stored", stored(after(3 * time.Second)), after(500 * ms), after(3 * time.Second)},
		{"no time stored: when seen", nil, after(1500 * ms), after(1500 * ms)},
		{"a zero time is none", &metav1.Time{}, after(1500 * ms), after(1500 * ms)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stampOf("x", tt.stored).instant(tt.seen); !got.Equal(tt.want) {
				t.Errorf("instant = %v, want %v", got.Sub(base), tt.want.Sub(base))
			}
		})
	}
}

// TestInstantsNeverEarly: whatever the sub-second part of the stamp and
// however late it is first seen, the instant is never before the stamp,
// and never later than when it was seen (or the stored second's end).
func TestInstantsNeverEarly(t *testing.T) {
	for frac := time.Duration(0); frac < time.Second; frac += 50 * time.Millisecond {
		stamped := after(frac)
		for _, late := range []time.Duration{0, time.Millisecond, 20 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, time.Hour} {
			seen := stamped.Add(late)
			got := stampOf("x", stored(stamped)).instant(seen)
			if got.Before(stamped) {
				t.Errorf("stamped at +%v, seen %v later: instant +%v is early", frac, late, got.Sub(base))
			}
			limit := seen
			if end := base.Add(time.Second); end.Before(limit) {
				limit = end
			}
			if got.After(limit) {
				t.Errorf("stamped at +%v, seen %v later: instant +%v is after +%v", frac, late, got.Sub(base), limit.Sub(base))
			}
		}
	}
}

func TestInstantsObserve(t *testing.T) {
	in := newInstants()
	a, b := stored(after(300*time.Millisecond)), stored(after(2*time.Second+400*time.Millisecond))
	in.observe("m1", []stamp{stampOf("taint a", a)}, after(320*time.Millisecond))
	checkAt := func(t *testing.T, owner, of string, ts *metav1.Time, now, want time.Time) {
		t.Helper()
		if got := in.at(owner, of, ts, now); !got.Equal(want) {
			t.Errorf("at(%s, %s) = +%v, want +%v", owner, of, got.Sub(base), want.Sub(base))
		}
	}
	// First seen by the handler: kept, however late it is asked for.
	checkAt(t, "m1", "taint a", a, after(time.Hour), after(320*time.Millisecond))
	// Not seen by the handler yet (a reconcile reading a newer version):
	// first seen now.
	checkAt(t, "m1", "taint b", b, after(2*time.Second+450*time.Millisecond), after(2*time.Second+450*time.Millisecond))
	// The handler's later version keeps both.
	in.observe("m1", []stamp{stampOf("taint a", a), stampOf("taint b", b)}, after(3*time.Second))
	checkAt(t, "m1", "taint b", b, after(time.Hour), after(2*time.Second+450*time.Millisecond))
	// A stamp the owner no longer carries is forgotten: the same stored
	// time carried again (removed and added back within the second) is
	// seen anew.
	in.observe("m1", []stamp{stampOf("taint b", b)}, after(2*time.Second+500*time.Millisecond))
	in.observe("m1", []stamp{stampOf("taint a", a), stampOf("taint b", b)}, after(900*time.Millisecond))
	checkAt(t, "m1", "taint a", a, after(time.Hour), after(900*time.Millisecond))
	// Owners are apart.
	checkAt(t, "m2", "taint a", a, after(time.Hour), after(time.Second))
	// No stamps forgets the owner.
	in.observe("m1", nil, after(time.Hour))
	if _, ok := in.byOwner["m1"]; ok {
		t.Errorf("m1 still remembered: %v", in.byOwner["m1"])
	}
	// A time with a fraction of a second was not read from the API.
	precise := &metav1.Time{Time: after(1234 * time.Millisecond)}
	checkAt(t, "m3", "task x", precise, after(time.Hour), precise.Time)
	if _, ok := in.byOwner["m3"]; ok {
		t.Errorf("a precise time was remembered: %v", in.byOwner["m3"])
	}
}

// TestDecideOnInstants is the failover controller's taint decision with a
// fake clock: a taint added at +0.7 s (stored as +0 s) with a 3 s
// toleration evicts at +3.7 s plus the delay before the hub saw it, never
// at +3 s as the stored time alone says; a hub that first sees it after
// the stored second (restarted) evicts at +4 s, the stored time rounded
// up.
func TestDecideOnInstants(t *testing.T) {
	const key = v1alpha1.TaintClusterUnreachable
	added := after(700 * time.Millisecond)
	tolerations := []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3)}}
	cl := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member-1"},
		Spec: v1alpha1.ClusterSpec{Taints: []corev1.Taint{{Key: key, Effect: corev1.TaintEffectNoExecute, TimeAdded: stored(added)}}}}
	tests := []struct {
		name string
		seen time.Time // when the informer handler heard of the taint
		want time.Time // when it evicts
	}{
		{"seen 15 ms after it was added", added.Add(15 * time.Millisecond), after(3715 * time.Millisecond)},
		{"seen at once", added, after(3700 * time.Millisecond)},
		{"first seen by a hub started at +3.5 s", after(3500 * time.Millisecond), after(4 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{clusterTimes: newInstants()}
			c.clusterTimes.observe(cl.Name, clusterStamps(cl), tt.seen)
			d := eviction.Decide(c.preciseTaints(cl, tt.seen), tolerations, time.Time{}, tt.seen)
			if d.Evict || !d.At.Equal(tt.want) {
				t.Fatalf("Decide at +%v = {Evict: %v, At: +%v}, want to wait until +%v", tt.seen.Sub(base), d.Evict, d.At.Sub(base), tt.want.Sub(base))
			}
			if early := tt.want.Add(-time.Millisecond); eviction.Decide(c.preciseTaints(cl, early), tolerations, time.Time{}, early).Evict {
				t.Errorf("evicts at +%v, before +%v", early.Sub(base), tt.want.Sub(base))
			}
			if !eviction.Decide(c.preciseTaints(cl, tt.want), tolerations, time.Time{}, tt.want).Evict {
				t.Errorf("does not evict at +%v", tt.want.Sub(base))
			}
			if got := tt.want.Sub(added.Add(3 * time.Second)); got < 0 {
				t.Errorf("evicts %v before the toleration has run", -got)
			}
		})
	}
}

func TestBindingStamps(t *testing.T) {
	created := stored(after(time.Second))
	spec := &v1alpha1.ResourceBindingSpec{GracefulEvictionTasks: []v1alpha1.GracefulEvictionTask{
		{FromCluster: "member-1", CreationTimestamp: created},
		{FromCluster: "member-2"},
	}}
	status := &v1alpha1.ResourceBindingStatus{LastScheduledTime: stored(after(2 * time.Second))}
	want := []stamp{
		{of: "task member-1", seconds: created.Unix(), set: true},
		{of: "task member-2"},
		{of: lastScheduledOf, seconds: after(2 * time.Second).Unix(), set: true},
	}
	if diff := cmp.Diff(want, bindingStamps(spec, status), cmp.AllowUnexported(stamp{})); diff != "" {
		t.Errorf("bindingStamps (-want +got):\n%s", diff)
	}
}
