package hub

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-io/flotilla/hub/failover"
)

// Karmada's eviction queue metrics (karmada-controller-manager since
// v1.16), under Karmada's names and labels so that its dashboards and
// alerts work unchanged. Karmada runs one eviction queue per binding kind;
// its "name" label names the queue.
const (
	karmadaQueueBindings        = "binding-eviction"
	karmadaQueueClusterBindings = "cluster-binding-eviction"
)

// karmadaQueue names the queue a binding key's evictions are in, and the
// binding's kind: a key with a namespace is a ResourceBinding's.
func karmadaQueue(key string) (queue, kind string) {
	if strings.Contains(key, "/") {
		return karmadaQueueBindings, "ResourceBinding"
	}
	return karmadaQueueClusterBindings, "ClusterResourceBinding"
}

// karmadaEvictionInstruments are Karmada's processing metrics, observed
// when the failover controller writes an eviction.
type karmadaEvictionInstruments struct {
	latency *prometheus.HistogramVec
	total   *prometheus.CounterVec
}

func newKarmadaEvictionInstruments() karmadaEvictionInstruments {
	return karmadaEvictionInstruments{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "eviction_processing_latency_seconds",
			Help:    "Karmada's name: time taken to write a binding's evictions, by eviction queue (binding-eviction, cluster-binding-eviction).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"name"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eviction_processing_total",
			Help: "Karmada's name: bindings whose evictions were written (result success) or failed to be and are tried again (result error), by eviction queue."}, []string{"name", "result"}),
	}
}

func (k karmadaEvictionInstruments) observe(key string, took time.Duration, err error) {
	queue, _ := karmadaQueue(key)
	result := "success"
	if err != nil {
		result = "error"
	}
	k.latency.WithLabelValues(queue).Observe(took.Seconds())
	k.total.WithLabelValues(queue, result).Inc()
}

// karmadaQueueCollector exports the evictions the zones' rates hold back
// as Karmada's queue gauges.
type karmadaQueueCollector struct{ held heldSource }

// heldSource is what karmadaQueueCollector reads: the failover controller.
type heldSource interface {
	HeldEvictions() []failover.HeldEviction
}

var (
	karmadaQueueDepthDesc = prometheus.NewDesc("eviction_queue_depth",
		"Karmada's name: evictions due but held back by their zone's rate, by eviction queue (binding-eviction, cluster-binding-eviction); flotilla_eviction_queue_depth has them per zone.", []string{"name"}, nil)
	karmadaKindDesc = prometheus.NewDesc("eviction_kind_total",
		"Karmada's name: evictions due but held back by their zone's rate, by member cluster and binding kind (ResourceBinding, ClusterResourceBinding).", []string{"member_cluster", "resource_kind"}, nil)
)

func (karmadaQueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- karmadaQueueDepthDesc
	ch <- karmadaKindDesc
}

func (k karmadaQueueCollector) Collect(ch chan<- prometheus.Metric) {
	depth := map[string]int{karmadaQueueBindings: 0, karmadaQueueClusterBindings: 0}
	type clusterKind struct{ cluster, kind string }
	byKind := map[clusterKind]int{}
	for _, h := range k.held.HeldEvictions() {
		queue, kind := karmadaQueue(h.Binding)
		depth[queue]++
		byKind[clusterKind{h.Cluster, kind}]++
	}
	for queue, n := range depth {
		ch <- prometheus.MustNewConstMetric(karmadaQueueDepthDesc, prometheus.GaugeValue, float64(n), queue)
	}
	for ck, n := range byKind {
		ch <- prometheus.MustNewConstMetric(karmadaKindDesc, prometheus.GaugeValue, float64(n), ck.cluster, ck.kind)
	}
}
