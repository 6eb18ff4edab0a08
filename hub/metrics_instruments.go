package hub

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/hub/binding"
	"github.com/flotilla-io/flotilla/hub/dispatch"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/hub/registry"
	"github.com/flotilla-io/flotilla/hub/scheduling"
	"github.com/flotilla-io/flotilla/internal/apiwrites"
	"github.com/flotilla-io/flotilla/internal/writelimit"
)

// hubMetrics are the instruments one hub observes into, in a registry of
// their own (tests run several hubs in one process).
type hubMetrics struct {
	registry *prometheus.Registry

	detectionDelay   prometheus.Histogram
	scheduleLatency  *prometheus.HistogramVec
	dispatchLatency  *prometheus.HistogramVec
	evictions        *prometheus.CounterVec
	evictionWait     *prometheus.HistogramVec
	clustersAdmitted *prometheus.CounterVec
	tasksEnded       *prometheus.CounterVec
	apiRequests      *prometheus.CounterVec
	apiLatency       *prometheus.HistogramVec
	apiWrites        *prometheus.CounterVec
	apiConflicts     *prometheus.CounterVec
	policyTaints     *prometheus.CounterVec
	stateLost        *prometheus.CounterVec
	directlyWaiting  prometheus.Gauge
	directlyWait     prometheus.Histogram
	reportsWaiting   prometheus.GaugeFunc
	karmada          karmadaEvictionInstruments
}

// newHubMetrics makes the instruments; reportWrites is the limiter of the
// writes of reported status, whose waiting writes a gauge shows.
func newHubMetrics(reportWrites *writelimit.Limiter) *hubMetrics {
	m := &hubMetrics{
		registry: prometheus.NewRegistry(),
		detectionDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "flotilla_cluster_detection_delay_seconds",
			Help:    "How late a lease expiry was noticed: the time Ready went Unknown − the last renewal − the grace period.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		scheduleLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flotilla_schedule_duration_seconds",
			Help:    "Time a scheduling attempt took (computing and storing a binding's placement), by result: scheduled or error.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"result"}),
		dispatchLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flotilla_work_dispatch_duration_seconds",
			Help:    "Time from a Work change reaching the hub's informer to its upsert or deletion being written to the agent's stream, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"operation"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_evictions_total",
			Help: "Bindings evicted from a cluster (taint manager and application failover), by reason and the cluster's zone."}, []string{"reason", "zone"}),
		evictionWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flotilla_eviction_queue_wait_seconds",
			Help:    "Time an eviction due was held back (its cluster waiting for admission to eviction, or the --resource-eviction-rate ceiling) before it went ahead, per zone.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14)}, []string{"zone"}),
		clustersAdmitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_clusters_admitted_to_eviction_total",
			Help: "Failed clusters admitted to eviction by their zone's rate (--cluster-eviction-rate), per zone: every workload that does not tolerate their NoExecute taints may then leave them at once."}, []string{"zone"}),
		tasksEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_eviction_tasks_ended_total",
			Help: "Graceful eviction tasks ended by the hub, by outcome: ReplacementHealthy, GracePeriodExpired, ClusterRecovered, NoReplacement, ..."}, []string{"outcome"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
			Help: "Requests of the hub's own clients to its Kubernetes API, by status code, method and host."}, []string{"code", "method", "host"}),
		apiLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_duration_seconds",
			Help:    "Latency of the hub's own clients' requests to its Kubernetes API, by verb and host.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"verb", "host"}),
		apiWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_api_writes_total",
			Help: "Writes of the hub's own clients to its Kubernetes API that succeeded (2xx), by resource as in the URL (resourcebindings, works, clusters, leases, events; other for a path that names none), subresource (status, or empty) and verb: create, update, patch, apply, delete or deletecollection."}, []string{"resource", "subresource", "verb"}),
		apiConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_api_write_conflicts_total",
			Help: "Writes of the hub's own clients to its Kubernetes API answered 409 Conflict (a stale resourceVersion, or a create of an object that exists), with the labels of flotilla_api_writes_total."}, []string{"resource", "subresource", "verb"}),
		policyTaints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_cluster_taint_policy_taints_total",
			Help: "Taints ClusterTaintPolicies added to or removed from clusters, by policy and operation (added or removed)."}, []string{"policy", "operation"}),
		stateLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_eviction_state_not_preserved_total",
			Help: "Evictions whose policy preserves state (statePreservation) that went on without it, by reason: StatusNotCollected (the cluster never reported the workload's status) or RuleFailed (a rule found no valid label value)."}, []string{"reason"}),
		directlyWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flotilla_bindings_waiting_for_old_copy",
			Help: "Bindings whose new copies wait until the copy in a cluster they left with purgeMode Directly is gone (each has a WaitingForOldCopy event)."}),
		directlyWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "flotilla_old_copy_wait_seconds",
			Help:    "Time a binding's new copies waited for the copy in a cluster it left with purgeMode Directly to be gone (confirmed deleted, stopped by fencing, or its cluster deleted).",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 16)}),
		reportsWaiting: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flotilla_report_writes_waiting",
			Help: "Writes of reported status (agents' Work status, bindings' aggregated status, templates' status) waiting in the hub for one of --report-write-slots: while the API server is busy, evictions, placements and Works go first."},
			func() float64 { return float64(reportWrites.Waiting()) }),
		karmada: newKarmadaEvictionInstruments(),
	}
	m.registry.MustRegister(m.instruments()...)
	return m
}

