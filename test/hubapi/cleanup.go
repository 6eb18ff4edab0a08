package hubapi

import (
	"context"
	"testing"
)

// Cleanup deletes, when the test ends, every object of Flotilla's
// cluster-scoped kinds (the CRDs of crds.Hub with scope Cluster: Cluster,
// ClusterPropagationPolicy, ClusterResourceBinding, PurgeRequest,
// ClusterTaintPolicy, WorkloadRebalancer, and Karmada's three), finalizers cleared, so the next test starts without
// them. It deletes every one, not only the test's own: tests that create
// cluster-scoped Flotilla objects must not run in parallel with each other.
func (e *Env) Cleanup(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		// t.Context() is already canceled when clean-ups run.
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := e.purge(ctx, "", e.clusterKinds); err != nil {
			t.Errorf("hubapi: delete cluster-scoped Flotilla objects: %v", err)
		}
	})
}
