package registry

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// TestRegistryTakesItsStoredTaintsBack: a health taint stamped 0.7 s into
// a second reads back from the API to the second; the registry takes that
// for its own taint, not for an edit to put right (which cost a Get and
// two writes per event on the cluster, each time).
func TestRegistryTakesItsStoredTaintsBack(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	clk.Step(700 * time.Millisecond)
	f.renew("edge-1")
	f.advance(40 * time.Second) // Unknown: the unreachable taint, stamped +40.7 s
	f.flush()
	stored, err := f.reg.clusters.Get(t.Context(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writes := f.reg.stats.storeWrites.Load()
	f.reg.Observe(stored) // what the cluster informer does with the hub's own write
	f.reg.mu.Lock()
	dirty := f.reg.dirty["edge-1"]
	f.reg.mu.Unlock()
	if dirty {
		t.Errorf("the registry took its own stored taints (%v) for an edit", stored.Spec.Taints)
	}
	f.flush()
	if n := f.reg.stats.storeWrites.Load() - writes; n != 0 {
		t.Errorf("%d writes after seeing its own taints come back, want none", n)
	}
}

func TestSameTaints(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	taint := func(value string, added *metav1.Time) corev1.Taint {
		return corev1.Taint{Key: v1alpha1.TaintClusterUnreachable, Value: value, Effect: corev1.TaintEffectNoSchedule, TimeAdded: added}
	}
	tests := []struct {
		name string
		a, b []corev1.Taint
		want bool
	}{
		{"none and empty", nil, []corev1.Taint{}, true},
		{"a stamp and its stored second", []corev1.Taint{taint("", at(700*time.Millisecond))}, []corev1.Taint{taint("", at(0))}, true},
		{"another second", []corev1.Taint{taint("", at(1700*time.Millisecond))}, []corev1.Taint{taint("", at(0))}, false},
		{"no time and a zero time", []corev1.Taint{taint("", nil)}, []corev1.Taint{taint("", &metav1.Time{})}, true},
		{"no time and a time", []corev1.Taint{taint("", nil)}, []corev1.Taint{taint("", at(0))}, false},
		{"another value", []corev1.Taint{taint("a", at(0))}, []corev1.Taint{taint("b", at(0))}, false},
		{"one more", []corev1.Taint{taint("", at(0))}, []corev1.Taint{taint("", at(0)), taint("", at(0))}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameTaints(tt.a, tt.b); got != tt.want {
				t.Errorf("sameTaints = %v, want %v", got, tt.want)
			}
		})
	}
}
