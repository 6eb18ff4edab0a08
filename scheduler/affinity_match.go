package scheduler

import "github.com/flotilla-io/flotilla/api/v1alpha1"

// AffinityMatches reports whether cluster c matches affinity a (nil
// matches every cluster) as placement matches it: names, exclusions,
// labels and fields, without the taint check. Other parts of the hub that
// select clusters with a ClusterAffinity (ClusterTaintPolicy's
// targetClusters) use it, so one affinity selects the same clusters
// everywhere. An invalid affinity is an error.
func AffinityMatches(a *v1alpha1.ClusterAffinity, c *v1alpha1.Cluster) (bool, error) {
	m, err := compileAffinity(a)
	if err != nil {
		return false, err
	}
	return m.matches(c), nil
}
