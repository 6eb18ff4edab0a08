package e2e

import (
	"bufio"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// monitoringMetricsFile lists the metrics the hub chart's PrometheusRule and
// Grafana dashboard use (kept equal to them by test/tools/promtool).
const monitoringMetricsFile = "../tools/promtool/testdata/metric-names.txt"

// checkMonitoringMetrics fails the test for each metric the chart's rules
// and dashboard use that a real hub's /metrics does not have. Families
// marked "event" have no series before their first observation (an
// eviction, a scheduling attempt, a dispatched Work): those are skipped
// when absent, and must have their listed type when present.
func checkMonitoringMetrics(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	f, err := os.Open(monitoringMetricsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	checked := 0
	for s.Scan() {
		line, _, _ := strings.Cut(s.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name, event := fields[0], len(fields) > 1 && fields[1] == "event"
		if _, ok := families[name]; !ok {
			if event {
				t.Logf("%s: no series yet (appears with its first event)", name)
				continue
			}
			t.Errorf("%s is used by the chart's rules or dashboard but not in the hub's /metrics", name)
		}
		checked++
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatalf("%s lists no metric", monitoringMetricsFile)
	}
	t.Logf("%d metrics the chart's monitoring uses found in /metrics", checked)
}
