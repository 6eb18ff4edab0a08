package registry

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// Collector exports a few series per cluster, computed at scrape from a
// copy of the registry's memory: no metric objects are kept per cluster,
// so 10,000 clusters cost a slice copy and the series themselves per
// scrape.
func (r *Registry) Collector() prometheus.Collector { return clusterCollector{r} }

type clusterCollector struct{ r *Registry }

var (
	leaseAgeDesc = prometheus.NewDesc("flotilla_cluster_lease_age_seconds",
		"Time since the cluster's agent last renewed its lease, as the hub holds it in memory (clusters that never renewed have no series).", []string{"cluster"}, nil)
	clusterReadyDesc = prometheus.NewDesc("flotilla_cluster_ready",
		"The cluster's Ready condition: 1 for its current status (True, False or Unknown), 0 for the others; all 0 before the hub's first verdict.", []string{"cluster", "status"}, nil)
	clusterTaintDesc = prometheus.NewDesc("flotilla_cluster_taint",
		"Always 1: one series per taint on the cluster, by key and effect.", []string{"cluster", "key", "effect"}, nil)
	readyStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
)

// samplePool keeps the snapshot slices between scrapes.
var samplePool = sync.Pool{New: func() any { return new([]clusterSample) }}

func (clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leaseAgeDesc
	ch <- clusterReadyDesc
	ch <- clusterTaintDesc
}

func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	buf := samplePool.Get().(*[]clusterSample)
	samples := c.r.clusterSamples((*buf)[:0])
	now := c.r.clock.Now()
	for _, s := range samples {
		if !s.lastRenewal.IsZero() {
			ch <- prometheus.MustNewConstMetric(leaseAgeDesc, prometheus.GaugeValue, max(now.Sub(s.lastRenewal).Seconds(), 0), s.name)
		}
		for _, st := range readyStatuses {
			ready := 0.0
			if s.ready == st {
				ready = 1
			}
			ch <- prometheus.MustNewConstMetric(clusterReadyDesc, prometheus.GaugeValue, ready, s.name, string(st))
		}
		for _, t := range s.taints {
			ch <- prometheus.MustNewConstMetric(clusterTaintDesc, prometheus.GaugeValue, 1, s.name, t.Key, string(t.Effect))
		}
	}
	clear(samples) // drop the references to the entries' taints
	*buf = samples[:0]
	samplePool.Put(buf)
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
