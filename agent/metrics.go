package agent

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"

	"github.com/flotilla-io/flotilla/agent/work"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// Reasons a hub session ended, the label of
// flotilla_agent_hub_session_ends_total.
const (
	endShutdown = "shutdown"      // the agent stopped (signal, lost leadership)
	endGoAway   = "goaway"        // the hub asked the agent to go
	endRefused  = "refused"       // the hub answered with an Error
	endRotated  = "rotated"       // reconnecting with a renewed certificate
	endFenced   = "fenced"        // a Work was fenced while connected
	endProtocol = "protocol"      // the hub broke the protocol
	endLost     = "connection"    // the connection failed or went quiet
	endNoLease  = "lease-timeout" // no lease acknowledgement for a whole lease
	endToQUIC   = "moved-to-quic" // a session on the fallback moved to QUIC
)

// metrics are the agent's Prometheus metrics, in a registry of their own
// (served on /metrics). The only process-wide state is client-go's: its
// request metrics can be registered once per process (metrics.Register),
// so every agent of a process shares one pair of collectors, which each
// agent's registry also registers.
type metrics struct {
	registry *prometheus.Registry

	connected      prometheus.Gauge
	sessionStarts  prometheus.Counter
	sessionEnds    *prometheus.CounterVec
	renewalRTT     prometheus.Histogram
	renewalsSent   *prometheus.CounterVec
	renewalRetries prometheus.Counter
	applyDuration  prometheus.Histogram
	applies        prometheus.Counter
	applyFailures  prometheus.Counter
	leader         prometheus.Gauge
	leaderElection prometheus.Gauge
	transport      *prometheus.GaugeVec
	fallbacks      prometheus.Counter
	quicProbes     *prometheus.CounterVec

	works atomic.Pointer[work.Engine] // for the fenced Works gauge
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flotilla_agent_hub_connected",
			Help: "1 while the agent has a hub session the hub welcomed, else 0."}),
		sessionStarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "flotilla_agent_hub_session_starts_total",
			Help: "Hub sessions the hub welcomed."}),
		sessionEnds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_agent_hub_session_ends_total",
			Help: "Welcomed hub sessions that ended, by reason: shutdown, goaway, refused, rotated, fenced, protocol, connection, lease-timeout, moved-to-quic."},
			[]string{"reason"}),
		renewalRTT: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "flotilla_agent_lease_renewal_rtt_seconds",
			Help:    "Round-trip time of acknowledged lease renewals, from sending LeaseRenew to reading its LeaseAck.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		renewalsSent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_agent_lease_renewals_sent_total",
			Help: "Lease renewals sent, by transport: datagram (QUIC datagrams, when the hub supports them) or stream (the control stream)."},
			[]string{"transport"}),
		renewalRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "flotilla_agent_lease_renewal_retries_total",
			Help: "Lease renewals sent between the regular ones, every quarter interval for a lease after a datagram renewal went unacknowledged (counted in renewals_sent too)."}),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "flotilla_agent_work_apply_duration_seconds",
			Help:    "Time to apply one generation of a Work (all its manifests, prune and record), failed attempts included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		applies: prometheus.NewCounter(prometheus.CounterOpts{Name: "flotilla_agent_work_applies_total",
			Help: "Attempts to apply a generation of a Work."}),
		applyFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "flotilla_agent_work_apply_failures_total",
			Help: "Attempts to apply a generation of a Work in which a manifest, the prune or the record failed."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flotilla_agent_leader",
			Help: "1 while this replica runs the agent (it leads, or leader election is off), 0 while it stands by."}),
		leaderElection: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flotilla_agent_leader_election_enabled",
			Help: "1 if the agent runs with --leader-elect."}),
	}
	m.transport = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flotilla_agent_hub_transport",
		Help: "1 for the transport of the welcomed hub session (quic, or websocket: the fallback over TCP), 0 for the other."}, []string{"transport"})
	m.fallbacks = prometheus.NewCounter(prometheus.CounterOpts{Name: "flotilla_agent_transport_fallbacks_total",
		Help: "Connections to the hub made over the WebSocket fallback because QUIC got no answer."})
	m.quicProbes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flotilla_agent_quic_probes_total",
		Help: "Tries of QUIC from a session on the WebSocket fallback, by result: connected (the session moved to QUIC) or failed."}, []string{"result"})
	for _, kind := range transport.Kinds() {
		m.transport.WithLabelValues(string(kind))
	}
	for _, result := range []string{probeConnected, probeFailed} {
		m.quicProbes.WithLabelValues(result)
	}
	for _, transport := range []string{transportDatagram, transportStream} {
		m.renewalsSent.WithLabelValues(transport) // a series from the start
	}
	m.registry.MustRegister(m.collectors()...)
	registerClientGoMetrics()
	return m
}

