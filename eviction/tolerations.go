package eviction

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/scheduler"
)

// WithDefaultTolerations returns tolerations plus, for each of the
// cluster.flotilla.io/not-ready and cluster.flotilla.io/unreachable NoExecute
// taints that none of tolerations tolerates (scheduler.Tolerates against a
// taint with that key, no value, effect NoExecute), a toleration {Key: that
// key, Operator: Exists, Effect: NoExecute, TolerationSeconds: d in whole
// seconds} (notReady for not-ready, unreachable for unreachable). A policy
// with its own toleration of a taint keeps it as written (including
// forever). The input slice is never modified; when nothing is added, the
// input is returned as is.
//
// This mirrors the DefaultTolerationSeconds admission plugin of Kubernetes:
// without it, a policy that says nothing about health taints would be
// evicted the instant a NoExecute taint lands, with no time for the cluster
// to come back.
func WithDefaultTolerations(tolerations []corev1.Toleration, notReady, unreachable time.Duration) []corev1.Toleration {
	defaults := []struct {
		key   string
		grace time.Duration
	}{
		{v1alpha1.TaintClusterNotReady, notReady},
		{v1alpha1.TaintClusterUnreachable, unreachable},
	}
	var added []corev1.Toleration
	for _, def := range defaults {
		taint := corev1.Taint{Key: def.key, Effect: corev1.TaintEffectNoExecute}
		if scheduler.Tolerates(tolerations, &taint) {
			continue
		}
		seconds := int64(def.grace / time.Second)
		added = append(added, corev1.Toleration{
			Key:               def.key,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: &seconds,
		})
	}
	if len(added) == 0 {
		return tolerations
	}
	// A fresh slice: appending to the input could write into the policy's
	// backing array, which the caller may share with a cache.
	out := make([]corev1.Toleration, 0, len(tolerations)+len(added))
	return append(append(out, tolerations...), added...)
}
