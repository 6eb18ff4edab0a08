package scheduling

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/scheduler"
)

// fleetCache is the scheduler.Fleet of the clusters informer, shared by
// the workers: built on the first schedule after a cluster was added or
// deleted or changed something the scheduler reads, and reused until then.
// Agents' other status changes (conditions, heartbeats) keep it.
type fleetCache struct {
	clusters controller.Source[*v1alpha1.Cluster]

	mu    sync.Mutex
	fleet *scheduler.Fleet // nil: build on the next get; guarded by mu
}

// clusterChanged is the informer's handler: it drops the Fleet when the
// change matters to a schedule. The informer's store already has the
// change, so the next get sees it.
func (f *fleetCache) clusterChanged(old, cur *v1alpha1.Cluster) {
	if old != nil && cur != nil && !schedulingInputChanged(old, cur) &&
		equality.Semantic.DeepEqual(old.Status.ResourceSummary, cur.Status.ResourceSummary) {
		return
	}
	f.mu.Lock()
	f.fleet = nil
	f.mu.Unlock()
}

// get returns the current Fleet, building it if needed.
func (f *fleetCache) get() (*scheduler.Fleet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fleet != nil {
		return f.fleet, nil
	}
	fleet, err := scheduler.NewFleet(f.clusters.List())
	if err != nil {
		return nil, err
	}
	f.fleet = fleet
	return fleet, nil
}
