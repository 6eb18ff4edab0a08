package apiwrites

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		method, url, contentType string
		want                     Write
		ok                       bool
	}{
		// Reads are not writes.
		{"GET", "/apis/flotilla.io/v1alpha1/namespaces/ns/resourcebindings/b", "", Write{}, false},
		{"GET", "/apis/flotilla.io/v1alpha1/resourcebindings?watch=true", "", Write{}, false},
		{"HEAD", "/api/v1/namespaces", "", Write{}, false},
		// Namespaced and cluster-scoped, core and named groups.
		{"POST", "/apis/flotilla.io/v1alpha1/namespaces/ns/resourcebindings", "application/json", Write{"resourcebindings", "", Create}, true},
		{"PUT", "/apis/flotilla.io/v1alpha1/namespaces/ns/resourcebindings/b", "application/json", Write{"resourcebindings", "", Update}, true},
		{"PUT", "/apis/flotilla.io/v1alpha1/namespaces/ns/resourcebindings/b/status", "application/json", Write{"resourcebindings", "status", Update}, true},
		{"POST", "/apis/flotilla.io/v1alpha1/namespaces/flotilla-es-m1/works", "application/vnd.kubernetes.protobuf", Write{"works", "", Create}, true},
		{"PATCH", "/apis/flotilla.io/v1alpha1/clusters/m1/status", "application/merge-patch+json", Write{"clusters", "status", Patch}, true},
		{"PATCH", "/apis/flotilla.io/v1alpha1/clusters/m1", "application/json-patch+json", Write{"clusters", "", Patch}, true},
		{"PATCH", "/apis/coordination.k8s.io/v1/namespaces/flotilla-cluster-lease/leases/m1", "application/strategic-merge-patch+json", Write{"leases", "", Patch}, true},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/status", "application/apply-patch+yaml", Write{"deployments", "status", Apply}, true},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d", "application/apply-patch+cbor", Write{"deployments", "", Apply}, true},
		{"POST", "/api/v1/namespaces/ns/events", "application/json", Write{"events", "", Create}, true},
		{"DELETE", "/apis/flotilla.io/v1alpha1/namespaces/flotilla-es-m1/works/w", "", Write{"works", "", Delete}, true},
		{"DELETE", "/apis/flotilla.io/v1alpha1/namespaces/flotilla-es-m1/works", "", Write{"works", "", DeleteCollection}, true},
		// Namespaces themselves, and their subresources.
		{"POST", "/api/v1/namespaces", "application/json", Write{"namespaces", "", Create}, true},
		{"DELETE", "/api/v1/namespaces/flotilla-es-m1", "", Write{"namespaces", "", Delete}, true},
		{"PUT", "/api/v1/namespaces/flotilla-es-m1/finalize", "application/json", Write{"namespaces", "finalize", Update}, true},
		// Other subresources and a query string.
		{"POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", "application/json", Write{"serviceaccounts", "token", Create}, true},
		{"POST", "/apis/flotilla.io/v1alpha1/namespaces/ns/resourcebindings?fieldManager=hub", "application/json", Write{"resourcebindings", "", Create}, true},
		// Paths that are not resources count as other.
		{"POST", "/apis/authentication.k8s.io/v1", "application/json", Write{Other, "", Create}, true},
		{"POST", "/healthz", "", Write{Other, "", Create}, true},
		{"PUT", "/", "", Write{Other, "", Update}, true},
		{"PATCH", "/apis/x.io/v1/Weird_Resource/n", "application/merge-patch+json", Write{Other, "", Patch}, true},
		{"PUT", "/apis/x.io/v1/things/n/Status%20x", "application/json", Write{"things", Other, Update}, true},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, "https://hub.example"+tt.url, nil)
		if tt.contentType != "" {
			req.Header.Set("Content-Type", tt.contentType)
		}
		got, ok := Classify(req)
		if ok != tt.ok || got != tt.want {
			t.Errorf("Classify(%s %s, %q) = %+v, %v; want %+v, %v", tt.method, tt.url, tt.contentType, got, ok, tt.want, tt.ok)
		}
	}
}

func TestResultOf(t *testing.T) {
	for code, want := range map[int]Result{0: Failed, 200: Succeeded, 201: Succeeded, 204: Succeeded, 409: Conflicted, 404: Failed, 422: Failed, 500: Failed} {
		if got := ResultOf(code); got != want {
			t.Errorf("ResultOf(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestTransportCountsWrites: a client's writes through a wrapped transport
// are counted by result; its reads and failed writes are not.
func TestTransportCountsWrites(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("code") == "409":
			w.WriteHeader(http.StatusConflict)
		case r.URL.Query().Get("code") == "500":
			w.WriteHeader(http.StatusInternalServerError)
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	t.Cleanup(srv.Close)
	var tally Tally
	client := &http.Client{Transport: Transport(srv.Client().Transport, tally.Observe)}
	works := srv.URL + "/apis/flotilla.io/v1alpha1/namespaces/ns/works"
	requests := []struct{ method, url string }{
		{"GET", works},
		{"POST", works}, {"POST", works}, {"POST", works + "?code=409"}, {"POST", works + "?code=500"},
		{"PUT", works + "/w/status"}, {"PUT", works + "/w/status?code=409"},
	}
	var wg sync.WaitGroup
	for _, r := range requests {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), r.method, r.url, nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	succeeded, conflicts := tally.Counts()
	create, status := Write{"works", "", Create}, Write{"works", "status", Update}
	if diff := cmp.Diff(Counts{create: 2, status: 1}, succeeded); diff != "" {
		t.Errorf("succeeded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Counts{create: 1, status: 1}, conflicts); diff != "" {
		t.Errorf("conflicts (-want +got):\n%s", diff)
	}
}

func TestTable(t *testing.T) {
	before := Counts{{"works", "", Create}: 10, {"leases", "", Update}: 4}
	after := Counts{{"works", "", Create}: 310, {"leases", "", Update}: 4, {"resourcebindings", "", Create}: 100, {"resourcebindings", "status", Update}: 150}
	conflicts := Counts{{"resourcebindings", "", Update}: 3}
	got := Table(after.Minus(before), conflicts, 100, "binding")
	want := `| resource | subresource | verb | writes | per binding | conflicts |
|---|---|---|---:|---:|---:|
| resourcebindings |  | create | 100 | 1.00 | 0 |
| resourcebindings |  | update | 0 | 0.00 | 3 |
| resourcebindings | status | update | 150 | 1.50 | 0 |
| works |  | create | 300 | 3.00 | 0 |
| **total** | | | 550 | **5.50** | 3 |
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Table (-want +got):\n%s", diff)
	}
	if got := Table(nil, nil, 0, "eviction"); !strings.Contains(got, "| **total** | | | 0 | **n/a** | 0 |") {
		t.Errorf("Table of nothing per 0 = %q, want a total n/a", got)
	}
}

func TestWriteStringAndOrder(t *testing.T) {
	status := Write{Resource: "resourcebindings", Subresource: "status", Verb: Update}
	spec := Write{Resource: "resourcebindings", Verb: Update}
	if got, want := status.String(), "update resourcebindings/status"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := spec.String(), "update resourcebindings"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if Compare(spec, status) >= 0 || Compare(status, spec) <= 0 || Compare(spec, spec) != 0 {
		t.Errorf("Compare does not order %v before %v", spec, status)
	}
}
