package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/hub/objects"
)

// maxRequestBody bounds API request bodies.
const maxRequestBody = 1 << 20

// API paths, Kubernetes style.
const (
	clustersPath = "/apis/" + v1alpha1.GroupName + "/" + v1alpha1.Version + "/clusters"
	leasesPath   = "/apis/coordination.k8s.io/v1/namespaces/" + v1alpha1.LeaseNamespace + "/leases"
	eventsPath   = "/api/v1/events"
)

// apiServer serves the hub's objects as JSON.
type apiServer struct {
	registry *Registry
	kube     kubernetes.Interface
	recorder controller.Recorder
	objects  *objects.Objects
	agents   *agentServer
	failover *failover.Controller
	logger   *slog.Logger
}

func (a *apiServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+clustersPath, a.listClusters)
	mux.HandleFunc("GET "+clustersPath+"/{name}", a.getCluster)
	mux.HandleFunc("PUT "+clustersPath+"/{name}", a.putCluster)
	mux.HandleFunc("GET "+leasesPath, a.listLeases)
	mux.HandleFunc("GET "+leasesPath+"/{name}", a.getLease)
	mux.HandleFunc("GET "+eventsPath, a.listEvents)
	a.objectRoutes(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /debug/stats", a.stats)
	mux.Handle("GET /metrics", a.metricsHandler())
	// Profiles, for operators chasing cost (the API listens on loopback by
	// default).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: "path"}, r.Method+" "+r.URL.Path))
	})
	return mux
}

func (a *apiServer) listClusters(w http.ResponseWriter, _ *http.Request) {
	list := v1alpha1.ClusterList{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindClusterList), Items: []v1alpha1.Cluster{}}
	for _, c := range a.registry.ListClusters() {
		list.Items = append(list.Items, *c)
	}
	writeJSON(w, http.StatusOK, list)
}

func (a *apiServer) getCluster(w http.ResponseWriter, r *http.Request) {
	c, err := a.registry.GetCluster(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (a *apiServer) putCluster(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var c v1alpha1.Cluster
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("cluster %q: body over %d bytes", name, maxRequestBody)))
			return
		}
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("decode cluster %q: %v", name, err)))
		return
	}
	if dec.More() {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("cluster %q: more than one JSON object in the body", name)))
		return
	}
	if c.Name != name {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("metadata.name %q does not match the URL's %q", c.Name, name)))
		return
	}
	updated, err := a.registry.UpdateCluster(r.Context(), &c)
	if err != nil {
		writeError(w, err)
		return
	}
	a.logger.Info("cluster updated through the API", "cluster", name, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, updated)
}

func (a *apiServer) listLeases(w http.ResponseWriter, _ *http.Request) {
	list := coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "LeaseList"}, Items: []coordinationv1.Lease{}}
	for _, l := range a.registry.ListLeases() {
		list.Items = append(list.Items, *l)
	}
	writeJSON(w, http.StatusOK, list)
}

func (a *apiServer) getLease(w http.ResponseWriter, r *http.Request) {
	l, err := a.registry.GetLease(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// listEvents filters by involvedObject.kind and involvedObject.name, given
// as query parameters or as a Kubernetes fieldSelector.
func (a *apiServer) listEvents(w http.ResponseWriter, r *http.Request) {
	filter := map[string]string{}
	for _, key := range []string{"involvedObject.kind", "involvedObject.name", "involvedObject.namespace"} {
		if v := r.URL.Query().Get(key); v != "" {
			filter[key] = v
		}
	}
	for _, term := range strings.Split(r.URL.Query().Get("fieldSelector"), ",") {
		if key, value, ok := strings.Cut(term, "="); ok {
			filter[key] = value
		}
	}
	selector := fields.Set{}
	for _, key := range []string{"involvedObject.kind", "involvedObject.name", "involvedObject.namespace"} {
		if v, ok := filter[key]; ok {
			selector[key] = v
		}
	}
	list, err := a.kube.CoreV1().Events(metav1.NamespaceAll).List(r.Context(), metav1.ListOptions{FieldSelector: selector.String()})
	if err != nil {
		writeError(w, err)
		return
	}
	list.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}
	sort.SliceStable(list.Items, func(i, j int) bool { return firstSeen(&list.Items[i]).Before(firstSeen(&list.Items[j])) })
	writeJSON(w, http.StatusOK, list)
}

// firstSeen is when an event first happened, from whichever field its
// recorder set.
func firstSeen(ev *corev1.Event) time.Time {
	if !ev.EventTime.IsZero() {
		return ev.EventTime.Time
	}
	return ev.FirstTimestamp.Time
}

// Stats are the hub's counters, for the load tool and operators.
type Stats struct {
	Clusters        int   `json:"clusters"`
	ConnectedAgents int   `json:"connectedAgents"`
	Renewals        int64 `json:"renewals"`
	StatusReports   int64 `json:"statusReports"`
	// StoreWrites counts the registry's writes of clusters and leases to
	// the API server; StoreConflicts the writes it had to re-read for.
	StoreWrites       int64 `json:"storeWrites"`
	StoreConflicts    int64 `json:"storeConflicts"`
	Transitions       int64 `json:"readyTransitions"`
	Events            int64 `json:"events"`
	RejectedAgentConn int64 `json:"rejectedAgentConnections"`
	// UnstoredClusters and UnstoredLeases are changes held in memory, not
	// yet in the store: what a hub crash right now would lose.
	UnstoredClusters int `json:"unstoredClusters"`
	UnstoredLeases   int `json:"unstoredLeases"`
	// WorksSent and WorkDeletesSent count Work upserts and deletions sent
	// to agents.
	WorksSent       int64 `json:"worksSent"`
	WorkDeletesSent int64 `json:"workDeletesSent"`
	// Failover: evictions made, eviction tasks ended and each zone's
	// partition protection mode (Normal, PartialDisruption,
	// FullDisruption, Isolated).
	Failover failover.Stats `json:"failover"`
}

func (a *apiServer) stats(w http.ResponseWriter, _ *http.Request) {
	a.registry.mu.Lock()
	clusters := len(a.registry.entries)
	unstoredClusters := len(a.registry.dirty) + a.registry.writing
	unstoredLeases := len(a.registry.dirtyLeas)
	a.registry.mu.Unlock()
	a.agents.mu.Lock()
	connected := len(a.agents.sessions)
	a.agents.mu.Unlock()
	st := &a.registry.stats
	sent := a.agents.dispatch.Counts()
	writeJSON(w, http.StatusOK, Stats{
		WorksSent: sent.Upserts, WorkDeletesSent: sent.Deletes, Failover: a.failover.Stats(),
		Clusters: clusters, ConnectedAgents: connected,
		Renewals: st.renewals.Load(), StatusReports: st.statusReports.Load(),
		StoreWrites: st.storeWrites.Load(), StoreConflicts: st.storeConflicts.Load(),
		Transitions: st.transitions.Load(), Events: st.eventsRecorded.Load(),
		RejectedAgentConn: a.agents.rejected.Load(),
		UnstoredClusters:  unstoredClusters, UnstoredLeases: unstoredLeases,
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// writeError answers with a Kubernetes Status object.
func writeError(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	s := status.Status()
	s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	writeJSON(w, int(s.Code), s)
}
