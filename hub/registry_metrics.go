package hub

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/health"
)

// SetDetectionObserver sets what is told, each time a cluster's lease
// expires (Ready goes Unknown with LeaseExpired), how long after the grace
// period the hub noticed: the time Ready went Unknown − the last renewal −
// the grace period. Call it before the registry runs.
func (r *Registry) SetDetectionObserver(fn func(delay time.Duration)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.detected = fn
}

func (r *Registry) observeDetectionLocked(e *entry, state health.State, now time.Time) {
	if r.detected == nil || state.Ready != metav1.ConditionUnknown || state.Reason != v1alpha1.ReasonLeaseExpired || e.obs.LastRenewal.IsZero() {
		return
	}
	r.detected(max(now.Sub(e.obs.LastRenewal)-r.cfg.Health.GracePeriod, 0))
}

// clusterSample is what the metrics say about one cluster, copied under
// the registry's lock and exported after it is released.
type clusterSample struct {
	name        string
	lastRenewal time.Time // zero: never renewed
	ready       metav1.ConditionStatus
	taints      []corev1.Taint // shared with the entry: read only
}

// clusterSamples appends every cluster's sample to buf. The taint slices
// are the entries' own: health.MergeTaints and Observe replace a
// cluster's taints with a new slice rather than writing into it.
func (r *Registry) clusterSamples(buf []clusterSample) []clusterSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, e := range r.entries {
		buf = append(buf, clusterSample{name: name, lastRenewal: e.obs.LastRenewal, ready: e.state.Ready, taints: e.obj.Spec.Taints})
	}
	return buf
}
