package eviction

import (
	"time"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// t0 is the fake "now" tests count from.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// noExecute is a NoExecute taint added at added (zero: no timeAdded).
func noExecute(key string, added time.Time) corev1.Taint {
	t := corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute}
	if !added.IsZero() {
		t.TimeAdded = &metav1.Time{Time: added}
	}
	return t
}

// preferNoExecute is a PreferNoExecute taint added at added.
func preferNoExecute(key string, added time.Time) corev1.Taint {
	t := noExecute(key, added)
	t.Effect = v1alpha1.TaintEffectPreferNoExecute
	return t
}

// tolerate is an Exists toleration of key's NoExecute taint, for seconds
// (nil: forever).
func tolerate(key string, seconds *int64) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
}

func secs(s int64) *int64 { return ptr.To(s) }
