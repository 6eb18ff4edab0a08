package hub

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"

	// Sets client-go's work queue metrics provider (into legacyregistry),
	// as kube-controller-manager does; the embedded API server imports it
	// too, and client-go takes one provider per process.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/agentserver"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/internal/version"
)

// zoneModes are the partition protection modes a zone can be in, each a
// series of flotilla_zone_mode.
var zoneModes = []eviction.Mode{eviction.ModeNormal, eviction.ModePartialDisruption, eviction.ModeFullDisruption, eviction.ModeIsolated}

// metricsHandler serves the hub's metrics in the Prometheus format: the
// hub's own instruments and counters (read only when scraped), a series
// per cluster from the registry's memory, the Go runtime and process, and
// the process's client-go work queues.
func (a *httpServer) metricsHandler() http.Handler {
	reg := a.metrics.registry
	reg.MustRegister(a.collectors()...)
	return promhttp.HandlerFor(prometheus.Gatherers{reg, workqueueGatherer{}}, promhttp.HandlerOpts{})
}

// collectors are the hub's metrics beside its instruments (hubMetrics):
// its counters and gauges, build information, the zones' modes, a series
// per cluster, the Go runtime and the process. Making them reads none of
// a's parts: the metrics read them when collected.
// (docs/reference/metrics.md is generated from them.)
func (a *httpServer) collectors() []prometheus.Collector {
	var out []prometheus.Collector
	for _, m := range a.funcMetrics() {
		out = append(out, m.collector())
	}
	return append(out, zoneCollector{a.failover}, karmadaQueueCollector{a.failover}, connCollector{a.listenerStats}, a.registry.Collector(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// funcMetric is a counter or gauge of the hub whose value is read from
// its parts when it is collected.
type funcMetric struct {
	opts prometheus.Opts
	kind prometheus.ValueType // CounterValue or GaugeValue
	read func() float64
}

func (m funcMetric) collector() prometheus.Collector {
	if m.kind == prometheus.CounterValue {
		return prometheus.NewCounterFunc(prometheus.CounterOpts(m.opts), m.read)
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts(m.opts), m.read)
}

// funcMetrics lists the hub's counters and gauges read from its parts.
func (a *httpServer) funcMetrics() []funcMetric {
	var out []funcMetric
	counter := func(name, help string, read func() float64) {
		out = append(out, funcMetric{opts: prometheus.Opts{Name: name, Help: help}, kind: prometheus.CounterValue, read: read})
	}
	gauge := func(name, help string, read func() float64) {
		out = append(out, funcMetric{opts: prometheus.Opts{Name: name, Help: help}, kind: prometheus.GaugeValue, read: read})
	}
	counter("flotilla_lease_renewals_total", "Lease renewals received from agents.", func() float64 { return float64(a.registry.Counters().Renewals) })
	counter("flotilla_status_reports_total", "Cluster status reports received from agents.", func() float64 { return float64(a.registry.Counters().StatusReports) })
	counter("flotilla_ready_transitions_total", "Changes of a cluster's Ready condition.", func() float64 { return float64(a.registry.Counters().Transitions) })
	counter("flotilla_works_sent_total", "Work upserts sent to agents.", func() float64 { return float64(a.agents.Dispatcher().Counts().Upserts) })
	counter("flotilla_work_deletes_sent_total", "Work deletions sent to agents.", func() float64 { return float64(a.agents.Dispatcher().Counts().Deletes) })
	counter("flotilla_sessions_replaced_total", "Agent sessions ended by a newer session of their cluster (one session per cluster).", func() float64 { return float64(a.agents.Counters().Replaced) })
	counter("flotilla_agent_connections_rejected_total", "Agent connections refused: identity, hello or frames.", func() float64 { return float64(a.agents.Counters().Rejected) })
	counter("flotilla_lease_renewal_datagrams_total", "Lease renewals received as QUIC datagrams (the rest came on control streams).", func() float64 { return float64(a.agents.Counters().RenewalDatagrams) })
	counter("flotilla_lease_renewals_limited_total", "Lease renewals beyond a session's rate: acknowledged, not stamped again.", func() float64 { return float64(a.agents.Counters().LimitedRenewals) })
	counter("flotilla_status_reports_coalesced_total", "Cluster status reports replaced by a newer one before they were applied (beyond a session's rate).", func() float64 { return float64(a.agents.Counters().CoalescedReports) })
	counter("flotilla_work_reports_coalesced_total", "Work reports (status, or the deletion of a Work the hub wants held) replaced by a newer one of the same Work before they were written.", func() float64 { return float64(a.agents.Dispatcher().Limits().Coalesced) })
	counter("flotilla_work_reports_truncated_total", "Work status reports stored in part (too many manifests or bytes).", func() float64 { return float64(a.agents.Dispatcher().Limits().Truncated) })
	counter("flotilla_events_suppressed_total", "Events about clusters left out beyond the bound per cluster and reason.", func() float64 { return float64(a.registry.Counters().EventsSuppressed) })
	counter("flotilla_events_dropped_total", "Events not recorded because too many event writes were waiting for the API server.", func() float64 {
		if a.events == nil {
			return 0
		}
		return float64(a.events.Dropped())
	})
	counter("flotilla_work_reports_dropped_total", "Work status reports not written because the store was too full.", func() float64 { return float64(a.agents.Dispatcher().Limits().Dropped) })
	counter("flotilla_work_deleted_unrequested_total", "WorkDeleted reports for Works the hub had not asked the agent to delete: ignored, or for a Work the agent holds, paced like status reports and answered by sending the Work again.", func() float64 {
		return float64(a.agents.Dispatcher().Limits().UnrequestedDeletes)
	})
	counter("flotilla_dashboard_signin_failures_total", "Dashboard sign-ins whose token the hub's API refused (each cost a TokenReview).", func() float64 {
		return float64(a.signIns().Failed)
	})
	counter("flotilla_dashboard_signins_limited_total", "Dashboard sign-ins refused with 429, before any TokenReview: their source address (IPv4, or IPv6 /64) failed too often.", func() float64 {
		return float64(a.signIns().Limited)
	})
	counter("flotilla_registry_store_writes_total", "Cluster and lease objects the registry wrote to the API server.", func() float64 { return float64(a.registry.Counters().StoreWrites) })
	counter("flotilla_registry_store_conflicts_total", "Registry writes that met a conflict and were retried.", func() float64 { return float64(a.registry.Counters().StoreConflicts) })
	gauge("flotilla_store_db_size_bytes", "Size of etcd's database (the largest member), as of the store guard's last check.", func() float64 { return float64(a.guard.Stats().Size) })
	gauge("flotilla_store_db_in_use_bytes", "Bytes of etcd's database in use (what defragmentation would leave).", func() float64 { return float64(a.guard.Stats().InUse) })
	gauge("flotilla_store_quota_bytes", "etcd's backend quota the store guard works with.", func() float64 { return float64(a.guard.Stats().Quota) })
	gauge("flotilla_store_refusing_agent_writes", "1 while agent-driven writes are refused: the store is above the threshold, or etcd raised NOSPACE.", func() float64 { return b2f(a.guard.Stats().Refusing) })
	gauge("flotilla_store_nospace_alarm", "1 while etcd's NOSPACE alarm is raised.", func() float64 { return b2f(a.guard.Stats().NoSpace) })
	counter("flotilla_store_agent_writes_refused_total", "Agent-driven writes (Work reports, events about agents) refused because the store was too full.", func() float64 { return float64(a.guard.Stats().Refused) })
	counter("flotilla_store_defragmentations_total", "Defragmentations the store guard ran.", func() float64 { return float64(a.guard.Stats().Defrags) })
	counter("flotilla_store_alarms_disarmed_total", "NOSPACE alarms the store guard disarmed after the data fit again.", func() float64 { return float64(a.guard.Stats().Disarms) })
	counter("flotilla_quic_handshakes_refused_total", "Agents' first QUIC packets refused because --max-handshakes were in flight (a dial may send two; the agent dials again in 1-3 s).", func() float64 { return float64(a.agents.Counters().HandshakesRefused) })
	gauge("flotilla_agent_handshakes_in_flight", "Agents' handshakes under way, QUIC and TLS on TCP (the WebSocket fallback) together, bounded by --max-handshakes.", func() float64 { return float64(a.agents.Snapshot().HandshakesInFlight) })
	counter("flotilla_quic_handshakes_source_limited_total", "Agents' first QUIC packets refused because their source address (an IPv6 /64), validated by a Retry, had --max-handshakes-per-source in flight.", func() float64 { return float64(a.agents.Counters().HandshakesSourceLimited) })
	counter("flotilla_quic_retries_total", "QUIC Initial packets answered with a Retry, so that their source address proves itself first: --quic-retry-threshold handshakes were in flight, or the source had --max-handshakes-per-source unvalidated ones. Spoofed packets never answer it.", func() float64 { return float64(a.agents.Counters().Retries) })
	counter("flotilla_quic_handshakes_abandoned_total", "QUIC handshakes that ended before the hub accepted their connection: failed, or silent beyond --quic-handshake-timeout (an Initial packet nobody followed up).", func() float64 { return float64(a.agents.Counters().HandshakesAbandoned) })
	counter("flotilla_join_attempts_limited_total", "Join connections refused because their source address (an IPv6 /64) tried too often: 30 at once, then one every 2 s.", func() float64 { return float64(a.agents.Counters().JoinsLimited) })
	counter("flotilla_joins_failed_total", "Joins refused because their bootstrap token or certificate request was refused (they spend the hub's budget of failed joins: 60, then one a second).", func() float64 { return float64(a.agents.Counters().Joins.Failed) })
	counter("flotilla_joins_token_locked_total", "Joins refused unread because their token ID failed 5 joins within 10 min (locked for 10 min).", func() float64 { return float64(a.agents.Counters().Joins.TokenLocked) })
	counter("flotilla_joins_budget_spent_total", "Joins refused unread because the hub's budget of failed joins was spent.", func() float64 { return float64(a.agents.Counters().Joins.BudgetSpent) })
	counter("flotilla_agent_csrs_not_created_by_hub_total", "Certificate requests for signer flotilla.io/agent failed because someone other than the hub created them (admission refuses them first; these got past it).", func() float64 { return float64(a.agents.Counters().Signer.NotCreatedByHub) })
	counter("flotilla_agent_certificates_hub_ca_total", "Agent certificates signed by the hub CA, not the agent CA, for agents from before the agent CA (they also authenticate to the hub's Kubernetes API): upgrade those agents.", func() float64 { return float64(a.agents.Counters().Signer.HubCAIssued) })
	counter("flotilla_joins_metadata_ignored_total", "Joins whose agent asked for provider, region, zone or labels that only the token or an operator sets (ignored; an AgentMetadataIgnored event on the Cluster says what).", func() float64 { return float64(a.agents.Counters().Signer.MetadataIgnored) })
	counter("flotilla_served_apis_coalesced_total", "Lists of served APIs replaced by a newer one before they were stored (beyond a cluster's pace).", func() float64 { return float64(a.registry.Counters().APIsCoalesced) })
	counter("flotilla_status_changes_coalesced_total", "Status reports whose change to the Cluster was replaced by a newer report's before its paced write (a burst of 4, then one per 10 s per cluster).", func() float64 { return float64(a.registry.Counters().ReportsCoalesced) })
	counter("flotilla_served_apis_refused_total", "Lists of served APIs refused whole: larger than a Cluster stores (512 KiB).", func() float64 { return float64(a.registry.Counters().APIsRefused) })
	counter("flotilla_served_api_entries_dropped_total", "Served API entries dropped because Kubernetes would not allow their names.", func() float64 { return float64(a.registry.Counters().APIEntriesDropped) })
	if a.sessions != nil {
		gauge("flotilla_hub_gossip_members", "Hub replicas alive in the gossip group, this one included.", func() float64 { return float64(a.sessions.Members()) })
		counter("flotilla_hub_session_tables_sent_total", "Session tables this leader wrote to a standby replica's stream (not acknowledged).", func() float64 { return float64(a.sessions.Counters().TablesSent) })
		counter("flotilla_hub_session_tables_failed_total", "Session tables this leader could not send: to a replica it counted alive, or over 20 MB.", func() float64 { return float64(a.sessions.Counters().TablesFailed) })
		counter("flotilla_hub_relay_batches_received_total", "Batches of agent sessions other replicas relayed to this leader.", func() float64 { return float64(a.sessions.Counters().BatchesReceived) })
		counter("flotilla_hub_relay_batches_dropped_total", "Relayed batches dropped because the registry fell behind (the sender's next full batch makes good).", func() float64 { return float64(a.sessions.Counters().BatchesDropped) })
		counter("flotilla_hub_replicas_lost_total", "Replicas serving agents this leader counted lost (silent for 2.5 s, dead or gone): their clusters got a grace to reconnect.", func() float64 { return float64(a.sessions.Counters().ReplicasLost) })
		gauge("flotilla_hub_relayed_sessions", "Agent sessions served by other replicas and relayed to this leader.", func() float64 { return float64(a.registry.RelayedSessions()) })
	}
	gauge("flotilla_connected_agents", "Agents connected to this hub.", func() float64 { return float64(a.agents.Snapshot().Sessions) })
	gauge("flotilla_connected_agents_websocket", "Agents connected over the WebSocket fallback (TLS on TCP): QUIC got no answer on their way, UDP is likely blocked (counted in flotilla_connected_agents too).", func() float64 {
		return float64(a.agents.Snapshot().WebSocketSessions)
	})
	v := version.Get()
	out = append(out, funcMetric{opts: prometheus.Opts{Name: "flotilla_build_info",
		Help:        "Always 1: the hub's version, the Kubernetes release it embeds and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": v.Flotilla, "kubernetes": v.Kubernetes, "goversion": v.GoVersion}},
		kind: prometheus.GaugeValue, read: func() float64 { return 1 }})
	return out
}

// workqueueGatherer passes on the work queue metrics of the process:
// client-go reports them to the provider Kubernetes' component-base sets
// (the embedded kube-apiserver brings it in, registering into its legacy
// registry), one series set per named queue, the hub controllers' among
// them ("scheduling", "failover", ...).
type workqueueGatherer struct{}

func (workqueueGatherer) Gather() ([]*dto.MetricFamily, error) {
	all, err := legacyregistry.DefaultGatherer.Gather()
	out := all[:0]
	for _, mf := range all {
		if strings.HasPrefix(mf.GetName(), "workqueue_") {
			out = append(out, mf)
		}
	}
	return out, err
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// listenerStats are the connection counts of the hub's listeners on TCP
// by name: http, and websocket while the agents' fallback listens.
func (a *httpServer) listenerStats() map[string]netlimit.Stats {
	out := map[string]netlimit.Stats{}
	if a.httpConns != nil {
		out["http"] = a.httpConns.Stats()
	}
	if a.agents != nil && a.agents.WebSocketAddr() != agentserver.WebSocketOff {
		out["websocket"] = a.agents.Counters().WebSocketConns
	}
	return out
}

// connCollector exports the connection counts of the hub's listeners on
// TCP, a series per listener.
type connCollector struct {
	listeners func() map[string]netlimit.Stats
}

var (
	tcpOpenDesc = prometheus.NewDesc("flotilla_tcp_connections_open",
		"Connections a listener of the hub holds and counts against its caps, per listener: http (--http-addr), websocket (the agents' fallback, until their upgrade).", []string{"listener"}, nil)
	tcpRefusedDesc = prometheus.NewDesc("flotilla_tcp_connections_refused_total",
		"Connections closed as soon as accepted because their source address (an IPv6 /64) held the listener's --http-max-conns-per-source or --websocket-max-conns-per-source.", []string{"listener"}, nil)
	tcpWaitedDesc = prometheus.NewDesc("flotilla_tcp_connections_waited_total",
		"Times a listener held its --http-max-conns or --websocket-max-conns and new connections waited in the kernel's accept queue.", []string{"listener"}, nil)
	tcpTimedOutDesc = prometheus.NewDesc("flotilla_tcp_connections_timed_out_total",
		"Connections the hub closed after a timeout: a TLS handshake or request headers beyond --tcp-read-header-timeout, or idle beyond --tcp-idle-timeout.", []string{"listener"}, nil)
)

func (connCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tcpOpenDesc, tcpRefusedDesc, tcpWaitedDesc, tcpTimedOutDesc} {
		ch <- d
	}
}

func (c connCollector) Collect(ch chan<- prometheus.Metric) {
	for name, st := range c.listeners() {
		ch <- prometheus.MustNewConstMetric(tcpOpenDesc, prometheus.GaugeValue, float64(st.Open), name)
		ch <- prometheus.MustNewConstMetric(tcpRefusedDesc, prometheus.CounterValue, float64(st.Refused), name)
		ch <- prometheus.MustNewConstMetric(tcpWaitedDesc, prometheus.CounterValue, float64(st.Waited), name)
		ch <- prometheus.MustNewConstMetric(tcpTimedOutDesc, prometheus.CounterValue, float64(st.TimedOut), name)
	}
}

// zoneCollector exports each zone's partition protection mode (one series
// per zone and mode, 1 for the zone's current mode, 0 for the others), the
// evictions its rate holds back, the failed clusters waiting for admission
// to eviction, and the evictions deferred for want of a
// place to go.
type zoneCollector struct{ zones zoneSource }

// zoneSource is what zoneCollector reads: the failover controller.
type zoneSource interface {
	EvictionsWaiting() map[string]int
	ClustersWaiting() map[string]int
	EvictionsDeferred() int
	Stats() failover.Stats
}

var (
	zoneModeDesc          = prometheus.NewDesc("flotilla_zone_mode", "Partition protection mode of each zone (1 for the current one).", []string{"zone", "mode"}, nil)
	evictionsWaitingDesc  = prometheus.NewDesc("flotilla_eviction_queue_depth", "Evictions due but held back (the eviction queue), per zone: their cluster waits for admission to eviction (flotilla_clusters_waiting_for_eviction), or the --resource-eviction-rate ceiling holds them.", []string{"zone"}, nil)
	clustersWaitingDesc   = prometheus.NewDesc("flotilla_clusters_waiting_for_eviction", "Failed clusters waiting for their zone to admit them to eviction (--cluster-eviction-rate), per zone; each admitted one has an EvictionAdmitted event.", []string{"zone"}, nil)
	evictionsDeferredDesc = prometheus.NewDesc("flotilla_evictions_deferred", "Evictions PreferNoExecute taints ask for that wait now for a healthy cluster with room (each has an EvictionDeferred event).", nil, nil)
)

func (zoneCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- zoneModeDesc
	ch <- evictionsWaitingDesc
	ch <- clustersWaitingDesc
	ch <- evictionsDeferredDesc
}

func (z zoneCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(evictionsDeferredDesc, prometheus.GaugeValue, float64(z.zones.EvictionsDeferred()))
	waiting := z.zones.EvictionsWaiting()
	for zone, mode := range z.zones.Stats().ZoneModes {
		for _, m := range zoneModes {
			v := 0.0
			if string(m) == mode {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(zoneModeDesc, prometheus.GaugeValue, v, zone, string(m))
		}
		ch <- prometheus.MustNewConstMetric(evictionsWaitingDesc, prometheus.GaugeValue, float64(waiting[zone]), zone)
		delete(waiting, zone)
	}
	for zone, n := range waiting { // a zone gone while its evictions wait
		ch <- prometheus.MustNewConstMetric(evictionsWaitingDesc, prometheus.GaugeValue, float64(n), zone)
	}
	for zone, n := range z.zones.ClustersWaiting() {
		ch <- prometheus.MustNewConstMetric(clustersWaitingDesc, prometheus.GaugeValue, float64(n), zone)
	}
}
