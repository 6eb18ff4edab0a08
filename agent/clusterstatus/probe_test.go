package clusterstatus

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestAPIServerProbe(t *testing.T) {
	const failing = "[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\n[-]poststarthook/rbac failed: not finished\nreadyz check failed\n"
	for _, tc := range []struct {
		name string
		// responses maps a path to its status code and body; other paths
		// get 404.
		responses map[string]response
		wantPaths []string
		wantErr   string // "" means healthy
	}{
		{
			name:      "ready",
			responses: map[string]response{"/readyz": {http.StatusOK, "ok"}},
			wantPaths: []string{"/readyz"},
		},
		{
			name:      "no readyz falls back to healthz",
			responses: map[string]response{"/healthz": {http.StatusOK, "ok"}},
			wantPaths: []string{"/readyz", "/healthz"},
		},
		{
			name:      "not ready lists the failed checks",
			responses: map[string]response{"/readyz": {http.StatusInternalServerError, failing}},
			wantPaths: []string{"/readyz"},
			wantErr:   "GET /readyz: HTTP 500: etcd failed: reason withheld; poststarthook/rbac failed: not finished",
		},
		{
			name:      "unhealthy without details",
			responses: map[string]response{"/healthz": {http.StatusServiceUnavailable, ""}},
			wantPaths: []string{"/readyz", "/healthz"},
			wantErr:   "GET /healthz: HTTP 503",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var paths []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				paths = append(paths, r.URL.Path)
				resp, ok := tc.responses[r.URL.Path]
				if !ok {
					resp = response{http.StatusNotFound, "404 page not found"}
				}
				w.WriteHeader(resp.code)
				w.Write([]byte(resp.body))
			}))
			defer srv.Close()
			client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			err = APIServerProbe(client.Discovery().RESTClient())(t.Context())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("probe = %v, want healthy", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Errorf("probe = %v, want an error starting with %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantPaths, paths); diff != "" {
				t.Errorf("paths asked (-want +got):\n%s", diff)
			}
		})
	}
}

type response struct {
	code int
	body string
}
