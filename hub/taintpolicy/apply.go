package taintpolicy

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/scheduler"
)

// Options say which taints the hub keeps for itself.
type Options struct {
	// HubNoExecute: the hub sets the not-ready and unreachable NoExecute
	// taints itself (flag --health-no-execute-taints), so policies leave
	// them alone.
	HubNoExecute bool
}

// Change is one taint a policy added to or removed from a cluster.
type Change struct {
	Policy  string
	Taint   corev1.Taint
	Removed bool
}

// Result is what the policies make of one cluster's taints.
type Result struct {
	// Taints are the cluster's taints after every policy.
	Taints []corev1.Taint
	// Owners is the cluster's AnnotationTaintPolicies after the policies:
	// the policy that added each of its taints still there, by taint ID.
	Owners map[string]string
	// Changes are the taints the cluster gained or lost, with the policy
	// that added or removed each; empty when nothing is to be written.
	Changes []Change
	// HubOwned are the policy taints left alone because the hub owns them.
	HubOwned []Change
}

// Apply runs Karmada's rules for ClusterTaintPolicy on one cluster: the
// policies in creation order (then by name); for each whose targetClusters
// match the cluster (nil: every cluster), its taints not on the cluster
// (by key and effect) are added, stamped now, when all its addOnConditions
// match, and then its taints are removed, by key and effect, when all its
// removeOnConditions match. A taint the hub owns (see Options) is neither
// added nor removed. cluster is not modified.
func Apply(cluster *v1alpha1.Cluster, policies []*v1alpha1.ClusterTaintPolicy, opts Options, now time.Time) Result {
	ordered := slices.Clone(policies)
	slices.SortStableFunc(ordered, func(a, b *v1alpha1.ClusterTaintPolicy) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	taints := slices.Clone(cluster.Spec.Taints)
	// Who added each taint last and who removed it first, by taint ID.
	added, removed := map[string]Change{}, map[string]Change{}
	var hubOwned []Change
	stamp := metav1.NewTime(now)
	for _, p := range ordered {
		if ok, err := targets(p, cluster); err != nil || !ok {
			continue // an invalid target (validation refuses them) matches nothing
		}
		add := ConditionsMatch(cluster.Status.Conditions, p.Spec.AddOnConditions)
		remove := ConditionsMatch(cluster.Status.Conditions, p.Spec.RemoveOnConditions)
		for _, pt := range p.Spec.Taints {
			t := corev1.Taint{Key: v1alpha1.NormalTaintKey(pt.Key), Value: pt.Value, Effect: pt.Effect}
			if (add || remove) && hubOwns(t, opts) {
				hubOwned = append(hubOwned, Change{Policy: p.Name, Taint: t, Removed: !add})
				continue
			}
			if add && indexOf(taints, t) < 0 {
				t.TimeAdded = &stamp
				taints = append(taints, t)
				added[v1alpha1.TaintOwnerKey(t)] = Change{Policy: p.Name, Taint: t}
			}
			if i := indexOf(taints, t); remove && i >= 0 {
				if _, ok := removed[v1alpha1.TaintOwnerKey(t)]; !ok {
					removed[v1alpha1.TaintOwnerKey(t)] = Change{Policy: p.Name, Taint: taints[i], Removed: true}
				}
				taints = slices.Delete(taints, i, i+1)
			}
		}
	}
	changes := netChanges(cluster.Spec.Taints, taints, added, removed)
	if len(changes) == 0 {
		taints = cluster.Spec.Taints
	}
	return Result{Taints: taints, Owners: owners(cluster, taints, changes), Changes: changes, HubOwned: hubOwned}
}

// ConditionsMatch reports whether every one of match matches conditions
// (ANDed); an empty match never does. In: the condition is there with a
// status in statusValues; NotIn: it is there with a status not in them.
// A condition type the cluster does not have matches neither.
func ConditionsMatch(conditions []metav1.Condition, match []v1alpha1.MatchCondition) bool {
	if len(match) == 0 {
		return false
	}
	for _, m := range match {
		i := slices.IndexFunc(conditions, func(c metav1.Condition) bool { return c.Type == m.ConditionType })
		if i < 0 {
			return false
		}
		in := slices.Contains(m.StatusValues, conditions[i].Status)
		switch m.Operator {
		case v1alpha1.MatchConditionOpIn:
			if !in {
				return false
			}
		case v1alpha1.MatchConditionOpNotIn:
			if in {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// hubOwns reports whether the hub sets t itself: its terminating and
// unschedulable taints, the not-ready and unreachable NoSchedule taints,
// and their NoExecute taints unless policies own them (Options).
func hubOwns(t corev1.Taint, opts Options) bool {
	switch t.Key {
	case v1alpha1.TaintClusterTerminating, v1alpha1.TaintClusterUnschedulable:
		return true
	case v1alpha1.TaintClusterNotReady, v1alpha1.TaintClusterUnreachable:
		return t.Effect != corev1.TaintEffectNoExecute || opts.HubNoExecute
	}
	return false
}

func indexOf(taints []corev1.Taint, t corev1.Taint) int {
	return slices.IndexFunc(taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Effect == t.Effect })
}

// netChanges are the taints after has that before had not (as they are:
// key, value, effect and time), with the policy that added each last, and
// the taints before had that after has not, with the policy that removed
// each first: the changes to write, in after's and then before's order.
func netChanges(before, after []corev1.Taint, added, removed map[string]Change) []Change {
	var out []Change
	for _, t := range after {
		if c, ok := added[v1alpha1.TaintOwnerKey(t)]; ok && !containsExactly(before, t) {
			out = append(out, c)
		}
	}
	for _, t := range before {
		if c, ok := removed[v1alpha1.TaintOwnerKey(t)]; ok && !containsExactly(after, t) {
			out = append(out, c)
		}
	}
	return out
}

func containsExactly(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(x corev1.Taint) bool {
		return x.MatchTaint(&t) && x.Value == t.Value && x.TimeAdded.Equal(t.TimeAdded)
	})
}

// owners is the cluster's record of which policy added which taint,
// updated with changes, without taints the cluster no longer has.
func owners(cluster *v1alpha1.Cluster, taints []corev1.Taint, changes []Change) map[string]string {
	out := cluster.TaintOwners()
	for _, c := range changes { // removals first: a taint replaced is owned by who added it
		if c.Removed {
			delete(out, v1alpha1.TaintOwnerKey(c.Taint))
		}
	}
	for _, c := range changes {
		if !c.Removed {
			out[v1alpha1.TaintOwnerKey(c.Taint)] = c.Policy
		}
	}
	for id := range out {
		if !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return v1alpha1.TaintOwnerKey(t) == id }) {
			delete(out, id)
		}
	}
	return out
}

// targets reports whether p targets cl, as placement matches a
// ClusterAffinity; nil targets every cluster.
func targets(p *v1alpha1.ClusterTaintPolicy, cl *v1alpha1.Cluster) (bool, error) {
	return scheduler.AffinityMatches(p.Spec.TargetClusters, cl)
}
