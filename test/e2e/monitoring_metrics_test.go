package e2e

import (
	"bufio"
	"os"
	"path/filepath"
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
// eviction, a scheduling attempt, a dispatched Work): when absent, the
// hub's source must at least name them.
func checkMonitoringMetrics(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	source := hubSource(t)
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
				if !strings.Contains(source, `"`+name+`"`) {
					t.Errorf("%s is used by the chart's rules or dashboard but the hub's source does not name it", name)
				}
				t.Logf("%s: no series yet (appears with its first event); named in hub/", name)
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

// hubSource returns the hub's Go files (not tests) in one string.
func hubSource(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("../../hub/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("hub sources: %v (%d files)", err, len(files))
	}
	var b strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}
