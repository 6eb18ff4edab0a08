package hub

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/promcheck"
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
