package eviction

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/jsonpathvalue"
)

// State is what an eviction keeps of the workload's state in the cluster
// it leaves, for the task ([Evict]) to carry to the new copy.
type State struct {
	// Labels are the statePreservation rules' values, by label key.
	Labels map[string]string
	// ClustersBefore are the clusters the binding was placed on before
	// the eviction.
	ClustersBefore []string
	// ObservedAt is when the hub last heard from the cluster's agent: the
	// status the labels were read from is at least that recent.
	ObservedAt time.Time
}

// ErrStatusNotCollected: the cluster never reported the workload's status,
// so no state can be read from it.
var ErrStatusNotCollected = errors.New("the workload's status has not been collected from the cluster")

// StateFor reads the preserved label state of the workload in cluster
// from the binding's aggregated status, by the rules of sp (Karmada's
// extractStateForEviction). Nil without rules. Each rule's value is the
// one the cluster's agent read for its JSONPath on the live object
// (AggregatedStatusItem.StateValues), else the rule is evaluated on the
// status fields the agent reported, as agents that do not read templates
// report them. All or nothing: if one rule fails, no state is returned,
// and the error says which rule and why; ErrStatusNotCollected when the
// cluster reported neither.
func StateFor(sp *v1alpha1.StatePreservation, items []v1alpha1.AggregatedStatusItem, cluster string) (map[string]string, error) {
	if sp == nil || len(sp.Rules) == 0 {
		return nil, nil
	}
	i := slices.IndexFunc(items, func(it v1alpha1.AggregatedStatusItem) bool { return it.ClusterName == cluster })
	if i < 0 || len(items[i].StateValues) == 0 && (items[i].Status == nil || len(items[i].Status.Raw) == 0) {
		return nil, fmt.Errorf("%w %s", ErrStatusNotCollected, cluster)
	}
	var raw []byte
	if items[i].Status != nil {
		raw = items[i].Status.Raw
	}
	return preserved(sp, items[i].StateValues, raw)
}

// PreservedLabels evaluates every rule of sp on a workload's status
// (Karmada's BuildPreservedLabelState). The status comes from an agent,
// so every value must be a valid label value (at most 63 characters of
// letters, digits, '-', '_' and '.'): a value that is not is refused, not
// truncated, since a shortened revision or name would name something else.
func PreservedLabels(sp *v1alpha1.StatePreservation, rawStatus []byte) (map[string]string, error) {
	return preserved(sp, nil, rawStatus)
}

// preserved is PreservedLabels with the values an agent read, by
// template, taken before the status is evaluated.
func preserved(sp *v1alpha1.StatePreservation, read map[string]string, rawStatus []byte) (map[string]string, error) {
	var status any
	decoded := false
	out := make(map[string]string, len(sp.Rules))
	for _, rule := range sp.Rules {
		value, ok := read[rule.JSONPath]
		if !ok {
			if !decoded {
				if err := utiljson.Unmarshal(rawStatus, &status); err != nil {
					return nil, fmt.Errorf("rule %s: no value read by the agent; read the workload's status: %w", rule.AliasLabelName, err)
				}
				decoded = true
			}
			var err error
			if value, err = jsonpathvalue.Eval(status, rule.JSONPath); err != nil {
				return nil, fmt.Errorf("rule %s: %w", rule.AliasLabelName, err)
			}
		}
		if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
			return nil, fmt.Errorf("rule %s: value %q is not a valid label value: %s", rule.AliasLabelName, clip(value), strings.Join(msgs, "; "))
		}
		out[rule.AliasLabelName] = value
	}
	return out, nil
}

// clip shortens a value for a message.
func clip(s string) string {
	if len(s) > validation.LabelValueMaxLength {
		return s[:validation.LabelValueMaxLength] + "..."
	}
	return s
}

// InjectedLabels are the labels the copy of a binding's workload in
// cluster gets from its last eviction task, under Karmada's restrictions
// (injectReservedLabelState): the binding is placed on one cluster only,
// the last task has purgeMode Directly, and cluster is not one the
// workload ran in before that failover. Nil otherwise.
func InjectedLabels(spec *v1alpha1.ResourceBindingSpec, cluster string) map[string]string {
	if len(spec.Clusters) != 1 || len(spec.GracefulEvictionTasks) == 0 {
		return nil
	}
	task := spec.GracefulEvictionTasks[len(spec.GracefulEvictionTasks)-1]
	if v1alpha1.NormalPurgeMode(task.PurgeMode) != v1alpha1.PurgeModeDirectly || slices.Contains(task.ClustersBeforeFailover, cluster) {
		return nil
	}
	return task.PreservedLabelState
}

// DirectlyPurged are the clusters whose copy of the workload goes before
// any new copy is made: those of Directly tasks, not placed again. None
// while the binding is placed nowhere: there is no purge without a
// replacement, and the old copy stays.
func DirectlyPurged(spec *v1alpha1.ResourceBindingSpec) []string {
	if len(spec.Clusters) == 0 {
		return nil
	}
	var out []string
	for _, task := range spec.GracefulEvictionTasks {
		if v1alpha1.NormalPurgeMode(task.PurgeMode) == v1alpha1.PurgeModeDirectly && !isPlaced(spec, task.FromCluster) && !slices.Contains(out, task.FromCluster) {
			out = append(out, task.FromCluster)
		}
	}
	return out
}

// ExistingClusters are the clusters whose Works a binding keeps: its
// placement and the clusters of its eviction tasks, except those purged
// directly (Karmada's ObtainBindingSpecExistingClusters).
func ExistingClusters(spec *v1alpha1.ResourceBindingSpec) []string {
	purged := DirectlyPurged(spec)
	var out []string
	add := func(name string) {
		if !slices.Contains(out, name) && !slices.Contains(purged, name) {
			out = append(out, name)
		}
	}
	for _, tc := range spec.Clusters {
		add(tc.Name)
	}
	for _, task := range spec.GracefulEvictionTasks {
		add(task.FromCluster)
	}
	slices.Sort(out)
	return out
}

func isPlaced(spec *v1alpha1.ResourceBindingSpec, cluster string) bool {
	return slices.ContainsFunc(spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == cluster })
}

// FencingMargin is added to a cut-off agent's fencing deadline before the
// hub counts its copy as stopped: the agent's scale to zero, and its
// pods' termination (30 s by default), take time after the deadline.
const FencingMargin = 60 * time.Second

// FencedBy is when a copy in a cluster the hub last heard from at
// lastHeard (the lease's renewTime, on the hub's clock) is stopped by
// fencing after stopAfter, counting the margin: the agent counts from
// the sending of its last acknowledged renewal, which is before the hub
// stamped it, and never from less than two renew intervals (half the
// lease duration, the renew interval being a quarter of it). Zero
// without fencing or without a time to count from.
func FencedBy(lastHeard time.Time, stopAfter, leaseDuration time.Duration) time.Time {
	if stopAfter <= 0 || lastHeard.IsZero() {
		return time.Time{}
	}
	return lastHeard.Add(max(stopAfter, leaseDuration/2) + FencingMargin)
}
