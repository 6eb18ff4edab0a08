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
	f := spec.Failover
	if f == nil {
		return nil
	}
	var paths []string
	for _, sp := range []*v1alpha1.StatePreservation{applicationState(f), clusterState(f)} {
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

func applicationState(f *v1alpha1.FailoverBehavior) *v1alpha1.StatePreservation {
	if f.Application == nil {
		return nil
	}
	return f.Application.StatePreservation
}

func clusterState(f *v1alpha1.FailoverBehavior) *v1alpha1.StatePreservation {
	if f.Cluster == nil {
		return nil
	}
	return f.Cluster.StatePreservation
}
