package binding

import (
	"slices"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// statePaths are the JSONPath templates of the binding's statePreservation
// rules, application and cluster failover's, sorted and without
// duplicates, for the agent to evaluate on the workload's status (nil
// without rules). Validation bounds the rules and their length, within
// what the protocol carries.
func statePaths(spec *v1alpha1.ResourceBindingSpec) []string {
	var paths []string
	for _, sp := range []*v1alpha1.StatePreservation{spec.Failover.ApplicationStatePreservation(), spec.Failover.ClusterStatePreservation()} {
		if sp == nil {
			continue
		}
		for _, r := range sp.Rules {
			if r.JSONPath != "" {
				paths = append(paths, r.JSONPath)
			}
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}