// instruments are the collectors of m's registry.
// (docs/reference/metrics.md is generated from them.)
func (m *hubMetrics) instruments() []prometheus.Collector {
	return []prometheus.Collector{m.detectionDelay, m.scheduleLatency, m.dispatchLatency, m.evictions, m.evictionWait, m.clustersAdmitted, m.tasksEnded, m.apiRequests, m.apiLatency, m.apiWrites, m.apiConflicts,
		m.policyTaints, m.stateLost, m.directlyWaiting, m.directlyWait, m.reportsWaiting, m.karmada.latency, m.karmada.total}
}

// observe hooks the instruments into the parts of the hub that observe.
func (m *hubMetrics) observe(r *registry.Registry, d *dispatch.Dispatcher, s *scheduling.Controller, f *failover.Controller, b *binding.Controller) {
	r.SetDetectionObserver(func(delay time.Duration) { m.detectionDelay.Observe(delay.Seconds()) })
	d.SetLatencyObserver(func(op string, took time.Duration) { m.dispatchLatency.WithLabelValues(op).Observe(took.Seconds()) })
	s.SetLatencyObserver(func(result string, took time.Duration) {
		m.scheduleLatency.WithLabelValues(result).Observe(took.Seconds())
	})
	f.SetObserver(failover.Observer{
		Evicted:   func(reason, zone string) { m.evictions.WithLabelValues(reason, zone).Inc() },
		TaskEnded: func(outcome string) { m.tasksEnded.WithLabelValues(outcome).Inc() },
		EvictionWaited: func(zone string, waited time.Duration) {
			m.evictionWait.WithLabelValues(zone).Observe(waited.Seconds())
		},
		ClusterAdmitted:   func(zone string) { m.clustersAdmitted.WithLabelValues(zone).Inc() },
		EvictionProcessed: m.karmada.observe,
		StateNotPreserved: func(reason string) { m.stateLost.WithLabelValues(reason).Inc() },
	})
	b.SetWaitObserver(binding.WaitObserver{
		Waiting: func(n int) { m.directlyWaiting.Set(float64(n)) },
		Waited:  func(d time.Duration) { m.directlyWait.Observe(d.Seconds()) },
	})
}

// instrument returns a copy of cfg whose requests are counted and timed
// as client-go's request metrics would be, and whose writes are counted
// by resource, subresource and verb. client-go's own hooks
// (k8s.io/client-go/tools/metrics) take one registration per process and
// would count the embedded API server's loopback clients too; wrapping the
// transport counts the hub's clients alone.
func (m *hubMetrics) instrument(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return apiwrites.Transport(instrumentedTransport{next: rt, m: m}, m.countWrite)
	})
	return out
}

type instrumentedTransport struct {
	next http.RoundTripper
	m    *hubMetrics
}

func (t instrumentedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	t.m.apiLatency.WithLabelValues(req.Method, req.URL.Host).Observe(time.Since(start).Seconds())
	code := "<error>" // as client-go labels a request that got no response
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.m.apiRequests.WithLabelValues(code, req.Method, req.URL.Host).Inc()
	return resp, err
}

// countWrite counts a write that succeeded, or met a conflict (an
// apiwrites.Observer); other failures are in rest_client_requests_total.
func (m *hubMetrics) countWrite(w apiwrites.Write, code int) {
	switch apiwrites.ResultOf(code) {
	case apiwrites.Succeeded:
		m.apiWrites.WithLabelValues(w.Resource, w.Subresource, w.Verb).Inc()
	case apiwrites.Conflicted:
		m.apiConflicts.WithLabelValues(w.Resource, w.Subresource, w.Verb).Inc()
	}
}