// collectors are what the agent's registry serves: the agent's own
// metrics, client-go's request metrics, the Go runtime's and the
// process's. (docs/reference/metrics.md is generated from them.)
func (m *metrics) collectors() []prometheus.Collector {
	fenced := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flotilla_agent_fenced_works",
		Help: "Works whose workloads the agent stopped because it was cut off from the hub."}, m.fencedWorks)
	return []prometheus.Collector{m.connected, m.sessionStarts, m.sessionEnds, m.renewalRTT, m.renewalsSent, m.renewalRetries, m.applyDuration,
		m.applies, m.applyFailures, m.leader, m.leaderElection, m.transport, m.fallbacks, m.quicProbes, fenced,
		clientGo.latency, clientGo.results,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{})}
}

// observeApply records one apply attempt of the Work engine.
func (m *metrics) observeApply(took time.Duration, applied bool) {
	m.applies.Inc()
	m.applyDuration.Observe(took.Seconds())
	if !applied {
		m.applyFailures.Inc()
	}
}

// watchWorks makes engine the one whose fenced Works are counted.
func (m *metrics) watchWorks(engine *work.Engine) { m.works.Store(engine) }

func (m *metrics) fencedWorks() float64 {
	engine := m.works.Load()
	if engine == nil {
		return 0
	}
	n := 0
	for _, ref := range engine.Inventory() {
		if ref.Fenced {
			n++
		}
	}
	return float64(n)
}

// Results of a QUIC probe, the label of flotilla_agent_quic_probes_total.
const (
	probeConnected = "connected"
	probeFailed    = "failed"
)

// dialed counts a connection made, over the fallback or not.
func (m *metrics) dialed(kind transport.Kind, fellBack bool) {
	if fellBack && kind == transport.WebSocket {
		m.fallbacks.Inc()
	}
}

// sessionStarted and sessionEnded follow a welcomed session.
func (m *metrics) sessionStarted(kind transport.Kind) {
	m.sessionStarts.Inc()
	m.connected.Set(1)
	m.transport.WithLabelValues(string(kind)).Set(1)
}

func (m *metrics) sessionEnded(err error) {
	m.connected.Set(0)
	for _, kind := range transport.Kinds() {
		m.transport.WithLabelValues(string(kind)).Set(0)
	}
	m.sessionEnds.WithLabelValues(endReason(err)).Inc()
}

// endReason classifies what ended a welcomed session (nil: the agent
// stopped).
func endReason(err error) string {
	var goAway *goAwayError
	var peerErr *protocol.Error
	switch {
	case err == nil:
		return endShutdown
	case errors.Is(err, errRotated):
		return endRotated
	case errors.As(err, new(*quicBackError)):
		return endToQUIC
	case errors.Is(err, errFencedWhileConnected):
		return endFenced
	case errors.Is(err, errNoLeaseAck):
		return endNoLease
	case errors.As(err, &goAway):
		return endGoAway
	case errors.Is(err, errProtocol):
		return endProtocol
	case errors.As(err, &peerErr):
		return endRefused
	}
	return endLost
}

// clientGo holds client-go's request metrics, registered with client-go
// once per process and shared by every agent's registry.
var clientGo = struct {
	latency *prometheus.HistogramVec
	results *prometheus.CounterVec
}{
	latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_duration_seconds",
		Help:    "Latency of the agent's requests to the member cluster's API server, by verb and host.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"verb", "host"}),
	results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
		Help: "The agent's requests to the member cluster's API server, by status code, method and host."},
		[]string{"code", "method", "host"}),
}

var registerClientGo sync.Once

// registerClientGoMetrics hands client-go the adapters; client-go takes
// the first registration of a process only.
func registerClientGoMetrics() {
	registerClientGo.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency: latencyAdapter{clientGo.latency},
			RequestResult:  resultAdapter{clientGo.results},
		})
	})
}

type latencyAdapter struct{ h *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	a.h.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type resultAdapter struct{ c *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}
