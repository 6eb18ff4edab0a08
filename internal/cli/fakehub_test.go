package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeHub serves the hub's HTTP contract over in-memory objects, for unit
// tests of the CLI. It records every request it gets.
type fakeHub struct {
	*httptest.Server

	mu       sync.Mutex
	clusters map[string]*v1alpha1.Cluster
	leases   map[string]*coordinationv1.Lease
	events   []corev1.Event
	rv       int
	// objects are what apply stores and the reading paths serve: templates,
	// policies, and the bindings and Works tests add, by objectKey.
	objects map[objectKey]map[string]any
	// rebalancers are the WorkloadRebalancers, by name; rebalance, if set,
	// plays the hub's controller on each GET of one of them.
	rebalancers map[string]*appsv1alpha1.WorkloadRebalancer
	rebalance   func(rb *appsv1alpha1.WorkloadRebalancer)

	// conflicts is how many PUTs still get 409 Conflict; before answering
	// one, onConflict (if set) changes the stored cluster as a concurrent
	// writer would.
	conflicts  int
	onConflict func(cl *v1alpha1.Cluster)

	requests []string           // "GET /path?query"
	auth     []string           // Authorization header of each request
	puts     []v1alpha1.Cluster // bodies of the PUTs, as sent
	posts    []string           // bodies of the POSTs, as sent
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{
		clusters: map[string]*v1alpha1.Cluster{}, leases: map[string]*coordinationv1.Lease{},
		objects: map[objectKey]map[string]any{}, rebalancers: map[string]*appsv1alpha1.WorkloadRebalancer{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+clustersPath, h.listClusters)
	mux.HandleFunc("GET "+clustersPath+"/{name}", h.getCluster)
	mux.HandleFunc("PUT "+clustersPath+"/{name}", h.putCluster)
	mux.HandleFunc("GET "+leasesPath, h.listLeases)
	mux.HandleFunc("GET "+leasesPath+"/{name}", h.getLease)
	mux.HandleFunc("GET "+eventsPath, h.listEvents)
	h.routeObjects(mux)
	h.routeRebalancers(mux)
	h.Server = httptest.NewServer(h.record(mux))
	t.Cleanup(h.Close)
	return h
}

func (h *fakeHub) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.mu.Lock()
		h.requests = append(h.requests, r.Method+" "+r.URL.RequestURI())
		h.auth = append(h.auth, r.Header.Get("Authorization"))
		if r.Method == http.MethodPost {
			h.posts = append(h.posts, string(body))
		}
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// addCluster stores a cluster, stamping kind and resourceVersion.
func (h *fakeHub) addCluster(cl v1alpha1.Cluster) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl.TypeMeta = v1alpha1.TypeMeta(v1alpha1.KindCluster)
	h.rv++
	cl.ResourceVersion = strconv.Itoa(h.rv)
	h.clusters[cl.Name] = &cl
}

func (h *fakeHub) addLease(l coordinationv1.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
	l.Namespace = v1alpha1.LeaseNamespace
	h.leases[l.Name] = &l
}

// cluster returns a copy of the stored cluster.
func (h *fakeHub) cluster(t *testing.T, name string) v1alpha1.Cluster {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	cl, ok := h.clusters[name]
	if !ok {
		t.Fatalf("fake hub has no cluster %q", name)
	}
	// Cluster has no generated DeepCopy: copy through JSON.
	data, err := json.Marshal(cl)
	if err != nil {
		t.Fatal(err)
	}
	var out v1alpha1.Cluster
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *fakeHub) sentPuts() []v1alpha1.Cluster {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.puts)
}

func (h *fakeHub) sentAuth() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.auth)
}

func (h *fakeHub) sentPosts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.posts)
}

func (h *fakeHub) sent() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.requests)
}

func (h *fakeHub) listClusters(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := v1alpha1.ClusterList{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindClusterList), Items: []v1alpha1.Cluster{}}
	for _, name := range sortedKeys(h.clusters) {
		list.Items = append(list.Items, *h.clusters[name])
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *fakeHub) getCluster(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl, ok := h.clusters[r.PathValue("name")]
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("clusters %q not found", r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, cl)
}

// putCluster honours labels, annotations and spec, stamps timeAdded on new
// taints and keeps the unschedulable taint in line with spec.unschedulable.
func (h *fakeHub) putCluster(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	body, err := io.ReadAll(r.Body)
	var in, sent v1alpha1.Cluster
	if err == nil {
		err = errors.Join(json.Unmarshal(body, &in), json.Unmarshal(body, &sent))
	}
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	h.puts = append(h.puts, sent)
	name := r.PathValue("name")
	cl, ok := h.clusters[name]
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("clusters %q not found", name))
		return
	}
	if h.conflicts > 0 {
		h.conflicts--
		if h.onConflict != nil {
			h.onConflict(cl)
		}
		h.rv++
		cl.ResourceVersion = strconv.Itoa(h.rv)
	}
	if in.ResourceVersion != cl.ResourceVersion {
		writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict, fmt.Sprintf(
			"Operation cannot be fulfilled on clusters %q: the object has been modified; please apply your changes to the latest version and try again", name))
		return
	}
	cl.Labels, cl.Annotations, cl.Spec = in.Labels, in.Annotations, in.Spec
	stampTaints(&cl.Spec)
	h.rv++
	cl.ResourceVersion = strconv.Itoa(h.rv)
	writeJSON(w, http.StatusOK, cl)
}

// fakeStamp is the timeAdded the fake hub gives new taints.
var fakeStamp = metav1.NewTime(testNow)

func stampTaints(spec *v1alpha1.ClusterSpec) {
	spec.Taints = slices.DeleteFunc(spec.Taints, func(t corev1.Taint) bool {
		return t.Key == v1alpha1.TaintClusterUnschedulable
	})
	if spec.Unschedulable {
		spec.Taints = append(spec.Taints, corev1.Taint{Key: v1alpha1.TaintClusterUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	for i := range spec.Taints {
		if spec.Taints[i].TimeAdded == nil {
			spec.Taints[i].TimeAdded = &fakeStamp
		}
	}
}

func (h *fakeHub) listLeases(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "LeaseList"}, Items: []coordinationv1.Lease{}}
	for _, name := range sortedKeys(h.leases) {
		list.Items = append(list.Items, *h.leases[name])
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *fakeHub) getLease(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.leases[r.PathValue("name")]
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("leases.coordination.k8s.io %q not found", r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// listEvents filters on involvedObject.kind, .name and .namespace, given
// in fieldSelector or as plain query parameters; each is optional.
func (h *fakeHub) listEvents(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	filters := map[string]string{}
	q := r.URL.Query()
	for _, key := range []string{"involvedObject.kind", "involvedObject.name", "involvedObject.namespace"} {
		if v := q.Get(key); v != "" {
			filters[key] = v
		}
	}
	for _, term := range strings.Split(q.Get("fieldSelector"), ",") {
		if key, value, ok := strings.Cut(term, "="); ok {
			filters[key] = value
		}
	}
	list := corev1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: []corev1.Event{}}
	for _, e := range h.events {
		got := map[string]string{
			"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.name": e.InvolvedObject.Name,
			"involvedObject.namespace": e.InvolvedObject.Namespace,
		}
		if matches(got, filters) {
			list.Items = append(list.Items, e)
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// matches reports whether got has every key and value of want.
func matches(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
