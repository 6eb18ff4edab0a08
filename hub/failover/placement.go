package failover

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// SetPlacer sets the scheduler's placement, with which an eviction is
// written together with its replacement; call it before Run. Without one
// (unit tests) an eviction only removes the cluster and the scheduler
// places the replacement with a write of its own.
func (c *Controller) SetPlacer(p controller.Placer) { c.place = p }

// placeReplacement puts the scheduler's placement of spec, which has just
// lost the clusters it is evicted from, into spec.clusters: the eviction
// and its replacement are then one write of the binding instead of two
// (the eviction, then the scheduler's placement of the new generation).
// The scheduler still schedules that generation and records it in the
// status; it writes the placement again only if its own result differs
// (the fleet changed meanwhile). With no placement (nowhere to go) the
// cluster is only removed, and the scheduler says why in its condition,
// as before.
func (c *Controller) placeReplacement(key string, read metav1.Object, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) {
	if c.place == nil {
		return
	}
	// The spec write makes the next generation (store refuses to write
	// over another).
	if clusters, ok := c.place(key, read.GetGeneration()+1, spec, status); ok {
		spec.Clusters = clusters
	}
}
