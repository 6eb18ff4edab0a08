package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	r := runEnv(t, nil, "--server", url, "get", "clusters")
	wantExit(t, r, 1)
	for _, want := range []string{"error: cannot reach the hub at " + url + ": ", "connection refused", "--server"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr = %q, want it to contain %q", r.stderr, want)
		}
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	r := runEnv(t, nil, "get", "leases", "--server", srv.URL, "--timeout", "50ms")
	wantExit(t, r, 1)
	want := "error: the hub at " + srv.URL + " did not answer within 50ms (raise --timeout, or check --server)"
	if !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr = %q, want it to start with %q", r.stderr, want)
	}
}

// An answer that is not a Status still gives a message with the code.
func TestNonStatusError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream exploded", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	r := runEnv(t, map[string]string{"FLOTILLA_SERVER": srv.URL + "/"}, "get", "clusters")
	wantExit(t, r, 1)
	want := "error: GET /apis/flotilla.io/v1alpha1/clusters: the server answered 502 Bad Gateway: \"upstream exploded\"\n"
	if diff := cmp.Diff(want, r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}

func TestBearerToken(t *testing.T) {
	hub := newFixtureHub(t)
	r := runEnv(t, map[string]string{"FLOTILLA_SERVER": hub.URL, "FLOTILLA_TOKEN": "s3cret"}, "describe", "cluster", "edge-1")
	wantExit(t, r, 0)
	r = run(t, hub, "get", "clusters")
	wantExit(t, r, 0)
	want := []string{"Bearer s3cret", "Bearer s3cret", "Bearer s3cret", ""}
	if diff := cmp.Diff(want, hub.sentAuth()); diff != "" {
		t.Errorf("Authorization headers (-want +got):\n%s", diff)
	}
}

// --server wins over $FLOTILLA_SERVER, and a base path is kept.
func TestServerFlagAndBasePath(t *testing.T) {
	hub := newFixtureHub(t)
	mux := http.NewServeMux()
	mux.Handle("/hub/", http.StripPrefix("/hub", hub.Config.Handler))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r := runEnv(t, map[string]string{"FLOTILLA_SERVER": "http://127.0.0.1:1"}, "get", "leases", "edge-1", "--server", srv.URL+"/hub/")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "edge-1-agent-7c9f") {
		t.Errorf("stdout = %q, want the edge-1 lease", r.stdout)
	}
}

func TestDefaultServer(t *testing.T) {
	inv := &invocation{App: &App{Getenv: func(string) string { return "" }}, server: defaultServer, timeout: time.Second}
	if got := inv.client().base; got != "http://127.0.0.1:7080" {
		t.Errorf("default server = %q", got)
	}
}
