package hub

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// clusterCollector exports a few series per cluster, computed at scrape
// from a copy of the registry's memory: no metric objects are kept per
// cluster, so 10,000 clusters cost a slice copy and the series themselves
// per scrape.
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
			ch <- prometheus.MustNewConstMetric(clusterReadyDesc, prometheus.GaugeValue, b2f(s.ready == st), s.name, string(st))
		}
		for _, t := range s.taints {
			ch <- prometheus.MustNewConstMetric(clusterTaintDesc, prometheus.GaugeValue, 1, s.name, t.Key, string(t.Effect))
		}
	}
	clear(samples) // drop the references to the entries' taints
	*buf = samples[:0]
	samplePool.Put(buf)
}
