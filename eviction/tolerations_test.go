package eviction

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestWithDefaultTolerations(t *testing.T) {
	defNotReady := tolerate(notReady, secs(300))
	defUnreachable := tolerate(unreachable, secs(120))
	tests := []struct {
		name string
		in   []corev1.Toleration
		want []corev1.Toleration
	}{
		{"none", nil, []corev1.Toleration{defNotReady, defUnreachable}},
		{"unrelated tolerations are kept first",
			[]corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu"}},
			[]corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu"}, defNotReady, defUnreachable}},
		{"own unreachable toleration forever is kept",
			[]corev1.Toleration{tolerate(unreachable, nil)},
			[]corev1.Toleration{tolerate(unreachable, nil), defNotReady}},
		{"own not-ready toleration with seconds is kept",
			[]corev1.Toleration{tolerate(notReady, secs(10))},
			[]corev1.Toleration{tolerate(notReady, secs(10)), defUnreachable}},
		{"own NoSchedule toleration does not count",
			[]corev1.Toleration{{Key: unreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			[]corev1.Toleration{{Key: unreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, defNotReady, defUnreachable}},
		{"own toleration of every effect counts",
			[]corev1.Toleration{{Key: unreachable, Operator: corev1.TolerationOpExists}},
			[]corev1.Toleration{{Key: unreachable, Operator: corev1.TolerationOpExists}, defNotReady}},
		{"Exists-all toleration: nothing added",
			[]corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			[]corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{"karmada keys count as own",
			[]corev1.Toleration{tolerate("cluster.karmada.io/not-ready", nil), tolerate("cluster.karmada.io/unreachable", secs(5))},
			[]corev1.Toleration{tolerate("cluster.karmada.io/not-ready", nil), tolerate("cluster.karmada.io/unreachable", secs(5))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WithDefaultTolerations(tt.in, 5*time.Minute, 2*time.Minute)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WithDefaultTolerations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithDefaultTolerationsWholeSeconds(t *testing.T) {
	got := WithDefaultTolerations(nil, 90*time.Second+900*time.Millisecond, 0)
	want := []corev1.Toleration{tolerate(notReady, secs(90)), tolerate(unreachable, secs(0))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithDefaultTolerations (-want +got):\n%s", diff)
	}
}

func TestWithDefaultTolerationsDoesNotModifyInput(t *testing.T) {
	// Spare capacity: appending in place would write into it.
	backing := make([]corev1.Toleration, 1, 4)
	backing[0] = tolerate(unreachable, nil)
	in := backing[:1]
	got := WithDefaultTolerations(in, time.Minute, time.Minute)
	if diff := cmp.Diff([]corev1.Toleration{tolerate(unreachable, nil)}, in); diff != "" {
		t.Errorf("input changed (-want +got):\n%s", diff)
	}
	if extra := backing[:2][1]; extra != (corev1.Toleration{}) {
		t.Errorf("spare capacity of the input written: %v", extra)
	}
	if &got[0] == &in[0] {
		t.Error("result shares the input's backing array")
	}
}

func TestWithDefaultTolerationsReturnsInputAsIs(t *testing.T) {
	in := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if got := WithDefaultTolerations(in, time.Minute, time.Minute); &got[0] != &in[0] {
		t.Error("nothing added, but the input was copied")
	}
}
