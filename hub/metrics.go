package hub

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flotilla-io/flotilla/eviction"
)

// zoneModes are the partition protection modes a zone can be in, each a
// series of flotilla_zone_mode.
var zoneModes = []eviction.Mode{eviction.ModeNormal, eviction.ModePartialDisruption, eviction.ModeFullDisruption, eviction.ModeIsolated}

// metricsHandler serves the hub's counters in the Prometheus format: the
// same figures as /debug/stats, read only when scraped.
func (a *httpServer) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	counter := func(name, help string, read func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, read))
	}
	gauge := func(name, help string, read func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, read))
	}
	counter("flotilla_lease_renewals_total", "Lease renewals received from agents.", func() float64 { return float64(a.registry.stats.renewals.Load()) })
	counter("flotilla_status_reports_total", "Cluster status reports received from agents.", func() float64 { return float64(a.registry.stats.statusReports.Load()) })
	counter("flotilla_ready_transitions_total", "Changes of a cluster's Ready condition.", func() float64 { return float64(a.registry.stats.transitions.Load()) })
	counter("flotilla_works_sent_total", "Work upserts sent to agents.", func() float64 { return float64(a.agents.dispatch.Counts().Upserts) })
	counter("flotilla_work_deletes_sent_total", "Work deletions sent to agents.", func() float64 { return float64(a.agents.dispatch.Counts().Deletes) })
	counter("flotilla_evictions_total", "Bindings evicted from a cluster (taint manager and application failover).", func() float64 { return float64(a.failover.Stats().Evictions) })
	counter("flotilla_eviction_tasks_ended_total", "Graceful eviction tasks ended by the hub.", func() float64 { return float64(a.failover.Stats().TasksEnded) })
	counter("flotilla_sessions_replaced_total", "Agent sessions ended by a newer session of their cluster (one session per cluster).", func() float64 { return float64(a.agents.replaced.Load()) })
	counter("flotilla_lease_renewals_limited_total", "Lease renewals beyond a session's rate: acknowledged, not stamped again.", func() float64 { return float64(a.agents.limits.limitedRenewals.Load()) })
	counter("flotilla_status_reports_coalesced_total", "Cluster status reports replaced by a newer one before they were applied (beyond a session's rate).", func() float64 { return float64(a.agents.limits.coalescedReports.Load()) })
	counter("flotilla_work_reports_coalesced_total", "Work status reports replaced by a newer one of the same Work before they were written.", func() float64 { return float64(a.agents.dispatch.Limits().Coalesced) })
	counter("flotilla_work_reports_truncated_total", "Work status reports stored in part (too many manifests or bytes).", func() float64 { return float64(a.agents.dispatch.Limits().Truncated) })
	counter("flotilla_events_suppressed_total", "Events about clusters left out beyond the bound per cluster and reason.", func() float64 { return float64(a.registry.stats.eventsSuppressed.Load()) })
	counter("flotilla_work_reports_dropped_total", "Work status reports not written because the store was too full.", func() float64 { return float64(a.agents.dispatch.Limits().Dropped) })
	gauge("flotilla_store_db_size_bytes", "Size of etcd's database (the largest member), as of the store guard's last check.", func() float64 { return float64(a.guard.Stats().Size) })
	gauge("flotilla_store_db_in_use_bytes", "Bytes of etcd's database in use (what defragmentation would leave).", func() float64 { return float64(a.guard.Stats().InUse) })
	gauge("flotilla_store_quota_bytes", "etcd's backend quota the store guard works with.", func() float64 { return float64(a.guard.Stats().Quota) })
	gauge("flotilla_store_refusing_agent_writes", "1 while agent-driven writes are refused: the store is above the threshold, or etcd raised NOSPACE.", func() float64 { return b2f(a.guard.Stats().Refusing) })
	gauge("flotilla_store_nospace_alarm", "1 while etcd's NOSPACE alarm is raised.", func() float64 { return b2f(a.guard.Stats().NoSpace) })
	counter("flotilla_store_agent_writes_refused_total", "Agent-driven writes (Work reports, events about agents) refused because the store was too full.", func() float64 { return float64(a.guard.Stats().Refused) })
	counter("flotilla_store_defragmentations_total", "Defragmentations the store guard ran.", func() float64 { return float64(a.guard.Stats().Defrags) })
	counter("flotilla_store_alarms_disarmed_total", "NOSPACE alarms the store guard disarmed after the data fit again.", func() float64 { return float64(a.guard.Stats().Disarms) })
	counter("flotilla_join_attempts_limited_total", "Join connections refused because their source address tried too often.", func() float64 { return float64(a.agents.joinLimit.limitedCount()) })
	counter("flotilla_served_apis_coalesced_total", "Lists of served APIs replaced by a newer one before they were stored (beyond a cluster's pace).", func() float64 { return float64(a.registry.stats.apisCoalesced.Load()) })
	gauge("flotilla_connected_agents", "Agents connected to this hub.", func() float64 {
		a.agents.mu.Lock()
		defer a.agents.mu.Unlock()
		return float64(len(a.agents.sessions))
	})
	reg.MustRegister(zoneCollector{a})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// zoneCollector exports each zone's partition protection mode: one series
// per zone and mode, 1 for the zone's current mode, 0 for the others.
type zoneCollector struct{ a *httpServer }

var zoneModeDesc = prometheus.NewDesc("flotilla_zone_mode", "Partition protection mode of each zone (1 for the current one).", []string{"zone", "mode"}, nil)

func (zoneCollector) Describe(ch chan<- *prometheus.Desc) { ch <- zoneModeDesc }

func (z zoneCollector) Collect(ch chan<- prometheus.Metric) {
	for zone, mode := range z.a.failover.Stats().ZoneModes {
		for _, m := range zoneModes {
			v := 0.0
			if string(m) == mode {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(zoneModeDesc, prometheus.GaugeValue, v, zone, string(m))
		}
	}
}
