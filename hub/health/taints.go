package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// managedKeys are the taint keys the hub owns; operators own all others.
var managedKeys = map[string]bool{
	v1alpha1.TaintClusterNotReady:      true,
	v1alpha1.TaintClusterUnreachable:   true,
	v1alpha1.TaintClusterTerminating:   true,
	v1alpha1.TaintClusterUnschedulable: true,
}

// healthKeys are the managed keys whose NoExecute taints are
// ClusterTaintPolicies' when the hub does not add them (NoExecuteTaints).
var healthKeys = map[string]bool{v1alpha1.TaintClusterNotReady: true, v1alpha1.TaintClusterUnreachable: true}

// IsManaged reports whether the hub owns taint t of a cluster whose
// ClusterTaintPolicy owners are owners (Cluster.TaintOwners): every taint
// of its keys, except the not-ready and unreachable NoExecute taints that
// a policy added while cfg leaves them to policies. Such a taint that no
// policy added is the hub's, left from a run that added NoExecute taints:
// the hub removes it.
func (cfg Config) IsManaged(t corev1.Taint, owners map[string]string) bool {
	if !managedKeys[t.Key] {
		return false
	}
	if cfg.NoExecuteTaints || t.Effect != corev1.TaintEffectNoExecute || !healthKeys[t.Key] {
		return true
	}
	_, policy := owners[v1alpha1.TaintOwnerKey(t)]
	return !policy
}

// MergeTaints replaces the managed taints of existing (of a cluster whose
// policy owners are owners, see IsManaged) with desired. Taints
// the cluster keeps keep their timeAdded; new ones are stamped with now;
// operators' taints are untouched. It returns the merged list and what was
// added and removed, for events.
func (cfg Config) MergeTaints(existing, desired []corev1.Taint, owners map[string]string, now time.Time) (merged, added, removed []corev1.Taint) {
	want := map[corev1.Taint]bool{}
	for _, t := range desired {
		want[taintID(t)] = true
	}
	have := map[corev1.Taint]bool{}
	for _, t := range existing {
		switch {
		case !cfg.IsManaged(t, owners):
			merged = append(merged, t)
		case want[taintID(t)]:
			have[taintID(t)] = true
			merged = append(merged, t)
		default:
			removed = append(removed, t)
		}
	}
	stamp := metav1.NewTime(now)
	for _, t := range desired {
		if have[taintID(t)] {
			continue
		}
		t.TimeAdded = &stamp
		merged = append(merged, t)
		added = append(added, t)
	}
	return merged, added, removed
}

// taintID is a taint's identity: key and effect.
func taintID(t corev1.Taint) corev1.Taint {
	return corev1.Taint{Key: t.Key, Effect: t.Effect}
}
