package docgen

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestFamiliesAndMetricTable(t *testing.T) {
	ends := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_ends_total", Help: "Sessions that ended, by reason."}, []string{"reason"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "test_request_duration_seconds", Help: "Latency | by verb and host."}, []string{"verb", "host"})
	transport := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_transport", Help: "1 for the transport."}, []string{"transport"})
	transport.WithLabelValues("quic").Set(1)
	info := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "test_build_info", Help: "Always 1.",
		ConstLabels: prometheus.Labels{"version": "v1", "goversion": "go1"}}, func() float64 { return 1 })
	connected := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_connected", Help: "1 while <connected>."})

	families, err := Families(ends, latency, transport, info, connected, prometheus.NewGoCollector())
	if err != nil {
		t.Fatal(err)
	}
	got, err := MetricTable(Without(families, "go_"))
	if err != nil {
		t.Fatal(err)
	}
	want := "| metric | type | labels | help |\n" +
		"|---|---|---|---|\n" +
		"| `test_build_info` | gauge | `goversion, version` | Always 1. |\n" +
		"| `test_connected` | gauge |  | 1 while &lt;connected&gt;. |\n" +
		"| `test_ends_total` | counter | `reason` | Sessions that ended, by reason. |\n" +
		"| `test_request_duration_seconds` | histogram | `host, verb` | Latency \\| by verb and host. |\n" +
		"| `test_transport` | gauge | `transport` | 1 for the transport. |\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MetricTable (-want +got):\n%s", diff)
	}
	// The series made for the gathering are gone again; the others stay.
	if n := testutilCount(ends); n != 0 {
		t.Errorf("test_ends_total has %d series after Families, want 0", n)
	}
	if n := testutilCount(transport); n != 1 {
		t.Errorf("test_transport has %d series after Families, want 1", n)
	}
}

func testutilCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	n := 0
	for range ch {
		n++
	}
	return n
}

func TestDescs(t *testing.T) {
	a := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "A."})
	b := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "b", Help: "B."}, []string{"x"})
	got := Descs(b, a, a)
	if len(got) != 2 || !strings.Contains(got[0], `"a_total"`) || !strings.Contains(got[1], `"b"`) {
		t.Errorf("Descs = %q, want a_total's and b's, sorted, once each", got)
	}
}
