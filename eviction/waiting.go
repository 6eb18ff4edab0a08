package eviction

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// waitingCluster is one replacement cluster that is not healthy yet, and why.
type waitingCluster struct {
	name, why string
}

// unhealthyClusters returns the clusters of the result whose workload is not
// both applied and Healthy, sorted by name.
func unhealthyClusters(clusters []v1alpha1.TargetCluster, statuses []v1alpha1.AggregatedStatusItem) []waitingCluster {
	byName := make(map[string]*v1alpha1.AggregatedStatusItem, len(statuses))
	for i := range statuses {
		// The first item wins, should a cluster be reported twice.
		if _, seen := byName[statuses[i].ClusterName]; !seen {
			byName[statuses[i].ClusterName] = &statuses[i]
		}
	}
	var out []waitingCluster
	for _, c := range clusters {
		if why := notHealthy(byName[c.Name]); why != "" {
			out = append(out, waitingCluster{c.Name, why})
		}
	}
	slices.SortFunc(out, func(a, b waitingCluster) int { return strings.Compare(a.name, b.name) })
	return slices.CompactFunc(out, func(a, b waitingCluster) bool { return a.name == b.name })
}

// notHealthy says what the workload in one cluster still lacks, or "".
func notHealthy(item *v1alpha1.AggregatedStatusItem) string {
	switch {
	case item == nil:
		return "no status yet"
	case !item.Applied:
		return "not applied yet"
	case item.Health != v1alpha1.HealthHealthy:
		health := item.Health
		if health == "" {
			health = v1alpha1.HealthUnknown
		}
		return fmt.Sprintf("not healthy yet (%s)", health)
	}
	return ""
}

// listWaiting names at most maxListed clusters: a describe line, not a
// dump of a large fleet.
func listWaiting(clusters []waitingCluster) string {
	parts := make([]string, 0, maxListed+1)
	for i, c := range clusters {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(clusters)-maxListed))
			break
		}
		parts = append(parts, c.name+" "+c.why)
	}
	return strings.Join(parts, ", ")
}
