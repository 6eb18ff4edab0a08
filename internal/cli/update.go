package cli

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// fieldManager names flotilla in the managedFields of what it writes
// (server-side apply, and the Cluster updates of taint and cordon).
const fieldManager = "flotilla"

// maxUpdateAttempts bounds the read-modify-write loop of updateCluster.
const maxUpdateAttempts = 5

// mutateFunc changes a cluster in place and reports whether it changed
// anything. An error stops the update: nothing is written.
type mutateFunc func(cl *v1alpha1.Cluster) (changed bool, err error)

// updateCluster reads cluster name, applies mutate and writes it back with
// an Update of the resourceVersion it read (the spec, labels and
// annotations: the status is the hub's, and Update leaves it alone). When
// another writer got there first (409 Conflict: the hub's registry writing
// health taints, another operator) it reads again and re-applies mutate to
// the fresh copy, up to maxUpdateAttempts times. It reports whether a
// write happened.
func (c *hubClients) updateCluster(ctx context.Context, name string, mutate mutateFunc) (bool, error) {
	clusters := c.flotilla.FlotillaV1alpha1().Clusters()
	var lastErr error
	for attempt := 1; attempt <= maxUpdateAttempts; attempt++ {
		cl, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		changed, err := mutate(cl)
		if err != nil || !changed {
			return false, err
		}
		_, err = clusters.Update(ctx, cl, metav1.UpdateOptions{FieldManager: fieldManager})
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
