package cli

import (
	"context"
	"fmt"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// maxUpdateAttempts bounds the read-modify-write loop of updateCluster.
const maxUpdateAttempts = 5

// mutateFunc changes a cluster in place and reports whether it changed
// anything. An error stops the update: nothing is written.
type mutateFunc func(cl *v1alpha1.Cluster) (changed bool, err error)

// updateCluster reads cluster name, applies mutate and writes it back with
// the resourceVersion it read. When another writer got there first (409
// Conflict) it reads again and re-applies mutate to the fresh copy, up to
// maxUpdateAttempts times. It reports whether a write happened.
func (c *client) updateCluster(ctx context.Context, name string, mutate mutateFunc) (bool, error) {
	var lastErr error
	for attempt := 1; attempt <= maxUpdateAttempts; attempt++ {
		cl, err := c.getCluster(ctx, name)
		if err != nil {
			return false, err
		}
		changed, err := mutate(cl)
		if err != nil || !changed {
			return false, err
		}
		_, err = c.putCluster(ctx, cl)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		lastErr = err
	}
	return false, fmt.Errorf("cluster %q kept changing under us: gave up after %d attempts: %w",
		name, maxUpdateAttempts, lastErr)
}
