package hub

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/promcheck"
	"github.com/flotilla-io/flotilla/internal/writelimit"
)

// TestWorkqueueMetricsCoverTheHubsQueues: the work queue metrics of the
// process (component-base's provider, which the embedded API server brings
// in) include a queue made like the controllers' and nothing else.
func TestWorkqueueMetricsCoverTheHubsQueues(t *testing.T) {
	q := controller.NewQueue("metrics-test", func(context.Context, string) error { return nil }, slog.New(slog.DiscardHandler))
	q.Add("a")
	q.Add("b")
	families, err := workqueueGatherer{}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), "workqueue_") {
			t.Errorf("family %s passed on", mf.GetName())
		}
		byName[mf.GetName()] = mf
	}
	queue := map[string]string{"name": "metrics-test"}
	if v := promcheck.Value(byName, "workqueue_depth", queue); v != 2 {
		t.Errorf("workqueue_depth{name=metrics-test} = %v, want 2", v)
	}
	if v := promcheck.Value(byName, "workqueue_adds_total", queue); v != 2 {
		t.Errorf("workqueue_adds_total{name=metrics-test} = %v, want 2", v)
	}
	if _, problems, err := promcheck.Gather(prometheus.Gatherers{workqueueGatherer{}}); err != nil || len(problems) > 0 {
		t.Errorf("the work queue families: %v, problems %q", err, problems)
	}
}

// TestInstrumentCountsWrites: the hub's clients' writes are counted by
// resource, subresource and verb when they succeed, as conflicts when the
// API server answers 409, and not at all when they fail otherwise; reads
// are only in rest_client_requests_total.
func TestInstrumentCountsWrites(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("answer") {
		case "conflict":
			w.WriteHeader(http.StatusConflict)
		case "invalid":
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
	}))
	t.Cleanup(srv.Close)
	m := newHubMetrics(writelimit.New(1))
	client, err := rest.HTTPClientFor(m.instrument(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	bindings := srv.URL + "/apis/flotilla.io/v1alpha1/namespaces/ns/resourcebindings"
	for _, r := range []struct{ method, url string }{
		{http.MethodGet, bindings},
		{http.MethodPost, bindings},
		{http.MethodPut, bindings + "/b/status"},
		{http.MethodPut, bindings + "/b/status?answer=conflict"},
		{http.MethodPut, bindings + "/b?answer=invalid"},
		{http.MethodDelete, srv.URL + "/not/an/api/path"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), r.method, r.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	families, problems, err := promcheck.Gather(m.registry)
	if err != nil || len(problems) > 0 {
		t.Fatalf("gather: %v, problems %q", err, problems)
	}
	type series struct {
		name, resource, subresource, verb string
		want                              float64
	}
	for _, s := range []series{
		{"flotilla_api_writes_total", "resourcebindings", "", "create", 1},
		{"flotilla_api_writes_total", "resourcebindings", "status", "update", 1},
		{"flotilla_api_write_conflicts_total", "resourcebindings", "status", "update", 1},
		{"flotilla_api_writes_total", "other", "", "delete", 1},
	} {
		labels := map[string]string{"resource": s.resource, "subresource": s.subresource, "verb": s.verb}
		if got := promcheck.Value(families, s.name, labels); got != s.want {
			t.Errorf("%s%v = %v, want %v", s.name, labels, got, s.want)
		}
	}
	if n := len(families["flotilla_api_writes_total"].GetMetric()); n != 3 {
		t.Errorf("flotilla_api_writes_total has %d series, want 3 (the failed update and the GET not counted)", n)
	}
	if got := promcheck.Value(families, "rest_client_requests_total", map[string]string{"method": "GET", "code": "200"}); got != 1 {
		t.Errorf("rest_client_requests_total of the GET = %v, want 1", got)
	}
}
