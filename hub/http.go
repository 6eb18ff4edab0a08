package hub

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/flotilla-io/flotilla/hub/agentserver"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/dashboard"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/hub/registry"
	"github.com/flotilla-io/flotilla/hub/replicas"
	"github.com/flotilla-io/flotilla/hub/stats"
	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/store"
)

// httpServer serves the hub's own operational endpoints on --http-addr:
// the dashboard, health, counters and metrics. Flotilla's objects are
// served by the Kubernetes API on --api-addr; profiles, when enabled, on
// an address of their own (internal/profiling).
type httpServer struct {
	registry *registry.Registry
	agents   *agentserver.Front
	failover *failover.Controller
	guard    *store.Guard
	metrics  *hubMetrics
	// events is the hub's event recorder, for its dropped events.
	events controller.DroppingRecorder
	// probes are /readyz's checks.
	probes []probe
	// dashboard serves the web page at "/" and its API under /dashboard/.
	dashboard http.Handler
	// board is the dashboard itself, for its counters.
	board *dashboard.Dashboard
	// sessions is the replica's gossip, if any.
	sessions *replicas.Gossip
	// httpConns counts the connections to these endpoints.
	httpConns *netlimit.Listener
}

func (a *httpServer) handler() http.Handler {
	mux := http.NewServeMux()
	handleHealth(mux, a.probes)
	mux.HandleFunc("GET /debug/stats", a.stats)
	mux.Handle("GET /metrics", a.metricsHandler())
	if a.dashboard != nil {
		mux.Handle("GET /{$}", a.dashboard)
		mux.Handle("/dashboard/", a.dashboard)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, r.URL.Path+" not found: Flotilla's objects are served by the hub's Kubernetes API (--api-addr, DATA/admin.kubeconfig)", http.StatusNotFound)
	})
	return mux
}

// handleHealth serves /healthz, /livez and /readyz (with probes) on mux,
// alike on a leading and a standing-by replica. /healthz stays what it was
// (the process serves), for probes and scripts written before /livez and
// /readyz.
func handleHealth(mux *http.ServeMux, probes []probe) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /livez", livez)
	mux.HandleFunc("GET /readyz", readyz(probes))
}

func (a *httpServer) stats(w http.ResponseWriter, _ *http.Request) {
	snap, st := a.registry.Snapshot(), a.registry.Counters()
	sent := a.agents.Dispatcher().Counts()
	writeJSON(w, http.StatusOK, stats.Stats{
		WorksSent: sent.Upserts, WorkDeletesSent: sent.Deletes, Failover: a.failover.Stats(),
		Clusters: snap.Clusters, ConnectedAgents: a.agents.Snapshot().Sessions,
		Renewals: st.Renewals, StatusReports: st.StatusReports,
		StoreWrites: st.StoreWrites, StoreConflicts: st.StoreConflicts,
		Transitions: st.Transitions, UnknownTransitions: st.UnknownTransitions, Events: st.EventsRecorded,
		RejectedAgentConn: a.agents.Counters().Rejected,
		UnstoredClusters:  snap.UnstoredClusters, UnstoredHealth: snap.UnstoredHealth, UnstoredLeases: snap.UnstoredLeases,
	})
}

// signIns are the dashboard's sign-in counts (none without a dashboard).
func (a *httpServer) signIns() dashboard.SignInStats {
	if a.board == nil {
		return dashboard.SignInStats{}
	}
	return a.board.SignInStats()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
